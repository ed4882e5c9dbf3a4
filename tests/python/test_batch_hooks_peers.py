"""Callback hooks against Keras 3.15 itself: the same script's callback records every hook call
(name, batch or epoch index, the logs' keys) through fit with validation data, evaluate and
predict, and ModelCheckpoint(save_freq=N) names its files; crossover's sequence and files are
Keras's. Keras runs in a subprocess with the peers' Python ($CROSSOVER_PEERS_PYTHON, else
bench/peers/.venv/bin/python); without one, skipped with a message saying so."""

from pathlib import Path

import numpy as np

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import run_keras

HOOKS = [
    "on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end",
    "on_train_batch_begin", "on_train_batch_end", "on_test_begin", "on_test_end",
    "on_test_batch_begin", "on_test_batch_end", "on_predict_begin", "on_predict_end",
    "on_predict_batch_begin", "on_predict_batch_end",
]

# Runs with `keras` bound to Keras or to crossover.keras; prints the JSON result last.
SCRIPT = """
import json, os
import numpy as np
HOOKS = {hooks!r}
x, y = np.load("x.npy"), np.load("y.npy")

def hook(name):
    def f(self, *args, logs=None):
        index = args[0] if args and isinstance(args[0], int) else None
        if logs is None and args and isinstance(args[-1], dict):
            logs = args[-1]
        self.calls.append([name, index, sorted((logs or {{}}).keys())])
    return f

Recorder = type("Recorder", (keras.callbacks.Callback,), {{n: hook(n) for n in HOOKS}})
rec = Recorder()
rec.calls = []
model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(3, activation="softmax")])
model.compile("adam", "sparse_categorical_crossentropy", metrics=["acc"])
ckpt = keras.callbacks.ModelCheckpoint(
    os.path.join("{folder}", "w{{epoch}}-{{batch:02d}}.weights.h5"), save_weights_only=True,
    save_freq=3)
model.fit(x[:80], y[:80], batch_size=16, epochs=2, validation_data=(x[80:], y[80:]),
          verbose=0, callbacks=[rec, ckpt])
model.evaluate(x[80:], y[80:], batch_size=16, verbose=0, callbacks=[rec])
model.predict(x, batch_size=64, verbose=0, callbacks=[rec])
steps = keras.Sequential([keras.Input((6,)), keras.layers.Dense(3, activation="softmax")])
steps.compile("adam", "sparse_categorical_crossentropy")
h = steps.fit(x, y, batch_size=16, epochs=3, steps_per_epoch=4, verbose=0)
print(json.dumps({{"calls": rec.calls, "files": sorted(os.listdir("{folder}")),
                  "iterations": int(steps.optimizer.iterations), "steps": h.params["steps"]}}))
"""


def test_hook_sequence_logs_keys_and_checkpoint_files_are_keras(tmp_path: Path) -> None:
    rs = np.random.RandomState(3)
    np.save(tmp_path / "x.npy", rs.rand(100, 6).astype(np.float32))
    np.save(tmp_path / "y.npy", rs.randint(0, 3, 100))
    (tmp_path / "k").mkdir()
    (tmp_path / "c").mkdir()
    theirs = run_keras("import keras\n" + SCRIPT.format(hooks=HOOKS, folder="k"), tmp_path)

    import contextlib
    import io
    import json
    import os

    cwd = os.getcwd()
    out = io.StringIO()
    try:
        os.chdir(tmp_path)
        with contextlib.redirect_stdout(out):
            exec(SCRIPT.format(hooks=HOOKS, folder="c"), {"keras": keras, "layers": layers})
    finally:
        os.chdir(cwd)
    ours = json.loads(out.getvalue().strip().splitlines()[-1])
    assert ours["calls"] == theirs["calls"]
    assert ours["files"] == theirs["files"]
    assert ours["iterations"] == theirs["iterations"]
    assert ours["steps"] == theirs["steps"]
