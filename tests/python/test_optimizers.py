"""keras.optimizers' Adagrad, Adadelta, Nadam, Adamax and Lion without Keras at hand: Keras's
arguments and defaults, get_config/from_config, their string names in compile(), the compile
settings written to and read from a model's JSON, and training that moves the weights (the
comparison with Keras itself is test_optimizers_peers.py)."""

import json

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers

NEW = ["Adagrad", "Adadelta", "Nadam", "Adamax", "Lion"]

DEFAULTS = {
    "Adagrad": {"learning_rate": 0.001, "initial_accumulator_value": 0.1, "epsilon": 1e-7},
    "Adadelta": {"learning_rate": 0.001, "rho": 0.95, "epsilon": 1e-7},
    "Nadam": {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7},
    "Adamax": {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-7},
    "Lion": {"learning_rate": 0.001, "beta_1": 0.9, "beta_2": 0.99},
}


def small_model() -> keras.Sequential:
    return keras.Sequential([keras.Input((4,)), layers.Dense(3, activation="softmax")])


@pytest.mark.parametrize("cls", NEW)
def test_defaults_and_get_config_are_kerass(cls: str) -> None:
    opt = getattr(keras.optimizers, cls)()
    config = opt.get_config()
    assert config["name"] == cls.lower()
    for key, value in DEFAULTS[cls].items():
        assert config[key] == pytest.approx(value, rel=1e-7), key
    for key in ("weight_decay", "clipnorm", "global_clipnorm", "clipvalue", "loss_scale_factor"):
        assert config[key] is None, key
    assert config["use_ema"] is False and config["ema_momentum"] == 0.99


@pytest.mark.parametrize("cls", NEW)
def test_from_config_round_trips(cls: str) -> None:
    kwargs = {"learning_rate": 0.5, "global_clipnorm": 2.0, "weight_decay": 0.01}
    opt = getattr(keras.optimizers, cls)(**kwargs)
    back = type(opt).from_config(opt.get_config())
    assert type(back) is type(opt)
    assert back.get_config() == opt.get_config()
    decayed = getattr(keras.optimizers, cls)(
        keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
    )
    again = type(decayed).from_config(decayed.get_config())
    assert again.get_config() == decayed.get_config()


@pytest.mark.parametrize("cls", NEW)
def test_string_names_compile_and_training_moves_the_weights(cls: str) -> None:
    rs = np.random.RandomState(3)
    x, y = rs.rand(16, 4).astype(np.float32), rs.randint(0, 3, 16).astype(np.float32)
    model = small_model()
    model.compile(optimizer=cls.lower(), loss="sparse_categorical_crossentropy")
    assert isinstance(model.optimizer, getattr(keras.optimizers, cls))
    model.build((None, 4))
    before = model.get_weights()
    lr = 1.0 if cls == "Adadelta" else 0.05
    model.compile(
        optimizer=getattr(keras.optimizers, cls)(learning_rate=lr),
        loss="sparse_categorical_crossentropy",
    )
    model.set_weights(before)
    h = model.fit(x, y, epochs=3, batch_size=4, shuffle=False, verbose=0).history
    assert all(np.isfinite(h["loss"]))
    assert np.abs(model.get_weights()[0] - before[0]).max() > 1e-3
    # The model's JSON carries the optimizer as Keras's compile_config does, and reads back.
    text = model.to_json()
    optimizer = json.loads(text)["compile_config"]["optimizer"]
    assert optimizer["class_name"] == cls
    assert optimizer["config"]["learning_rate"] == pytest.approx(lr)


def test_clipnorm_is_taken_and_only_one_clipping_may_be_set() -> None:
    # Keras's clipnorm clips each weight's gradient by its own norm; global_clipnorm the global
    # norm; Keras refuses two of them (or clipvalue) together.
    assert keras.optimizers.Adagrad(clipnorm=1.0).get_config()["clipnorm"] == 1.0
    with pytest.raises(ValueError, match="Only one of"):
        keras.optimizers.Adagrad(clipnorm=1.0, global_clipnorm=1.0)
    with pytest.raises(ValueError, match="Only one of"):
        keras.optimizers.SGD(clipnorm=1.0, clipvalue=0.5)


def test_classes_take_kerass_signature_from_the_engine() -> None:
    """Each class is made from the engine's unit: Keras's positional order, its defaults in the
    signature, one clear error for an argument it does not take or a value out of range."""
    import inspect

    sig = inspect.signature(keras.optimizers.Adam)
    assert list(sig.parameters)[:5] == ["learning_rate", "beta_1", "beta_2", "epsilon", "amsgrad"]
    assert sig.parameters["epsilon"].default == 1e-7
    adam = keras.optimizers.Adam(0.01, 0.8)
    assert (adam.get_config()["learning_rate"], adam.beta_1) == (pytest.approx(0.01), 0.8)
    sgd = keras.optimizers.SGD(0.1, 0.9, True)
    assert (sgd.momentum, sgd.nesterov, sgd.name) == (0.9, True, "sgd")
    assert isinstance(keras.optimizers.AdamW(), keras.optimizers.Adam)
    assert keras.optimizers.AdamW().get_config()["weight_decay"] == 0.004
    with pytest.raises(TypeError, match="multiple values for argument 'learning_rate'"):
        keras.optimizers.Lion(0.1, learning_rate=0.2)
    with pytest.raises(TypeError, match="at most 3 positional"):
        keras.optimizers.Lion(0.1, 0.9, 0.99, 0.5)
    with pytest.raises(ValueError, match="not recognized.*epsilon"):
        keras.optimizers.Lion(epsilon=1e-7)
    with pytest.raises(ValueError, match="centered"):
        keras.optimizers.RMSprop(centered=True)
    # The engine checks the ranges (Keras's Lion refuses this beta_1 too).
    with pytest.raises(ValueError, match=r"beta_1 must be in \(0, 1\], got 0"):
        keras.optimizers.Lion(beta_1=0.0)
