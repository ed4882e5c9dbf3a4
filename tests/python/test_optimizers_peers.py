"""Adagrad, Adadelta, Nadam, Adamax and Lion against Keras 3.15 itself: the same small model from
the same initial weights (set_weights), a few steps without shuffling; the trained weights agree to
float32 rounding, and so do the optimizers' get_config and their variable count. Keras runs in a
subprocess with the peers' Python ($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python);
without one, skipped with a message saying so."""

import json
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import run_keras, save_arrays

# Each optimizer with a learning rate that moves the weights well within a few steps (Adadelta's
# default 0.001 barely does: Keras 2's scripts used 1.0), and one non-default setting.
CASES = {
    "Adagrad": {"learning_rate": 0.05, "initial_accumulator_value": 0.2},
    "Adadelta": {"learning_rate": 1.0, "rho": 0.9},
    "Nadam": {"learning_rate": 0.01, "beta_1": 0.85},
    "Adamax": {"learning_rate": 0.01, "beta_2": 0.99},
    # Lion's step is lr * sign(...): 0.01 moves each weight by about that per step.
    "Lion": {"learning_rate": 0.01, "beta_2": 0.95, "weight_decay": 0.1},
}

KERAS_TRAIN = """
    import json
    import numpy as np
    import keras
    from keras import layers
    x, y = np.load("x.npy"), np.load("y.npy")
    weights = [np.load(f"w{{i}}.npy") for i in range(4)]
    model = keras.Sequential([keras.Input((6,)), layers.Dense(8, activation="relu"),
                              layers.Dense(3, activation="softmax")])
    model.set_weights(weights)
    opt = getattr(keras.optimizers, "{cls}")(**json.loads('{kwargs}'))
    # crossover decays kernels only (the engine's ParamSlot::decay); Keras 3 every variable
    # unless told otherwise: told here, as test_amsgrad_peers.py does.
    opt.exclude_from_weight_decay(var_names=["bias"])
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy")
    h = model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0).history
    print(json.dumps({{"loss": h["loss"], "weights": [w.tolist() for w in model.get_weights()],
                      "config": opt.get_config(), "variables": len(opt.variables),
                      "iterations": int(opt.iterations.numpy()),
                      "default_config": getattr(keras.optimizers, "{cls}")().get_config()}}))
"""


def small_model() -> keras.Sequential:
    return keras.Sequential(
        [
            keras.Input((6,)),
            layers.Dense(8, activation="relu"),
            layers.Dense(3, activation="softmax"),
        ]
    )


@pytest.mark.parametrize("cls", sorted(CASES))
def test_optimizer_trains_as_keras_does(cls: str, tmp_path: Path) -> None:
    rs = np.random.RandomState(11)
    x = rs.rand(40, 6).astype(np.float32)
    y = rs.randint(0, 3, 40).astype(np.float32)
    kwargs = CASES[cls]
    model = small_model()
    opt = getattr(keras.optimizers, cls)(**kwargs)
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy")
    model.build((None, 6))
    initial = model.get_weights()
    save_arrays(tmp_path, x, y, initial)
    theirs = run_keras(KERAS_TRAIN.format(cls=cls, kwargs=json.dumps(kwargs)), tmp_path)
    h = model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0).history
    assert int(opt.iterations) == theirs["iterations"] == 10
    np.testing.assert_allclose(h["loss"], theirs["loss"], rtol=1e-5)
    for mine, keras_w, start in zip(model.get_weights(), theirs["weights"], initial):
        keras_w = np.array(keras_w, dtype=np.float32)
        assert np.abs(keras_w - start).max() > 1e-3  # the steps moved the weights
        np.testing.assert_allclose(mine, keras_w, rtol=1e-5, atol=1e-6)
    # get_config as Keras writes it (the name aside: Keras numbers a second instance), also
    # for the defaults.
    mine_config, their_config = opt.get_config(), theirs["config"]
    assert mine_config.pop("name").startswith(cls.lower())
    assert their_config.pop("name").startswith(cls.lower())
    assert mine_config == their_config
    default_mine = getattr(keras.optimizers, cls)().get_config()
    default_theirs = theirs["default_config"]
    default_mine.pop("name")
    default_theirs.pop("name")
    assert default_mine == default_theirs
    # summary()'s "Optimizer params": Keras's optimizer.variables (slots, iterations, learning
    # rate, Nadam's u_product).
    from crossover.keras import _summary

    trainable = sum(w.size for w in initial)
    slots = _summary.optimizer_variable_count(model._core.optimizer, trainable)
    per_weight = {"Adagrad": 1, "Adadelta": 2, "Nadam": 2, "Adamax": 2, "Lion": 1}[cls]
    assert theirs["variables"] == per_weight * len(initial) + (3 if cls == "Nadam" else 2)
    assert slots == per_weight * trainable + (3 if cls == "Nadam" else 2)
