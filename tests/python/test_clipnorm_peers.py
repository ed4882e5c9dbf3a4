"""Keras's clipnorm (each variable's gradient clipped to that L2 norm on its own) against Keras
3.15 itself: the same small model from the same initial weights, a few steps without shuffling,
with a clipnorm small enough to clip every step; the trained weights agree within 1e-5. Keras runs
in a subprocess with the peers' Python ($CROSSOVER_PEERS_PYTHON, else
bench/peers/.venv/bin/python); without one, skipped with a message saying so."""

import json
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from test_keras_archive_peers import run_keras

CASES = {
    "Adam": {"learning_rate": 0.01, "clipnorm": 0.05},
    "SGD": {"learning_rate": 0.1, "momentum": 0.9, "clipnorm": 0.02},
    "RMSprop": {"learning_rate": 0.01, "clipnorm": 0.03},
}

KERAS_TRAIN = """
    import json
    import numpy as np
    import keras
    x, y = np.load("x.npy"), np.load("y.npy")
    weights = [np.load(f"w{{i}}.npy") for i in range(4)]
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(3, activation="softmax")])
    model.set_weights(weights)
    opt = getattr(keras.optimizers, "{cls}")(**json.loads('{kwargs}'))
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy")
    h = model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0).history
    print(json.dumps({{"loss": h["loss"], "weights": [w.tolist() for w in model.get_weights()],
                      "config": opt.get_config()}}))
"""


@pytest.mark.parametrize("cls", sorted(CASES))
def test_clipnorm_trains_as_keras_does(cls: str, tmp_path: Path) -> None:
    rs = np.random.RandomState(17)
    x = rs.rand(20, 6).astype(np.float32)
    y = rs.randint(0, 3, 20).astype(np.float32)
    weights = [
        rs.uniform(-0.6, 0.6, s).astype(np.float32) for s in [(6, 8), (8,), (8, 3), (3,)]
    ]
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    for i, w in enumerate(weights):
        np.save(tmp_path / f"w{i}.npy", w)
    kwargs = CASES[cls]
    theirs = run_keras(KERAS_TRAIN.format(cls=cls, kwargs=json.dumps(kwargs)), tmp_path)

    model = keras.Sequential(
        [
            keras.Input((6,)),
            keras.layers.Dense(8, activation="relu"),
            keras.layers.Dense(3, activation="softmax"),
        ]
    )
    model.set_weights(weights)
    opt = getattr(keras.optimizers, cls)(**kwargs)
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy")
    h = model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0).history
    assert h["loss"] == pytest.approx(theirs["loss"], abs=1e-5)
    for ours, want in zip(model.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(ours, np.asarray(want, np.float32), atol=1e-5)
    assert opt.get_config()["clipnorm"] == theirs["config"]["clipnorm"]
    # Without clipping the same steps end elsewhere: the clipping did clip.
    plain = getattr(keras.optimizers, cls)(
        **{k: v for k, v in kwargs.items() if k != "clipnorm"}
    )
    model.set_weights(weights)
    model.compile(optimizer=plain, loss="sparse_categorical_crossentropy")
    model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0)
    assert np.abs(model.get_weights()[0] - np.asarray(theirs["weights"][0])).max() > 1e-4
