"""keras.activations: the activations the engine runs, as functions. Given to a layer
(`activation=keras.activations.relu`) they name the engine's activation; called on arrays they
compute it with numpy (tf.nn's)."""

from typing import Any

from .. import _tensor
from .._tensor import relu, sigmoid, tanh
from ._args import unsupported_attribute


def softmax(x: Any, axis: int = -1) -> _tensor.Tensor:
    return _tensor.softmax(x, axis=axis)


def linear(x: Any) -> _tensor.Tensor:
    return _tensor.convert_to_tensor(x)


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "keras.activations",
        name,
        "relu, sigmoid, tanh, softmax and linear (elu, selu, "
        "leaky_relu, gelu, swish are not in the engine)",
    )


__all__ = ["relu", "sigmoid", "tanh", "softmax", "linear"]
