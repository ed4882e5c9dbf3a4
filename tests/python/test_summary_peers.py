"""tf.summary against TensorFlow 2.21 with TensorBoard 2.21 itself: the same calls write event
files on each side, and TensorFlow reads both (tf.compat.v1.train.summary_iterator,
tf.make_ndarray, tf.io.decode_png for the images): the same tags, steps, plugins, descriptions,
tensors' dtypes and shapes, values (histogram edges to 1e-12) and pixels. TensorFlow runs in a
subprocess with the peers' Python (test_keras_archive_peers.run_keras); skipped without one, or
where it has no TensorBoard (tf.summary.scalar lives in the tensorboard package: pip install
tensorboard into that venv)."""

import json
from pathlib import Path

import numpy as np
import pytest

import crossover
from crossover import _summary_ops_v2
from test_keras_archive_peers import run_keras

# Both sides run this with `tf` and `summary_ops_v2` bound to their own modules.
WRITE = """
import numpy as np

def write(tf, summary_ops_v2, logdir):
    rng = np.random.default_rng(0)
    returned = []
    writer = tf.summary.create_file_writer(logdir + "/v2")
    returned.append(tf.summary.scalar("outside", 1.0, step=0))
    with writer.as_default(step=3):
        returned.append(tf.summary.scalar("loss", 0.25))
        returned.append(tf.summary.scalar("acc", np.float64(0.5), step=7, description="d"))
        returned.append(tf.summary.scalar("count", np.int64(3), step=8))
        tf.summary.histogram("weights", rng.normal(size=1000), step=1)
        tf.summary.histogram("few", np.array([1.0, 2.0, 2.0, 5.0]), step=2, buckets=4)
        tf.summary.histogram("same", np.array([3.0, 3.0]), step=2)
        tf.summary.histogram("empty", np.zeros(0), step=2, buckets=3)
        tf.summary.image("rgb", rng.random((4, 5, 6, 3)).astype(np.float32) * 1.2 - 0.1,
                         step=4, max_outputs=3)
        tf.summary.image("rgba", rng.integers(0, 256, (1, 3, 2, 4)).astype(np.uint8), step=4)
        tf.summary.image("gray", rng.random((2, 3, 4, 1)), step=4, max_outputs=5)
        tf.summary.text("note", "hello **world**", step=5)
        with tf.summary.record_if(False):
            returned.append(tf.summary.scalar("skipped", 1.0, step=6))
    writer.close()
    legacy = summary_ops_v2.create_file_writer_v2(logdir + "/legacy")
    with legacy.as_default():
        returned.append(summary_ops_v2.scalar("dropped", 1.0, step=0))
        with summary_ops_v2.always_record_summaries():
            summary_ops_v2.scalar("loss", 0.5, step=1)
            summary_ops_v2.scalar("acc", 0.75, family="train", step=2)
            summary_ops_v2.histogram("h", np.array([1.0, -2.5, 0.0, 0.25, 7.0]), step=3)
    legacy.close()
    return [bool(r) for r in returned]
"""

# TensorFlow reads a folder of event files: each summary value as JSON.
READ = """
def read(tf, folder):
    import glob
    out = []
    for name in sorted(glob.glob(folder + "/events.out.tfevents.*")):
        for event in tf.compat.v1.train.summary_iterator(name):
            for v in event.summary.value:
                plugin = v.metadata.plugin_data.plugin_name
                row = {"tag": v.tag, "step": event.step, "plugin": plugin,
                       "description": v.metadata.summary_description}
                if v.HasField("tensor"):
                    t = tf.make_ndarray(v.tensor)
                    row.update(dtype=str(t.dtype), shape=list(t.shape))
                    if plugin == "images":
                        row["value"] = [t[0].decode(), t[1].decode()] + [
                            tf.io.decode_png(p).numpy().tolist() for p in t[2:]]
                    elif t.dtype == object:
                        row["value"] = [s.decode() for s in t.reshape(-1)]
                    else:
                        row["value"] = t.tolist()
                elif v.HasField("histo"):
                    h = v.histo
                    row["value"] = [h.min, h.max, h.num, h.sum, h.sum_squares,
                                    list(h.bucket_limit), list(h.bucket)]
                else:
                    row["value"] = v.simple_value
                out.append(row)
    return out
"""

TENSORFLOW = """
import json
import tensorflow as tf
from tensorflow.python.ops import summary_ops_v2
import importlib.util
if importlib.util.find_spec("tensorboard") is None:  # tf.summary.scalar would raise
    print(json.dumps({{"no_tensorboard": "no module named 'tensorboard'"}}))
    raise SystemExit(0)
{write}
{read}
returned = write(tf, summary_ops_v2, "tf")
out = {{"returned": returned}}
for side in ("tf", "crossover"):
    for kind in ("v2", "legacy"):
        out[side + "/" + kind] = read(tf, side + "/" + kind)
print(json.dumps(out))
"""


def close(a, b) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return bool(np.isclose(a, b, rtol=1e-12, atol=0))
    return a == b


def test_event_files_read_by_tensorflow_are_the_same(tmp_path: Path) -> None:
    namespace: dict = {}
    exec(WRITE, namespace)
    ours = namespace["write"](crossover, _summary_ops_v2, str(tmp_path / "crossover"))
    theirs = run_keras(TENSORFLOW.format(write=WRITE, read=READ), tmp_path)
    if "no_tensorboard" in theirs:
        pytest.skip(
            f"the peers' TensorFlow has no TensorBoard ({theirs['no_tensorboard']}): "
            "pip install tensorboard into that venv to compare tf.summary"
        )
    assert ours == theirs["returned"] == [False, True, True, True, False, False]
    for kind in ("v2", "legacy"):
        tf_rows, our_rows = theirs[f"tf/{kind}"], theirs[f"crossover/{kind}"]
        assert [r["tag"] for r in our_rows] == [r["tag"] for r in tf_rows]
        for tf_row, our_row in zip(tf_rows, our_rows):
            assert close(our_row, tf_row) or all(
                close(our_row[k], tf_row[k]) for k in tf_row
            ), json.dumps({"tensorflow": tf_row, "crossover": our_row})[:3000]
