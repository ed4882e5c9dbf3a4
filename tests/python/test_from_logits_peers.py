"""from_logits=True against Keras 3.15 itself: the same linear-output model from the same initial
weights, one epoch without shuffling, Adam; the epoch's loss (and for the categorical ones the
accuracy), evaluate's loss and the trained weights agree. Keras runs in a subprocess with the
peers' Python ($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python); without one, skipped
with a message saying so."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers, losses
from test_keras_archive_peers import run_keras

KERAS_TRAIN = """
    import json
    import numpy as np
    import keras
    from keras import layers
    x, y = np.load("x.npy"), np.load("y.npy")
    weights = [np.load(f"w{{i}}.npy") for i in range(4)]
    model = keras.Sequential([keras.Input((6,)), layers.Dense(8, activation="relu"),
                              layers.Dense(3)])
    model.set_weights(weights)
    loss = getattr(keras.losses, "{cls}")(from_logits=True)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=loss, metrics=["accuracy"])
    h = model.fit(x, y, epochs=1, batch_size=8, shuffle=False, verbose=0).history
    ev = model.evaluate(x, y, verbose=0)
    print(json.dumps({{"loss": h["loss"][0], "accuracy": h["accuracy"][0], "eval": ev[0],
                      "weights": [w.tolist() for w in model.get_weights()],
                      "logits": model.predict(x[:4], verbose=0).tolist()}}))
"""


@pytest.mark.parametrize(
    "cls", ["SparseCategoricalCrossentropy", "CategoricalCrossentropy", "BinaryCrossentropy"]
)
def test_from_logits_trains_as_keras_does(cls: str, tmp_path: Path) -> None:
    rs = np.random.RandomState(5)
    x = rs.rand(40, 6).astype(np.float32)
    labels = rs.randint(0, 3, 40)
    if cls == "SparseCategoricalCrossentropy":
        y = labels.astype(np.float32)
    elif cls == "CategoricalCrossentropy":
        y = np.eye(3, dtype=np.float32)[labels]
    else:
        y = (rs.rand(40, 3) > 0.5).astype(np.float32)
    model = keras.Sequential(
        [keras.Input((6,)), layers.Dense(8, activation="relu"), layers.Dense(3)]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.01),
        loss=getattr(losses, cls)(from_logits=True),
        metrics=["accuracy"],
    )
    initial = model.get_weights()
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    for i, w in enumerate(initial):
        np.save(tmp_path / f"w{i}.npy", w)
    theirs = run_keras(KERAS_TRAIN.format(cls=cls), tmp_path)
    h = model.fit(x, y, epochs=1, batch_size=8, shuffle=False, verbose=0).history
    assert h["loss"][0] == pytest.approx(theirs["loss"], abs=1e-4)
    if cls != "BinaryCrossentropy":  # Keras's binary accuracy thresholds the logits at 0.5
        assert h[next(k for k in h if k != "loss")][0] == pytest.approx(theirs["accuracy"])
    for mine, keras_w in zip(model.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(mine, np.array(keras_w), atol=1e-4)
    loss, _ = model.evaluate(x, y, verbose=0)
    assert loss == pytest.approx(theirs["eval"], abs=1e-4)
    # predict gives the logits, as Keras's does.
    np.testing.assert_allclose(model.predict(x[:4], verbose=0), theirs["logits"], atol=1e-4)
