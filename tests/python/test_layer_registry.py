"""crossover.keras.layers against the engine's registry of layer kinds (nn/layers/registry.cpp,
as _core.layer_kinds() lists it): every kind has its Python class under its Keras class name (and
its aliases), every public class is a kind or says which one it makes, and every argument a class
gives a default has the default the engine reads for an absent field (the engine's Keras JSON
reader fills what a config leaves out; its writer writes every field). So a default changed on
one side only fails here."""

import inspect
import json
from typing import Any

import pytest

from crossover import _core
from crossover.keras import layers

# The ops a custom layer's call() is traced into (keras/_trace.py): engine kinds without a Keras
# layer class, which model files refuse.
ENGINE_ONLY = {"BinaryOp", "UnaryOp", "Reduce", "AddLoss"}
KINDS = [k for k in _core.layer_kinds() if k["class_name"] not in ENGINE_ONLY]

# What a kind cannot be made without (Keras gives these no default either).
REQUIRED: dict[str, dict[str, Any]] = {
    "Dense": {"units": 3},
    "Dropout": {"rate": 0.5},
    "GaussianNoise": {"stddev": 0.5},
    "GaussianDropout": {"rate": 0.5},
    "SpatialDropout2D": {"rate": 0.5},
    "Activation": {"activation": "relu"},
    "Conv1D": {"filters": 2, "kernel_size": [3]},
    "Conv2D": {"filters": 2, "kernel_size": [3, 3]},
    "Conv2DTranspose": {"filters": 2, "kernel_size": [3, 3]},
    "Reshape": {"target_shape": [4, 4, 1]},
    "Rescaling": {"scale": 0.5},
    "Permute": {"dims": [1]},
    "RepeatVector": {"n": 3},
    "TimeDistributed": {"layer": {"class_name": "Dense", "config": {"units": 3}}},
    "RNN": {"cell": {"class_name": "LSTMCell", "config": {"units": 3}}},
}
for _name in ("SimpleRNN", "LSTM", "GRU", "SimpleRNNCell", "LSTMCell", "GRUCell"):
    REQUIRED[_name] = {"units": 3}  # a cell alone is built on one step's (features)

# Public classes that are not kinds of their own: what each makes.
PYTHON_ONLY = {"Layer": None, "Input": "InputLayer", "Softmax": "Activation", "ReLU": "Activation"}
PYTHON_ONLY.update(Lambda=None)  # traced as a custom layer's call() (keras/_trace.py)
PYTHON_ONLY.update(add="Add", concatenate="Concatenate")  # keras.layers.add([a, b]): Add()(...)
PYTHON_ONLY.update(
    subtract="Subtract", multiply="Multiply", maximum="Maximum", minimum="Minimum",
    average="Average",
)  # fmt: skip

# Arguments whose Python default (None) the engine resolves to a value: strides default to the
# pool size, data_format to channels_last, activation None is linear, dtype None is the global
# dtype policy, InputLayer's sparse and ragged None are False.
RESOLVED = {"strides", "data_format", "activation", "dtype", "sparse", "ragged"}

# Keras's short forms a layer expands as Keras's get_config writes them (ZeroPadding2D's
# padding=(1, 1) is ((1, 1), (1, 1))): compared as the layer made with its defaults holds them.
EXPANDED = {
    ("ZeroPadding2D", "padding"),
    ("Cropping2D", "cropping"),
    ("ZeroPadding1D", "padding"),
}

# Kinds that take (steps, features) samples.
SEQUENCE_INPUT = {"ZeroPadding1D": [None, 8, 4], "Cropping1D": [None, 8, 4]}
SEQUENCE_INPUT["TimeDistributed"] = [None, 8, 4]
for _name in ("Conv1D", "MaxPooling1D", "AveragePooling1D", "GlobalAveragePooling1D",
              "GlobalMaxPooling1D", "SimpleRNN", "LSTM", "GRU", "RNN"):
    SEQUENCE_INPUT[_name] = [None, 8, 4]


def engine_config(kind: dict) -> dict:
    """The kind's Keras config as the engine writes it after reading only what is required (in a
    model whose output a Flatten makes flat, as the engine requires)."""
    shape = [None, 8, 8, 1] if kind["takes_images"] else [None, 16]
    shape = SEQUENCE_INPUT.get(kind["class_name"], shape)
    if kind["merges"]:  # Add, Concatenate: in a functional model, of the input twice
        tensor = {"class_name": "__keras_tensor__", "config": {"keras_history": ["in", 0, 0]}}
        config = {"name": "probe", **REQUIRED.get(kind["class_name"], {})}
        layers_json = [
            {"class_name": "InputLayer", "config": {"batch_shape": shape, "name": "in"},
             "name": "in", "inbound_nodes": []},
            {"class_name": kind["class_name"], "config": config, "name": "probe",
             "inbound_nodes": [{"args": [[tensor, tensor]], "kwargs": {}}]},
        ]
        doc = {"class_name": "Functional", "config": {"name": "m", "layers": layers_json,
               "input_layers": ["in", 0, 0], "output_layers": ["probe", 0, 0]}}
        model = _core.model_from_json(json.dumps(doc), "registry")
        return json.loads(_core.model_to_json(model))["config"]["layers"][1]["config"]
    entries = [{"class_name": "InputLayer", "config": {"batch_shape": shape, "name": "in"}}]
    if not kind["is_model_input"]:
        config = {"name": "probe", **REQUIRED.get(kind["class_name"], {})}
        entries.append({"class_name": kind["class_name"], "config": config})
    entries.append({"class_name": "Flatten", "config": {"name": "flat"}})
    doc = {"class_name": "Sequential", "config": {"name": "m", "layers": entries}}
    model = _core.model_from_json(json.dumps(doc), "registry")
    written = json.loads(_core.model_to_json(model))["config"]["layers"]
    return written[0 if kind["is_model_input"] else 1]["config"]


def normal(value: Any) -> Any:
    """One spelling of a value: tuples as lists, a one-axis list as the axis, an initializer
    (name, class or serialized dict) as its lower-case name without underscores."""
    if isinstance(value, dict) and "class_name" in value:
        value = value["class_name"]
    if isinstance(value, tuple):
        value = list(value)
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, str):
        return value.lower().replace("_", "")
    return value


def test_the_registry_lists_every_kind_once():
    names = [k["class_name"] for k in KINDS]
    assert len(names) == len(set(names))
    assert "Dense" in names and "LayerNormalization" in names


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k["class_name"])
def test_every_kind_has_its_python_class_under_its_keras_names(kind):
    cls = getattr(layers, kind["class_name"])
    assert cls.__name__ == kind["class_name"]
    assert kind["class_name"] in layers.__all__
    for alias in kind["aliases"]:
        assert getattr(layers, alias) is cls


def test_every_public_class_is_a_kind_or_says_which_it_makes():
    known = {k["class_name"] for k in KINDS} | {a for k in KINDS for a in k["aliases"]}
    for name in layers.__all__:
        if name in PYTHON_ONLY:
            made = PYTHON_ONLY[name]
            assert made is None or made in known, name
        else:
            assert name in known, f"keras.layers.{name} has no kind in the engine's registry"


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k["class_name"])
def test_every_python_default_is_the_engines(kind):
    config = engine_config(kind)
    cls = getattr(layers, kind["class_name"])
    compared = []
    for name, p in inspect.signature(cls.__init__).parameters.items():
        given = name in REQUIRED.get(kind["class_name"], {}) or name in ("name", "batch_shape")
        if p.default is inspect.Parameter.empty or name not in config or given:
            continue
        if p.default is None and config[name] is not None and name in RESOLVED:
            continue
        default = p.default
        if (kind["class_name"], name) in EXPANDED:
            held = getattr(cls(), name)
            default = [list(side) if isinstance(side, tuple) else side for side in held]
        assert normal(default) == normal(config[name]), (
            f"{kind['class_name']}({name}=...): Python's default {default!r}, "
            f"the engine's {config[name]!r}"
        )
        compared.append(name)
    if kind["class_name"] == "LayerNormalization":
        assert {"axis", "epsilon", "center", "scale", "rms_scaling"} <= set(compared)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k["class_name"])
def test_every_kind_is_rebuilt_by_its_python_class_from_the_config_the_engine_writes(kind):
    """model_from_json makes each Python layer with from_config on the engine's config (every
    argument spelled out): the class takes every argument the engine writes, and makes the same
    engine layer from it (so nothing is lost or changed on the way back)."""
    config = engine_config(kind)
    cls = getattr(layers, kind["class_name"])
    made = cls.from_config(dict(config))
    assert type(made) is cls
    assert json.loads(made._core_layer().keras_config()) == config


def test_the_traced_op_kinds_are_in_the_registry_and_refused_in_model_files():
    names = {k["class_name"] for k in _core.layer_kinds()}
    assert ENGINE_ONLY <= names
    for name in sorted(ENGINE_ONLY):
        assert name not in layers.__all__
        doc = {"class_name": "Sequential", "config": {"name": "m", "layers": [
            {"class_name": "InputLayer", "config": {"batch_shape": [None, 4], "name": "in"}},
            {"class_name": name, "config": {"name": "op"}},
        ]}}  # fmt: skip
        with pytest.raises(ValueError, match="no Keras layer class"):
            _core.model_from_json(json.dumps(doc), "registry")


def test_a_layer_made_in_python_is_checked_as_a_model_files_layer_is() -> None:
    """keras.layers' classes make their engine layers through the registry's reader
    (layer_from_config): its refusals reach Python naming the class and the argument."""
    with pytest.raises(ValueError, match=r"Reshape: argument target_shape: .*only one dimension"):
        layers.Reshape((-1, -1, 4))
    with pytest.raises(ValueError, match="Dense: argument units: "):
        layers.Dense(0)
    with pytest.raises(ValueError, match="Dropout: argument rate: "):
        layers.Dropout(1.5)
    with pytest.raises(ValueError, match="Rescaling: argument offset: must hold finite numbers"):
        layers.Rescaling(0.5, offset=float("inf"))
