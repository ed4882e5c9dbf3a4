"""Frozen layers against Keras 3.15 itself, as a transfer-learning script uses them: a convnet with
a BatchNormalization trains one epoch with every layer trainable; then its Conv2D, its first
Dense and its BatchNormalization are frozen (layer.trainable = False), the model is compiled
again and trains two more epochs. Both sides start from Keras's initial weights and train without
shuffling, with SGD (Adam's normalized step would turn float32's last-bit differences in a
near-zero gradient into whole steps): every epoch's loss and accuracy agree within 1e-4, the
frozen layers' weights do not move at all in crossover (the BatchNormalization's moving
statistics included: a frozen one runs in inference mode), the trainable ones agree with Keras's
within 1e-4, and trainable_weights, non_trainable_weights and summary()'s counts are Keras's. A
layer frozen in its constructor and a whole model frozen (model.trainable = False) count as Keras
counts them, and the "trainable" flags of crossover's to_json() are those Keras reads back. Keras
runs in a subprocess with the peers' Python ($CROSSOVER_PEERS_PYTHON, else
bench/peers/.venv/bin/python); without one, skipped with a message saying so."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import run_keras

# Written once for both sides (`keras` and `layers` are each side's).
BUILD = """
model = keras.Sequential([
    keras.Input(shape=(8, 8, 1)),
    layers.Conv2D(3, 3, activation="relu"),
    layers.Flatten(),
    layers.Dense(6, activation="relu"),
    layers.BatchNormalization(),
    layers.Dense(5, activation="relu"),
    layers.Dense(3, activation="softmax"),
])
"""

FREEZE = """
for i in (0, 2, 3):  # conv2d, dense, batch_normalization
    model.layers[i].trainable = False
"""

# Small models whose counts are compared: frozen in a constructor, a whole model frozen, and a
# model used as a layer of another.
COUNTS = """
a = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(3, trainable=False), layers.Dense(2)])
b = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(3), layers.BatchNormalization(),
                      layers.Dense(2)])
b.trainable = False
inner = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(3)])
c = keras.Sequential([inner, layers.Dense(2)])
inner.trainable = False
counts = [[len(m.trainable_weights), len(m.non_trainable_weights),
           int(sum(np.prod(w.shape) for w in m.trainable_weights))] for m in (a, b, c)]
"""

KERAS_SIDE = """
import json
import numpy as np
import keras
from keras import layers
keras.utils.set_random_seed(5)
{build}
for i, w in enumerate(model.get_weights()):
    np.save(f"w{{i}}.npy", w)
x, y = np.load("x.npy"), np.load("y.npy")
model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
h1 = model.fit(x, y, epochs=1, batch_size=8, shuffle=False, verbose=0).history
{freeze}
model.compile(optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
              loss="sparse_categorical_crossentropy", metrics=["accuracy"])
h2 = model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0).history
lines = []
model.summary(print_fn=lambda s, **k: lines.append(s))
{counts}
ours = keras.models.model_from_json(open("crossover.json").read())
print(json.dumps({{"h1": h1, "h2": h2, "n": len(model.get_weights()),
                  "weights": [w.tolist() for w in model.get_weights()],
                  "trainable": len(model.trainable_weights),
                  "non_trainable": len(model.non_trainable_weights),
                  "summary": "\\n".join(lines), "counts": counts,
                  "ours": [l.trainable for l in ours.layers]}}))
"""


def data(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    rs = np.random.RandomState(13)
    x = rs.rand(32, 8, 8, 1).astype(np.float32)
    y = rs.randint(0, 3, 32).astype(np.float32)
    np.save(folder / "x.npy", x)
    np.save(folder / "y.npy", y)
    return x, y


def test_frozen_layers_train_as_in_keras(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # both summaries as on an 80-column terminal
    x, y = data(tmp_path)
    scope = {"keras": keras, "layers": layers, "np": np}
    exec(BUILD, scope)
    exec(FREEZE, scope)
    (tmp_path / "crossover.json").write_text(scope["model"].to_json())
    theirs = run_keras(
        KERAS_SIDE.format(build=BUILD, freeze=FREEZE, counts=COUNTS), tmp_path
    )
    initial = [np.load(tmp_path / f"w{i}.npy") for i in range(theirs["n"])]
    # crossover's to_json() wrote each layer's flag; Keras read them back.
    assert theirs["ours"] == [False, True, False, False, True, True]

    exec(BUILD, scope)
    model = scope["model"]
    model.set_weights(initial)
    model.compile(
        optimizer=keras.optimizers.SGD(0.1),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    h1 = model.fit(x, y, epochs=1, batch_size=8, shuffle=False, verbose=0).history
    exec(FREEZE, scope)
    before = model.get_weights()
    model.compile(
        optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    h2 = model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0).history
    for mine, keras_h in ((h1, theirs["h1"]), (h2, theirs["h2"])):
        for key in ("loss", "accuracy"):
            np.testing.assert_allclose(mine[key], keras_h[key], atol=1e-4, err_msg=key)
    after = model.get_weights()
    # conv2d (kernel, bias), dense (kernel, bias), batch_normalization (4): frozen.
    for i in range(8):
        assert np.array_equal(after[i], before[i]), f"frozen weight {i} changed"
    for i in range(8, len(after)):
        assert not np.array_equal(after[i], before[i]), f"trainable weight {i} did not train"
    for i, (mine, keras_w) in enumerate(zip(after, theirs["weights"])):
        np.testing.assert_allclose(mine, np.array(keras_w), atol=1e-4, err_msg=f"weight {i}")
    assert len(model.trainable_weights) == theirs["trainable"] == 4
    assert len(model.non_trainable_weights) == theirs["non_trainable"] == 8
    lines: list[str] = []
    model.summary(print_fn=lines.append)
    # The totals, as Keras prints them (the layers' names differ: this is the second model).
    totals = [line for line in "\n".join(lines).split("\n") if "params:" in line]
    assert len(totals) == 4  # Total, Trainable, Non-trainable, Optimizer
    assert totals == [line for line in theirs["summary"].split("\n") if "params:" in line]

    exec(COUNTS, scope)
    assert scope["counts"] == theirs["counts"]
