"""Adam(amsgrad=True) and AdamW(amsgrad=True) against Keras 3.15 itself: the same small model from
the same initial weights, trained by fit without shuffling, and stepped by apply_gradients with
the same given gradients (a gradient that falls a hundredfold after two steps, so that v decreases
and velocity_hat, its running maximum, is what divides the step); the weights agree to float32
rounding, while Keras's own plain Adam ends measurably elsewhere (the case tests amsgrad). Also
get_config, and the optimizer's variables (Keras: iterations, learning_rate, then momentum and
velocity per weight, then velocity_hat per weight) against summary()'s count. Keras runs in a
subprocess with the peers' Python ($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python);
without one, skipped with a message saying so."""

import json
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import _summary, layers
from test_keras_archive_peers import run_keras

CASES = {
    "Adam": {"learning_rate": 0.01, "beta_2": 0.9},
    "AdamW": {"learning_rate": 0.01, "beta_2": 0.9, "weight_decay": 0.05},
}
STEPS = 8  # apply_gradients steps

KERAS_AMSGRAD = """
    import json
    import numpy as np
    import keras
    from keras import layers
    x, y = np.load("x.npy"), np.load("y.npy")
    weights = [np.load(f"w{{i}}.npy") for i in range(4)]
    grads = np.load("grads.npz")
    kwargs = json.loads('{kwargs}')

    def optimizer(amsgrad):
        opt = keras.optimizers.{cls}(amsgrad=amsgrad, **kwargs)
        # crossover decays kernels only (kernel_math.h, decay_factor); Keras 3 every variable
        # unless told otherwise: told here, so that the comparison is of amsgrad alone.
        opt.exclude_from_weight_decay(var_names=["bias"])
        return opt

    def model_():
        m = keras.Sequential([keras.Input((6,)), layers.Dense(8, activation="relu"),
                              layers.Dense(3, activation="softmax")])
        m.set_weights(weights)
        return m

    out = {{}}
    for name, amsgrad in (("amsgrad", True), ("plain", False)):
        opt = optimizer(amsgrad)
        model = model_()
        model.compile(optimizer=opt, loss="sparse_categorical_crossentropy")
        h = model.fit(x, y, epochs=3, batch_size=8, shuffle=False, verbose=0).history
        out[name] = {{"loss": h["loss"], "weights": [w.tolist() for w in model.get_weights()],
                      "config": opt.get_config(), "iterations": int(opt.iterations.numpy()),
                      "variables": [v.path for v in opt.variables]}}
        model = model_()
        opt = optimizer(amsgrad)
        for t in range({steps}):
            step = [grads[f"g{{t}}_{{i}}"] for i in range(4)]
            opt.apply_gradients(zip(step, model.trainable_variables))
        out[name]["applied"] = [w.tolist() for w in model.get_weights()]
    print(json.dumps(out))
"""


def small_model() -> keras.Sequential:
    return keras.Sequential(
        [
            keras.Input((6,)),
            layers.Dense(8, activation="relu"),
            layers.Dense(3, activation="softmax"),
        ]
    )


def falling(g0: np.ndarray, t: int) -> np.ndarray:
    scale = (1.0 if t <= 2 else 0.01 * (1 + 0.3 * t)) * (-1.0 if t % 3 == 2 else 1.0)
    return (g0 * scale).astype(np.float32)


def close(mine, theirs) -> None:
    for a, b in zip(mine, theirs):
        np.testing.assert_allclose(a, np.array(b, dtype=np.float32), rtol=1e-5, atol=1e-6)


def apart(a, b) -> float:
    return max(float(np.abs(np.array(x) - np.array(y)).max()) for x, y in zip(a, b))


@pytest.mark.parametrize("cls", sorted(CASES))
def test_amsgrad_trains_as_keras_does(cls: str, tmp_path: Path) -> None:
    rs = np.random.RandomState(13)
    x = rs.rand(40, 6).astype(np.float32)
    y = rs.randint(0, 3, 40).astype(np.float32)
    kwargs = CASES[cls]
    model = small_model()
    opt = getattr(keras.optimizers, cls)(amsgrad=True, **kwargs)
    model.compile(optimizer=opt, loss="sparse_categorical_crossentropy")
    model.build((None, 6))
    initial = model.get_weights()
    g0 = [rs.uniform(-0.5, 0.5, w.shape) for w in initial]
    grads = {f"g{t}_{i}": falling(g, t + 1) for t in range(STEPS) for i, g in enumerate(g0)}
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    np.savez(tmp_path / "grads.npz", **grads)
    for i, w in enumerate(initial):
        np.save(tmp_path / f"w{i}.npy", w)
    code = KERAS_AMSGRAD.format(cls=cls, kwargs=json.dumps(kwargs), steps=STEPS)
    theirs = run_keras(code, tmp_path)
    ams, plain = theirs["amsgrad"], theirs["plain"]

    # fit: 15 steps of the model's own gradients.
    h = model.fit(x, y, epochs=3, batch_size=8, shuffle=False, verbose=0).history
    assert int(opt.iterations) == ams["iterations"] == 15
    np.testing.assert_allclose(h["loss"], ams["loss"], rtol=1e-5)
    close(model.get_weights(), ams["weights"])
    assert apart(ams["weights"], initial) > 1e-3  # the steps moved the weights

    # apply_gradients with the given falling gradients, from the same start.
    stepped = small_model()
    stepped.compile(
        optimizer=getattr(keras.optimizers, cls)(amsgrad=True, **kwargs),
        loss="sparse_categorical_crossentropy",
    )
    stepped.build((None, 6))
    stepped.set_weights(initial)
    stepped(x[:1])  # runs it once: its variables are the engine's
    for t in range(STEPS):
        step = [grads[f"g{t}_{i}"] for i in range(4)]
        stepped.optimizer.apply_gradients(zip(step, stepped.trainable_variables))
    close(stepped.get_weights(), ams["applied"])
    # Keras's plain Adam ends elsewhere: velocity_hat mattered in these steps.
    assert apart(ams["applied"], plain["applied"]) > 1e-4

    # get_config as Keras writes it (the name aside: Keras numbers a second instance).
    mine_config, their_config = opt.get_config(), ams["config"]
    mine_name, their_name = mine_config.pop("name"), their_config.pop("name")
    assert mine_name == {"Adam": "adam", "AdamW": "adam_w"}[cls]
    assert their_name.startswith(mine_name), their_name
    assert mine_config == their_config
    assert their_config["amsgrad"] is True

    # Keras's optimizer variables: iterations, learning_rate, momentum and velocity per weight,
    # then velocity_hat per weight; summary()'s "Optimizer params" counts the same numbers.
    names = [p.rsplit("/", 1)[-1] for p in ams["variables"]]
    assert names[:2] == ["iteration", "learning_rate"], names
    kinds = [
        "velocity_hat" if n.endswith("_velocity_hat") else n.rsplit("_", 1)[-1] for n in names[2:]
    ]
    assert kinds == ["momentum", "velocity"] * 4 + ["velocity_hat"] * 4, names
    trainable = sum(w.size for w in initial)
    assert _summary.optimizer_variable_count(model._core.optimizer, trainable) == (
        3 * trainable + 2
    )
    assert len(ams["variables"]) == 3 * len(initial) + 2
