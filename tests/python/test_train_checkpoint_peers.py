"""tf.train.Checkpoint, CheckpointManager and latest_checkpoint against TensorFlow 2.21 itself:
the same calls on each side give the same paths, folder listings, `checkpoint` file text (its
timestamps aside), keys of variables, restored values, and errors' classes. The files' bytes
differ (crossover's format is its own). TensorFlow runs in a subprocess with the peers' Python
(test_keras_archive_peers.run_keras); skipped without one."""

import json
from pathlib import Path

import pytest

import crossover
from test_keras_archive_peers import run_keras

# Both sides run this with `tf` bound to their own module, in an empty folder.
API = """
import os
import numpy as np

def api(tf):
    out = {}

    def error(f):
        try:
            f()
        except Exception as e:
            return type(e).__name__
        return None

    def state(path):
        return [l for l in open(path).read().splitlines() if "timestamp" not in l]

    v = tf.Variable([1.0, 2.0])
    ckpt = tf.train.Checkpoint(v=v, n=tf.Variable(3), vs=[tf.Variable(4.0)],
                               d={"k": tf.Variable(5.0)})
    out["save"] = [ckpt.save("ck/pre"), ckpt.save("ck/pre")]
    out["state"] = state("ck/checkpoint")
    out["write"] = ckpt.write("ck/w")
    out["files"] = sorted(os.listdir("ck"))
    out["latest"] = [tf.train.latest_checkpoint(d) for d in ("ck", "none", ".")]
    out["keys"] = [[k, s] for k, s in tf.train.list_variables("ck/pre-2")
                   if k != "_CHECKPOINTABLE_OBJECT_GRAPH"]
    out["load"] = np.asarray(
        tf.train.load_variable("ck/pre-2", "v/.ATTRIBUTES/VARIABLE_VALUE")).tolist()
    manager = tf.train.CheckpointManager(ckpt, "mgr", max_to_keep=2)
    out["manager0"] = [manager.latest_checkpoint, manager.checkpoints]
    out["saves"] = [manager.save() for _ in range(3)] + [manager.save(checkpoint_number=10)]
    out["manager"] = [manager.latest_checkpoint, manager.checkpoints, sorted(os.listdir("mgr")),
                      state("mgr/checkpoint")]
    again = tf.train.CheckpointManager(ckpt, "mgr", max_to_keep=2)
    out["again"] = [again.latest_checkpoint, again.checkpoints]
    other = tf.train.CheckpointManager(ckpt, "ck", max_to_keep=2)
    out["other"] = [other.latest_checkpoint, other.checkpoints]
    fresh = tf.train.Checkpoint(v=tf.Variable([9.0, 9.0]), n=tf.Variable(0),
                                vs=[tf.Variable(0.0)], d={"k": tf.Variable(0.0)})
    fresh.restore("ck/pre-1").assert_consumed()
    out["restored"] = [fresh.v.numpy().tolist(), int(fresh.n.numpy()),
                       float(fresh.vs[0].numpy()), float(fresh.d["k"].numpy()),
                       int(fresh.save_counter.numpy())]
    later = tf.train.Checkpoint()
    later.restore("ck/pre-2").expect_partial()
    later.n = tf.Variable(0)
    out["on_assignment"] = int(later.n.numpy())
    out["errors"] = [
        error(lambda: fresh.restore("ck/nope-1")),
        error(lambda: tf.train.Checkpoint(v=tf.Variable([1.0, 2.0, 3.0])).restore("ck/pre-1")),
        error(lambda: tf.train.Checkpoint(v=tf.Variable([1, 2])).restore("ck/pre-1")),
        error(lambda: tf.train.Checkpoint(w=tf.Variable(1.0)).restore("ck/pre-1")
              .expect_partial().assert_consumed()),
        error(lambda: tf.train.Checkpoint(v=v).restore(None).assert_consumed()),
        error(lambda: tf.train.Checkpoint(x=3)),
        error(lambda: tf.train.CheckpointManager(ckpt, "m", max_to_keep=0)),
        error(lambda: tf.train.load_variable("ck/pre-1", "nope")),
    ]
    return out
"""


def test_checkpoint_api_as_tensorflow(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tf").mkdir()
    theirs = run_keras(
        API + "\nimport json\nimport tensorflow as tf\nprint(json.dumps(api(tf)))\n",
        tmp_path / "tf",
    )
    (tmp_path / "xo").mkdir()
    monkeypatch.chdir(tmp_path / "xo")
    scope: dict = {}
    exec(API, scope)
    ours = json.loads(json.dumps(scope["api"](crossover)))
    assert ours.keys() == theirs.keys()
    for key in theirs:
        assert ours[key] == theirs[key], key
