"""tf.summary (crossover/summary.py): the event files a script's own loop writes, read back with
tensorboardX's Event protobuf as TensorBoard reads them; the TensorFlow 2 aliases tf.optimizers,
tf.losses, tf.metrics and tf.initializers; and TensorFlow's private `tensorflow.python...` modules
under `python -m crossover` (served, or one line naming the public API). Against TensorFlow 2.21
itself: test_summary_peers.py."""

import glob
import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

import crossover as tf
from crossover import _summary_ops_v2, keras


def events(folder) -> list[tuple[str, int, str, object]]:
    """(tag, step, plugin, value) of every summary value in `folder`'s event files, in order; a
    tensor's value as a numpy array, a legacy one as its simple_value or HistogramProto."""
    from tensorboardX.proto import event_pb2

    found = []
    files = sorted(glob.glob(os.path.join(str(folder), "events.out.tfevents.*")))
    assert files, f"no event file in {folder}"
    for name in files:
        data = Path(name).read_bytes()
        at = 0
        while at < len(data):
            (length,) = struct.unpack_from("<Q", data, at)
            event = event_pb2.Event.FromString(data[at + 12 : at + 12 + length])
            at += 12 + length + 4
            for v in event.summary.value:
                plugin = v.metadata.plugin_data.plugin_name
                if v.HasField("tensor"):
                    t = v.tensor
                    shape = [d.size for d in t.tensor_shape.dim]
                    if t.string_val:
                        value = np.array(list(t.string_val), dtype=object).reshape(shape)
                    else:
                        dtype = np.float32 if t.dtype == 1 else np.float64
                        value = np.frombuffer(t.tensor_content, dtype=dtype).reshape(shape)
                elif v.HasField("histo"):
                    value = v.histo
                else:
                    value = v.simple_value
                found.append((v.tag, event.step, plugin, value))
    return found


def unpng(data: bytes) -> np.ndarray:
    """The pixels of a PNG this module writes (8 bits, filter 0 on every row)."""
    width, height, _, color = struct.unpack(">IIBB", data[16:26])
    channels = {0: 1, 4: 2, 2: 3, 6: 4}[color]
    idat = data[data.index(b"IDAT") + 4 : data.index(b"IEND") - 8]
    rows = zlib.decompress(idat)
    stride = 1 + width * channels
    assert all(rows[r * stride] == 0 for r in range(height))
    row = [rows[r * stride + 1 : (r + 1) * stride] for r in range(height)]
    pixels = [np.frombuffer(r, np.uint8) for r in row]
    return np.stack(pixels).reshape(height, width, channels)


def test_scalars_go_to_the_default_writer_at_the_given_or_default_step(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))
    assert tf.summary.scalar("outside", 1.0, step=0) is False  # no default writer
    with writer.as_default(step=5):
        assert tf.summary.scalar("loss", 0.25) is True
        assert tf.summary.scalar("loss", np.float64(0.125), step=6) is True
        assert tf.summary.scalar("acc", tf.constant(0.5), step=6) is True
    with writer.as_default():
        tf.summary.experimental.set_step(9)
        tf.summary.scalar("loss", 2, description="the loss")
        tf.summary.experimental.set_step(None)
        with pytest.raises(ValueError, match="No step set"):
            tf.summary.scalar("loss", 1.0)
        with pytest.raises(ValueError, match="scalar"):
            tf.summary.scalar("loss", [1.0, 2.0], step=1)
    writer.close()
    got = [(tag, step, plugin, float(v)) for tag, step, plugin, v in events(tmp_path)]
    assert got == [
        ("loss", 5, "scalars", 0.25),
        ("loss", 6, "scalars", 0.125),
        ("acc", 6, "scalars", 0.5),
        ("loss", 9, "scalars", 2.0),
    ]
    assert glob.glob(str(tmp_path / "events.out.tfevents.*.v2"))  # TensorFlow's file name


def test_histograms_are_tensorboards_equal_width_buckets(tmp_path):
    writer = tf.summary.create_file_writer(tmp_path)
    with writer.as_default():
        tf.summary.histogram("few", [1.0, 2.0, 2.0, 5.0], step=1, buckets=4)
        tf.summary.histogram("same", np.full((2, 3), 3.0), step=1)
        tf.summary.histogram("empty", np.zeros(0), step=1, buckets=2)
        tf.summary.histogram("many", np.arange(1000.0), step=2)
    writer.close()
    got = {tag: v for tag, _, plugin, v in events(tmp_path) if plugin == "histograms"}
    np.testing.assert_array_equal(
        got["few"], [[1, 2, 1], [2, 3, 2], [3, 4, 0], [4, 5, 1]]
    )
    same = got["same"]
    assert same.shape == (30, 3) and (same[:, :2] == 3.0).all()
    assert same[:, 2].tolist() == [0.0] * 29 + [6.0]
    np.testing.assert_array_equal(got["empty"], np.zeros((2, 3)))
    many = got["many"]
    assert many.shape == (30, 3) and many[:, 2].sum() == 1000 and many[-1, 1] == 999.0


def test_images_are_pngs_scaled_as_convert_image_dtype(tmp_path):
    floats = np.array([0.0, 0.5, 1.0, 1.5, -0.2, 0.999], np.float32).reshape(1, 2, 3, 1)
    rgb = np.arange(2 * 2 * 4 * 3, dtype=np.uint8).reshape(2, 2, 4, 3)
    writer = tf.summary.create_file_writer(tmp_path)
    with writer.as_default():
        tf.summary.image("gray", floats, step=3)
        tf.summary.image("rgb", rgb, step=3, max_outputs=1)
        with pytest.raises(ValueError, match="k, height, width, channels"):
            tf.summary.image("bad", rgb[0], step=3)
        with pytest.raises(ValueError, match="channels"):
            tf.summary.image("bad", np.zeros((1, 2, 2, 5), np.float32), step=3)
        with pytest.raises(TypeError, match="uint8"):
            tf.summary.image("bad", np.zeros((1, 2, 2, 3), np.int32), step=3)
    writer.close()
    got = {tag: v for tag, _, plugin, v in events(tmp_path)}
    gray, rgb_written = got["gray"], got["rgb"]
    assert list(gray[:2]) == [b"3", b"2"] and len(gray) == 3  # width, height, one PNG
    # x * 255.5, clipped to [0, 255], truncated: 0.5 -> 127, 0.999 -> 255.
    np.testing.assert_array_equal(unpng(gray[2])[..., 0], [[0, 127, 255], [255, 0, 255]])
    assert len(rgb_written) == 3  # max_outputs=1 of 2
    np.testing.assert_array_equal(unpng(rgb_written[2]), rgb[0])


def test_text_and_record_if_and_flush(tmp_path):
    writer = tf.summary.create_file_writer(tmp_path, flush_millis=600000, max_queue=100)
    with writer.as_default(step=1):
        tf.summary.text("note", "hello **world**")
        with tf.summary.record_if(False):
            assert tf.summary.should_record_summaries() is False
            assert tf.summary.scalar("skipped", 1.0) is False
        with tf.summary.record_if(lambda: True):
            assert tf.summary.scalar("kept", 1.0) is True
        tf.summary.flush()
    got = events(tmp_path)
    assert [(tag, plugin) for tag, _, plugin, _ in got] == [("note", "text"), ("kept", "scalars")]
    assert got[0][3].tolist() == b"hello **world**"
    writer.close()
    with pytest.raises(RuntimeError, match="closed"), writer.as_default(step=1):
        tf.summary.scalar("late", 1.0)


def test_noop_writer_and_bad_arguments(tmp_path):
    with tf.summary.create_noop_writer().as_default(step=1):
        assert tf.summary.scalar("x", 1.0) is True
    with pytest.raises(ValueError, match="logdir"):
        tf.summary.create_file_writer(None)
    with pytest.raises(TypeError, match="max_queue"):
        tf.summary.create_file_writer(tmp_path, max_queue="10")
    with pytest.raises(AttributeError, match="trace_on is not supported"):
        tf.summary.trace_on


def test_summary_ops_v2_writes_legacy_values_only_when_always_recording(tmp_path):
    writer = _summary_ops_v2.create_file_writer_v2(str(tmp_path))
    with writer.as_default():
        assert _summary_ops_v2.scalar("dropped", 1.0, step=0) is False  # TensorFlow's default
        with _summary_ops_v2.always_record_summaries():
            assert _summary_ops_v2.scalar("loss", 0.5, step=1) is True
            _summary_ops_v2.scalar("acc", 0.75, family="train", step=2)
            _summary_ops_v2.histogram("w", [1.0, -1.0, 0.0], step=3)
    writer.close()
    got = events(tmp_path)
    assert [(tag, step) for tag, step, _, _ in got] == [
        ("loss", 1), ("train/train/acc", 2), ("w", 3)
    ]
    assert got[0][3] == 0.5
    histo = got[2][3]
    assert (histo.min, histo.max, histo.num, histo.sum) == (-1.0, 1.0, 3.0, 0.0)


def test_tensorflow_2_aliases_are_the_keras_modules():
    assert tf.optimizers is keras.optimizers and tf.losses is keras.losses
    assert tf.metrics is keras.metrics and tf.initializers is keras.initializers
    assert tf.optimizers.Adam is keras.optimizers.Adam


SCRIPT = """
import glob, sys
import tensorflow as tf
from tensorflow.python.ops import summary_ops_v2
from tensorflow.python.client import device_lib
import tensorflow.python.ops.summary_ops_v2 as again
from tensorflow.optimizers import Adam
from tensorflow.losses import SparseCategoricalCrossentropy
assert again is summary_ops_v2 and Adam is tf.keras.optimizers.Adam
assert [d.device_type for d in device_lib.list_local_devices()][0] == "CPU"
writer = summary_ops_v2.create_file_writer_v2(sys.argv[1])
with writer.as_default(), summary_ops_v2.always_record_summaries():
    summary_ops_v2.scalar("loss", 0.5, step=1)
writer.close()
print(len(glob.glob(sys.argv[1] + "/events.out.tfevents.*")))
"""


def run_with_crossover(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "crossover", "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_private_modules_scripts_import_are_served_under_python_m_crossover(tmp_path):
    result = run_with_crossover(SCRIPT, str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "1"


@pytest.mark.parametrize(
    "statement,public",
    [
        ("import tensorflow.python.keras.layers", "tf.keras"),
        ("from tensorflow.python.keras.layers import Dense", "tf.keras"),
        ("from tensorflow.python.ops import math_ops", "tf.math"),
        ("from tensorflow.python.framework import ops", "the public tf.* and tf.keras.* names"),
        ("from tensorflow.python.training import adam", "tf.keras.optimizers"),
    ],
)
def test_other_private_modules_are_one_line_naming_the_public_api(statement, public):
    result = run_with_crossover(statement)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ModuleNotFoundError: No module named 'tensorflow.python"), last
    assert "TensorFlow's private package" in last, last
    assert last.split("use the public API: ")[1].startswith(public), last
