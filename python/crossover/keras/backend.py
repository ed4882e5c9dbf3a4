"""keras.backend: get_value and set_value (Keras 3 keeps them for tf.keras scripts) for what
crossover gives as a variable (optimizer.learning_rate), clear_session, and the settings Keras
reports (image_data_format, floatx, epsilon, backend)."""

from typing import Any

import numpy as np

from . import _names
from .layers import Variable  # keras.backend.Variable: keras.Variable
from ._args import reject_unsupported, unsupported_attribute


def clear_session(free_memory: bool = True) -> None:
    """Keras's clear_session: the automatic layer and model names start again (dense, dense_1,
    ...). Models made before keep their weights; crossover holds no other global graph state."""
    _names.reset()


def image_data_format() -> str:
    """'channels_last': the only layout crossover's images take (N, height, width, channels)."""
    return "channels_last"


def set_image_data_format(data_format: str) -> None:
    if data_format not in ("channels_last", "channels_first"):
        raise ValueError(
            "The `data_format` argument must be one of {'channels_first', 'channels_last'}. "
            f"Received: data_format={data_format}"
        )
    reject_unsupported("set_image_data_format", data_format=(data_format, "channels_last"))


def floatx() -> str:
    """'float32': crossover's inputs, weights and activations."""
    return "float32"


def set_floatx(value: str) -> None:
    reject_unsupported("set_floatx", value=(str(value), "float32"))


def epsilon() -> float:
    """Keras's fuzz factor, 1e-7 (the cross-entropies clip probabilities to [eps, 1 - eps])."""
    return 1e-7


def backend() -> str:
    """'tensorflow': crossover answers for the TensorFlow backend whose API it implements."""
    return "tensorflow"


def get_value(x: Any) -> Any:
    """The value as numpy (a float32 scalar for optimizer.learning_rate)."""
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)


def set_value(x: Any, value: Any) -> None:
    """x.assign(value): optimizer.learning_rate takes the new rate (also during fit, from a
    callback: the next epoch runs with it)."""
    if not hasattr(x, "assign"):
        raise TypeError(f"set_value: {x!r} is not a variable (optimizer.learning_rate is)")
    x.assign(value)


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "keras.backend",
        name,
        "clear_session, image_data_format, floatx, epsilon, backend, get_value and set_value",
    )


__all__ = ["get_value", "set_value", "clear_session", "image_data_format"]
__all__ += ["set_image_data_format", "floatx", "set_floatx", "epsilon", "backend", "Variable"]
