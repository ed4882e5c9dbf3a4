"""Layer.get_config() and from_config() of every built-in layer, as Keras has them: the config
holds every argument (defaults spelled out, as model files write them), and the class's
from_config rebuilds a layer whose config is the same. Keras's own values are compared in
test_layer_config_peers."""

import inspect

import pytest

from crossover.keras import layers

# The arguments a class needs (the rest take their defaults).
REQUIRED = {
    "InputLayer": {"shape": (4, 4, 1)},
    "Dense": {"units": 3},
    "Dropout": {"rate": 0.5},
    "Conv1D": {"filters": 2, "kernel_size": (3,)},
    "Conv2D": {"filters": 2, "kernel_size": (3, 3)},
    "Conv2DTranspose": {"filters": 2, "kernel_size": (3, 3)},
    "Reshape": {"target_shape": (4, 4, 1)},
    "Rescaling": {"scale": 0.5},
    "Activation": {"activation": "relu"},
    "Permute": {"dims": (2, 1)},
    "RepeatVector": {"n": 3},
    "AveragePooling1D": {"pool_size": (2,)},  # Keras 3.15 gives the average poolings no default
    "AveragePooling2D": {"pool_size": (2, 2)},
    "GaussianNoise": {"stddev": 0.1},
    "GaussianDropout": {"rate": 0.1},
    "SpatialDropout2D": {"rate": 0.1},
    "TimeDistributed": {"layer": layers.Dense(3, name="inner")},
    "RNN": {"cell": layers.LSTMCell(3, name="inner")},
}
for _name in ("SimpleRNN", "LSTM", "GRU", "SimpleRNNCell", "LSTMCell", "GRUCell"):
    REQUIRED[_name] = {"units": 3}

# (Lambda's config would hold its Python function, which crossover does not serialize: its
# get_config refuses, tests/python/test_lambda_peers.py.)
BUILT_IN = sorted(
    name
    for name in layers.__all__
    if inspect.isclass(getattr(layers, name))
    and issubclass(getattr(layers, name), layers.Layer)
    and getattr(layers, name) not in (layers.Layer, layers.Lambda)
)


def test_every_built_in_layer_is_listed():
    assert {"Dense", "Conv2D", "BatchNormalization", "InputLayer", "Add"} <= set(BUILT_IN)


@pytest.mark.parametrize("name", BUILT_IN)
def test_config_round_trips_through_from_config(name: str) -> None:
    cls = getattr(layers, name)
    layer = cls(**REQUIRED.get(cls.__name__, {}), name="probe")
    config = layer.get_config()
    assert config["name"] == "probe"
    for argument, value in REQUIRED.get(cls.__name__, {}).items():
        if isinstance(value, layers.Layer):  # a wrapper's layer: serialized, as Keras does
            assert config[argument]["class_name"] == type(value).__name__
            assert config[argument]["config"] == value.get_config()
        elif argument != "shape":
            got = config[argument]
            assert (list(got) if isinstance(got, (list, tuple)) else got) == (
                list(value) if isinstance(value, tuple) else value
            ), (name, argument)
    again = cls.from_config(config)
    assert type(again) is cls and again.get_config() == config


def test_a_layers_own_name_trainable_and_policy_are_in_its_config():
    layer = layers.Dense(4, name="head", trainable=False, dtype="mixed_bfloat16")
    config = layer.get_config()
    assert (config["name"], config["trainable"]) == ("head", False)
    assert config["dtype"]["config"] == {"name": "mixed_bfloat16"}
    assert config["units"] == 4 and config["activation"] == "linear"
    assert config["kernel_initializer"]["class_name"] == "GlorotUniform"


def test_conv2d_spells_out_its_defaults():
    config = layers.Conv2D(8, 3, name="c").get_config()
    assert config["kernel_size"] == [3, 3] or config["kernel_size"] == (3, 3)
    assert config["strides"] in ([1, 1], (1, 1)) and config["padding"] == "valid"
    assert config["data_format"] == "channels_last" and config["groups"] == 1


def test_a_layers_variables_have_keras_names_and_trainable():
    """homl3 chapter 11 lists [(var.name, var.trainable) for var in layer.variables]."""
    from crossover import keras

    norm = keras.layers.BatchNormalization()
    keras.Sequential([keras.Input((3,)), norm])
    assert [(v.name, v.trainable) for v in norm.variables] == [
        ("gamma", True),
        ("beta", True),
        ("moving_mean", False),
        ("moving_variance", False),
    ]
    assert norm.variables[0].path == f"{norm.name}/gamma"
