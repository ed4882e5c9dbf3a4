"""keras.activations: the activations the engine runs, as functions. Given to a layer
(`activation=keras.activations.relu`) they name the engine's activation; called on arrays they
compute it with numpy (tf.nn's)."""

import math
from typing import Any

import numpy as np

from .. import _tensor
from .._args import unsupported_attribute
from .._tensor import relu, sigmoid, tanh


def softmax(x: Any, axis: int = -1) -> _tensor.Tensor:
    return _tensor.softmax(x, axis=axis)


def linear(x: Any) -> _tensor.Tensor:
    return _tensor.convert_to_tensor(x)


def _values(x: Any) -> np.ndarray:
    return _tensor.convert_to_tensor(x).view(np.ndarray)


def elu(x: Any, alpha: float = 1.0) -> _tensor.Tensor:
    v = _values(x)
    return _tensor.tensor(np.where(v > 0, v, alpha * (np.exp(v) - 1)).astype(v.dtype))


def selu(x: Any) -> _tensor.Tensor:
    v = _values(x)
    alpha, scale = 1.6732632423543772, 1.0507009873554805
    return _tensor.tensor((scale * np.where(v > 0, v, alpha * (np.exp(v) - 1))).astype(v.dtype))


def leaky_relu(x: Any, negative_slope: float = 0.2) -> _tensor.Tensor:
    v = _values(x)
    return _tensor.tensor(np.where(v >= 0, v, negative_slope * v).astype(v.dtype))


def gelu(x: Any, approximate: bool = False) -> _tensor.Tensor:
    """The exact GELU x * Phi(x) (Keras's default); the engine runs only that one."""
    v = _values(x)
    if approximate:
        inner = np.sqrt(2 / np.pi) * (v + 0.044715 * v**3)
        return _tensor.tensor((0.5 * v * (1 + np.tanh(inner))).astype(v.dtype))
    erf = np.vectorize(math.erf, otypes=[np.float64])
    return _tensor.tensor((0.5 * v * (1 + erf(v / math.sqrt(2)))).astype(v.dtype))


def softplus(x: Any) -> _tensor.Tensor:
    v = _values(x)
    return _tensor.tensor((np.maximum(v, 0) + np.log1p(np.exp(-np.abs(v)))).astype(v.dtype))


def silu(x: Any) -> _tensor.Tensor:
    v = _values(x)
    return _tensor.tensor((v / (1 + np.exp(-v))).astype(v.dtype))


swish = silu  # Keras's other name (its __name__ stays "silu", as Keras writes it)


def exponential(x: Any) -> _tensor.Tensor:
    return _tensor.tensor(np.exp(_values(x)))


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "keras.activations",
        name,
        "relu, sigmoid, tanh, softmax, linear, elu, selu, leaky_relu, gelu, softplus, silu "
        "(swish) and exponential",
    )


__all__ = ["relu", "sigmoid", "tanh", "softmax", "linear", "elu", "selu", "leaky_relu", "gelu"]
__all__ += ["softplus", "silu", "swish", "exponential"]
