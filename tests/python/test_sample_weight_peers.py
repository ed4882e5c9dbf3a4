"""fit(sample_weight=), fit(class_weight=), validation_data=(x, y, sample_weight),
evaluate(sample_weight=) and a dataset of (x, y, sample_weight) elements against Keras 3.15 itself:
the same model from the same initial weights, shuffle off, 2 epochs with a partial last batch; the
History values agree within 1e-4 (the loss weighted and divided by the batch's size, the plain
metrics unweighted, as Keras computes them). Keras runs in a subprocess with the peers' Python
($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python); without one, skipped with a message
saying so."""

import contextlib
import io
import json
import os
from pathlib import Path

import numpy as np
import pytest

import crossover
from crossover import keras
from test_keras_archive_peers import run_keras

# Runs with `keras` (and `tf`) bound to Keras's or to crossover's; prints the JSON result last.
SCRIPT = """
import json
import numpy as np
x, y, w = np.load("x.npy"), np.load("y.npy"), np.load("w.npy")
xv, yv, wv = np.load("xv.npy"), np.load("yv.npy"), np.load("wv.npy")
weights = [np.load(f"p{i}.npy") for i in range(4)]

def model(loss="sparse_categorical_crossentropy", optimizer=None):
    m = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(3, activation="softmax")])
    m.set_weights(weights)
    m.compile(optimizer or keras.optimizers.SGD(learning_rate=0.2), loss, metrics=["accuracy"])
    return m

def history(h):
    return {k: [float(v) for v in vs] for k, vs in h.history.items()}

out = {}
m = model()
out["sample"] = history(m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0,
                              sample_weight=w, validation_data=(xv, yv, wv)))
out["evaluate"] = m.evaluate(xv, yv, batch_size=8, sample_weight=wv, verbose=0)
out["split"] = history(model().fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0,
                                   sample_weight=w, validation_split=0.25))
out["class_sparse"] = history(model().fit(x, y, batch_size=8, epochs=2, shuffle=False,
                                          verbose=0, class_weight={0: 2.0, 2: 0.25},
                                          validation_split=0.25))
onehot = np.eye(3, dtype="float32")[y.astype("int64")]
out["class_onehot"] = history(model("categorical_crossentropy").fit(
    x, onehot, batch_size=8, epochs=2, shuffle=False, verbose=0, class_weight={1: 3.0}))
ds = tf.data.Dataset.from_tensor_slices((x, y, w)).batch(8)
out["dataset"] = history(model().fit(ds, epochs=2, verbose=0))
print(json.dumps(out))
"""


def _inputs(folder: Path) -> None:
    # 44 rows: batches of 8 end with one of 4; validation_split=0.25 leaves 33 (a last batch of
    # 1) whether the split point is rounded down (Keras 3) or up (crossover today).
    rs = np.random.RandomState(5)
    arrays = {
        "x": rs.rand(44, 6).astype(np.float32),
        "y": rs.randint(0, 3, 44).astype(np.float32),
        "w": rs.uniform(0.0, 2.0, 44).astype(np.float32),
        "xv": rs.rand(13, 6).astype(np.float32),
        "yv": rs.randint(0, 3, 13).astype(np.float32),
        "wv": rs.uniform(0.0, 2.0, 13).astype(np.float32),
    }
    shapes = [(6, 8), (8,), (8, 3), (3,)]
    for i, shape in enumerate(shapes):
        arrays[f"p{i}"] = rs.uniform(-0.5, 0.5, shape).astype(np.float32)
    for name, a in arrays.items():
        np.save(folder / f"{name}.npy", a)


def _run_crossover(folder: Path) -> dict:
    cwd = os.getcwd()
    out = io.StringIO()
    try:
        os.chdir(folder)
        with contextlib.redirect_stdout(out):
            exec(SCRIPT, {"keras": keras, "tf": crossover})
    finally:
        os.chdir(cwd)
    return json.loads(out.getvalue().strip().splitlines()[-1])


def test_weighted_fit_and_evaluate_are_keras(tmp_path: Path) -> None:
    _inputs(tmp_path)
    theirs = run_keras("import keras\nimport tensorflow as tf\n" + SCRIPT, tmp_path)
    ours = _run_crossover(tmp_path)
    assert ours["evaluate"] == pytest.approx(theirs["evaluate"], abs=1e-4)
    for case in ("sample", "split", "class_sparse", "class_onehot", "dataset"):
        assert sorted(ours[case]) == sorted(theirs[case]), case
        for key, values in theirs[case].items():
            assert ours[case][key] == pytest.approx(values, abs=1e-4), (case, key)


def test_bad_weights_are_one_clear_error() -> None:
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(2, activation="softmax")])
    model.compile("sgd", "sparse_categorical_crossentropy")
    x, y = np.zeros((5, 2), np.float32), np.zeros(5, np.float32)
    with pytest.raises(ValueError, match="one weight per sample"):
        model.fit(x, y, sample_weight=np.ones(4), verbose=0)
    with pytest.raises(ValueError, match="at the same time"):
        model.fit(x, y, sample_weight=np.ones(5), class_weight={0: 1.0}, verbose=0)
    with pytest.raises(ValueError, match="class_weight must be a dict"):
        model.fit(x, y, class_weight=[1.0, 2.0], verbose=0)
    with pytest.raises(ValueError, match="one weight per sample"):
        model.evaluate(x, y, sample_weight=np.ones((5, 2)), verbose=0)
