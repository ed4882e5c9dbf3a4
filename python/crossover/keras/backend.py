"""keras.backend: get_value and set_value (Keras 3 keeps them for tf.keras scripts) for what
crossover gives as a variable (optimizer.learning_rate), clear_session, and the settings Keras
reports (image_data_format, floatx, epsilon, backend).

TensorFlow 2.21's tf.keras.backend (keras._tf_keras.keras.backend) also has Keras 2's backend
functions (keras/src/legacy/backend.py), which Keras 3's own keras.backend lacks: those scripts
call are here, each as the legacy one (int_shape, ndim, dtype, shape, count_params,
is_keras_tensor; square, sqrt, exp, log, abs, maximum, minimum, equal, cast, mean, sum, clip,
random_normal, each TensorFlow's op). crossover serves tf.keras and keras by one module, so
keras.backend has them too (on Keras 3, keras.backend.int_shape is an AttributeError)."""

import math as _math
from typing import Any, Optional

import numpy as np

from .. import _tensor
from .._args import reject_unsupported, unsupported_attribute
from . import _names
from .layers import Variable  # keras.backend.Variable: keras.Variable


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


# --- tf.keras.backend's legacy functions (keras/src/legacy/backend.py) ---------------------
def is_keras_tensor(x: Any) -> bool:
    """Whether x is a symbolic tensor (keras.Input or a layer's output in a functional model)."""
    from ._symbolic import KerasTensor

    return isinstance(x, KerasTensor)


def int_shape(x: Any) -> Optional[tuple[Optional[int], ...]]:
    """The shape as a tuple of ints (None for the batch of a symbolic tensor): x.shape."""
    shape = x.shape
    if not isinstance(shape, tuple):
        shape = tuple(shape.as_list())
    return tuple(shape)


def _tf_value(x: Any) -> bool:
    """A tf tensor or a variable: what the legacy functions below take (TensorFlow's shape and
    dtype objects); a symbolic tensor's shape tuple and a numpy array's shape and dtype lack
    rank, as_list and base_dtype, which raise the AttributeError they raise on TensorFlow."""
    return isinstance(x, _tensor.Tensor) or _tensor._is_var(x)


def ndim(x: Any) -> int:
    """x.shape.rank: the number of axes of a tensor or a variable."""
    if _tf_value(x):
        return len(tuple(x.shape))
    return x.shape.rank


def dtype(x: Any) -> str:
    """The dtype's name ("float32") of a tf tensor or tf.Variable (x.dtype.base_dtype.name: a
    symbolic tensor's or a numpy array's dtype has no base_dtype, as on TensorFlow)."""
    if _tf_value(x):
        return np.dtype(x.dtype).name
    return x.dtype.base_dtype.name


def shape(x: Any) -> _tensor.Tensor:
    """tf.shape(x): the shape as an int32 tensor."""
    if is_keras_tensor(x):
        raise ValueError(
            "A KerasTensor cannot be used as input to a TensorFlow function. A KerasTensor is a "
            "symbolic placeholder for a shape and dtype, used when constructing Keras Functional "
            "models or Keras Functions. You can only use it as input to a Keras layer or a Keras "
            "operation (from the namespaces `keras.layers` and `keras.ops`)."
        )
    return _tensor.shape(x)


def count_params(x: Any) -> int:
    """The number of elements of a tensor or variable (math.prod(x.shape.as_list()))."""
    if _tf_value(x):
        return int(_math.prod(tuple(x.shape)))
    return _math.prod(x.shape.as_list())


def square(x: Any) -> _tensor.Tensor:
    return _tensor.square(x)


def sqrt(x: Any) -> _tensor.Tensor:
    """tf.sqrt of x clipped below at 0 (the legacy backend's); traced on a symbolic tensor."""
    if _tensor._traced(x) is not None:
        return _tensor.sqrt(_tensor.maximum(x, 0.0))
    x = _tensor.convert_to_tensor(x)
    return _tensor.sqrt(_tensor.maximum(x, _tensor.convert_to_tensor(0.0, x.dtype)))


def exp(x: Any) -> _tensor.Tensor:
    return _tensor.exp(x)


def log(x: Any) -> _tensor.Tensor:
    return _tensor.log(x)


def abs(x: Any) -> _tensor.Tensor:  # noqa: A001 (the backend's name)
    return _tensor.abs(x)


def maximum(x: Any, y: Any) -> _tensor.Tensor:
    return _tensor.maximum(x, y)


def minimum(x: Any, y: Any) -> _tensor.Tensor:
    return _tensor.minimum(x, y)


def equal(x: Any, y: Any) -> _tensor.Tensor:
    return _tensor.equal(x, y)


def cast(x: Any, dtype: Any) -> _tensor.Tensor:
    return _tensor.cast(x, dtype)


def mean(x: Any, axis: Any = None, keepdims: bool = False) -> _tensor.Tensor:
    """tf.reduce_mean (a bool tensor cast to floatx first)."""
    x = _tensor.convert_to_tensor(x)
    if x.dtype == np.bool_:
        x = _tensor.cast(x, floatx())
    return _tensor.reduce_mean(x, axis, keepdims)


def sum(x: Any, axis: Any = None, keepdims: bool = False) -> _tensor.Tensor:  # noqa: A001
    return _tensor.reduce_sum(x, axis, keepdims)


def clip(x: Any, min_value: Any, max_value: Any) -> _tensor.Tensor:
    """tf.clip_by_value (a max below the min is the min; None is no bound)."""
    if isinstance(min_value, (int, float)) and isinstance(max_value, (int, float)):
        if max_value < min_value:
            max_value = min_value
    if min_value is None:
        min_value = -np.inf
    if max_value is None:
        max_value = np.inf
    return _tensor.clip_by_value(x, min_value, max_value)


def random_normal(
    shape: Any, mean: float = 0.0, stddev: float = 1.0, dtype: Any = None, seed: Any = None
) -> _tensor.Tensor:
    """tf.random.normal (floatx by default; without a seed, one drawn from numpy's global
    generator, as the legacy backend draws it)."""
    from .. import random

    if dtype is None:
        dtype = floatx()
    if seed is None:
        seed = np.random.randint(10e6)
    return random.normal(shape, mean=mean, stddev=stddev, dtype=dtype, seed=seed)


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "keras.backend",
        name,
        "clear_session, image_data_format, floatx, epsilon, backend, get_value and set_value, "
        "and tf.keras.backend's int_shape, ndim, dtype, shape, count_params, is_keras_tensor, "
        "square, sqrt, exp, log, abs, maximum, minimum, equal, cast, mean, sum, clip and "
        "random_normal",
    )


__all__ = ["get_value", "set_value", "clear_session", "image_data_format"]
__all__ += ["set_image_data_format", "floatx", "set_floatx", "epsilon", "backend", "Variable"]
__all__ += ["is_keras_tensor", "int_shape", "ndim", "dtype", "shape", "count_params"]
__all__ += ["square", "sqrt", "exp", "log", "abs", "maximum", "minimum", "equal", "cast"]
__all__ += ["mean", "sum", "clip", "random_normal"]
