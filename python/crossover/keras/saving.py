"""Keras's weight files and model JSON on crossover's library (nn/weights_io.h, nn/keras_h5.h,
nn/model_config.h): Sequential.save_weights / load_weights / to_json and
keras.models.model_from_json. The formats are the library's; this file maps Keras's arguments."""

import json
import os
from typing import TYPE_CHECKING, Any, Optional

from .. import _core
from ._args import reject_unsupported
from . import layers as layers_module

if TYPE_CHECKING:
    from .models import Sequential


def _path(filepath: Any, who: str) -> str:
    try:
        return os.fspath(filepath)
    except TypeError:
        raise TypeError(f"{who}: filepath must be a str or os.PathLike, got {filepath!r}") from None


def _require_built(model: "Sequential", who: str) -> None:
    if not model.built:
        raise ValueError(
            f"You are {who} a model that has not yet been built: give it an input shape "
            "(keras.Input(shape=...) or input_shape=) first"
        )


def save_weights(
    model: "Sequential", filepath: Any, overwrite: bool = True, max_shard_size: Any = None
) -> None:
    """Keras 3's `.weights.h5` layout, or `.safetensors`, picked by the suffix; written to a
    temporary file in the same folder and renamed over `filepath` once complete."""
    reject_unsupported("save_weights", max_shard_size=(max_shard_size, None))
    path = _path(filepath, "save_weights")
    _core.weights_format(path)  # a .keras or legacy .h5 path is refused before anything else
    _require_built(model, "saving the weights of")
    if not overwrite and os.path.exists(path):
        raise ValueError(f"save_weights: {path} exists and overwrite=False")
    _core.save_weights(model._device_model(), path)


def load_weights(model: "Sequential", filepath: Any, skip_mismatch: bool = False) -> None:
    """Weights from a `.weights.h5` (Keras 3's, or crossover's) or `.safetensors` file, into a
    model of the same architecture; a mismatch is a ValueError naming the layer and shapes."""
    reject_unsupported("load_weights", skip_mismatch=(skip_mismatch, False))
    path = _path(filepath, "load_weights")
    _core.weights_format(path)
    _require_built(model, "loading weights into")
    if not os.path.exists(path):
        raise FileNotFoundError(f"load_weights: no such file: {path}")
    _core.load_weights(model._device_model(), path)


def to_json(model: "Sequential", **kwargs: Any) -> str:
    """Keras 3's model JSON (the library's model_to_json), with compile_config only once the
    user compiled; keyword arguments go to json.dumps, as in Keras."""
    config = json.loads(_core.model_to_json(model._model()))
    if not model._user_compiled:  # the library's placeholder compile is not the user's
        config.pop("compile_config", None)
    return json.dumps(config, **kwargs)  # Keras's separators: {"a": 1, ...}


def _layer_from_core(layer: "_core.Layer") -> layers_module.Layer:
    """The Keras layer for one of the library's layers (as model_from_json rebuilt it)."""
    shape = list(layer.input_shape) or None
    if layer.type == "InputLayer":
        return layers_module.InputLayer(shape=shape, name=layer.name)
    # Each layer keeps the dtype policy the JSON gives it, not the global one (as Keras's).
    dtype = layer.dtype_policy
    if layer.type == "Flatten":
        return layers_module.Flatten(input_shape=shape, name=layer.name, dtype=dtype)
    if layer.type == "Dense":
        return layers_module.Dense(
            layer.units,
            activation=layer.activation,
            use_bias=layer.use_bias,
            name=layer.name,
            dtype=dtype,
        )
    if layer.type == "Dropout":
        return layers_module.Dropout(layer.rate, name=layer.name, dtype=dtype)
    if layer.type == "Activation":
        return layers_module.Activation(layer.activation, name=layer.name, dtype=dtype)
    if layer.type == "Conv2D":
        return layers_module.Conv2D(
            layer.units,
            tuple(layer.window),
            strides=tuple(layer.strides),
            padding=layer.padding,
            activation=layer.activation,
            use_bias=layer.use_bias,
            name=layer.name,
            dtype=dtype,
        )
    if layer.type in ("MaxPooling2D", "AveragePooling2D"):
        pooling = getattr(layers_module, layer.type)
        return pooling(
            tuple(layer.window),
            strides=tuple(layer.strides),
            padding=layer.padding,
            name=layer.name,
            dtype=dtype,
        )
    if layer.type == "GlobalAveragePooling2D":
        return layers_module.GlobalAveragePooling2D(name=layer.name, dtype=dtype)
    if layer.type == "Reshape":
        return layers_module.Reshape(tuple(layer.target_shape), name=layer.name, dtype=dtype)
    if layer.type == "BatchNormalization":
        return layers_module.BatchNormalization(
            momentum=layer.momentum,
            epsilon=layer.epsilon,
            center=layer.center,
            scale=layer.scale,
            name=layer.name,
            dtype=dtype,
        )
    raise ValueError(f"model_from_json: layer {layer.name!r} of type {layer.type} is unknown")


def model_from_json(json_string: str, custom_objects: Optional[dict[str, Any]] = None) -> Any:
    """keras.models.model_from_json: a Sequential model (uncompiled, as in Keras) from what
    Keras 3 or tf.keras 2 `to_json()` wrote. Layers crossover does not run (Conv2D, ...) and
    functional models are a ValueError naming the layer's class."""
    from .models import Sequential

    reject_unsupported("model_from_json", custom_objects=(custom_objects or None, None))
    if not isinstance(json_string, (str, bytes, bytearray)):
        raise TypeError(f"model_from_json: give the JSON text, got {type(json_string).__name__}")
    if isinstance(json_string, (bytes, bytearray)):
        json_string = json_string.decode("utf-8")
    core = _core.model_from_json(json_string, "model_from_json")
    return Sequential([_layer_from_core(l) for l in core.layers], name=core.name)


__all__ = ["save_weights", "load_weights", "to_json", "model_from_json"]
