"""keras.ops: the numpy-like ops Keras 3 scripts apply to predictions (numpy's semantics, as
Keras's ops have them: `argmax` over the flattened array when no axis is given), on tensors
computed by numpy."""

from typing import Any

import numpy as np

from .. import _tensor
from .._args import unsupported_attribute
from .._tensor import one_hot as _tf_one_hot
from . import _trace


def _a(x: Any) -> np.ndarray:
    return _tensor.convert_to_tensor(x).view(np.ndarray)


def convert_to_tensor(x: Any, dtype: Any = None, sparse: Any = None) -> _tensor.Tensor:
    return _tensor.convert_to_tensor(x, dtype)


def convert_to_numpy(x: Any) -> np.ndarray:
    return np.array(_tensor._plain(x))


def cast(x: Any, dtype: Any) -> _tensor.Tensor:
    return _tensor.cast(x, dtype)


def argmax(x: Any, axis: Any = None, keepdims: bool = False) -> _tensor.Tensor:
    """Keras's: int32, over the flattened array when axis is None."""
    return _tensor.tensor(np.argmax(_a(x), axis=axis, keepdims=keepdims).astype(np.int32))


def argmin(x: Any, axis: Any = None, keepdims: bool = False) -> _tensor.Tensor:
    return _tensor.tensor(np.argmin(_a(x), axis=axis, keepdims=keepdims).astype(np.int32))


# keras.ops on the TensorFlow backend are TensorFlow's ops: on tensors they are the eager ops
# (_tensor.py), which a GradientTape records; where _tensor has no such op, numpy (not recorded).
_RECORDED_REDUCTIONS = {
    "sum": "reduce_sum", "mean": "reduce_mean", "amax": "reduce_max", "amin": "reduce_min",
}  # fmt: skip


def _same_dtype(x1: Any, x2: Any) -> tuple[Any, Any]:
    """Keras's dtype promotion before a binary op: operands of different dtypes cast to their
    result type (TensorFlow's own ops would refuse them)."""
    a, b = _tensor._plain(x1), _tensor._plain(x2)
    da, db = np.asarray(a).dtype, np.asarray(b).dtype
    if da == db or not (_tensor._is_tf(x1) and _tensor._is_tf(x2)):
        return x1, x2
    common = np.result_type(da, db)
    return _tensor.cast(x1, common), _tensor.cast(x2, common)


def _reduction(f: Any) -> Any:
    traced = {"sum": "sum", "mean": "mean"}.get(f.__name__)
    recorded = _RECORDED_REDUCTIONS.get(f.__name__)

    def op(x: Any, axis: Any = None, keepdims: bool = False) -> _tensor.Tensor:
        if traced is not None and _trace.symbolic(x):
            return _trace.reduce(traced, x, axis, keepdims)
        if recorded is not None:
            return getattr(_tensor, recorded)(_tensor.convert_to_tensor(x), axis, keepdims)
        return _tensor.tensor(f(_a(x), axis=_tensor._axis(axis), keepdims=keepdims))

    op.__name__ = f.__name__.replace("amax", "max").replace("amin", "min")
    return op


sum, mean, max, min, prod = (_reduction(f) for f in (np.sum, np.mean, np.max, np.min, np.prod))


def softmax(x: Any, axis: int = -1) -> _tensor.Tensor:
    return _tensor.softmax(x, axis=axis)


def sigmoid(x: Any) -> _tensor.Tensor:
    return _tensor.sigmoid(x)


def relu(x: Any) -> _tensor.Tensor:
    return _tensor.relu(x)


def tanh(x: Any) -> _tensor.Tensor:
    return _tensor.tanh(x)


def negative(x: Any) -> _tensor.Tensor:
    if _trace.symbolic(x):
        return _trace.negative(x)
    return _tensor.tensor(np.negative(_a(x)))


def one_hot(x: Any, num_classes: int, axis: int = -1, dtype: Any = None) -> _tensor.Tensor:
    return _tf_one_hot(x, num_classes, axis=axis, dtype=dtype)


def _unary(f: Any) -> Any:
    name = "abs" if f is np.abs else f.__name__  # numpy's is "absolute"
    recorded = name if name in ("exp", "log", "sqrt", "square", "abs") else None

    def op(x: Any) -> _tensor.Tensor:
        if _trace.symbolic(x):
            return _trace.unary(name, x, f"keras.ops.{name}")
        if recorded is not None and np.asarray(_tensor._plain(x)).dtype.kind == "f":
            return getattr(_tensor, recorded)(x)  # recorded by a GradientTape
        return _tensor.tensor(f(_a(x)))

    op.__name__ = name
    return op


exp, log, sqrt, square, abs, round, floor, ceil = (
    _unary(f) for f in (np.exp, np.log, np.sqrt, np.square, np.abs, np.round, np.floor, np.ceil)
)


_TRACED = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "true_divide": "divide",
    "maximum": "maximum", "minimum": "minimum",
}  # fmt: skip


def _binary(f: Any) -> Any:
    traced = _TRACED.get(f.__name__)
    recorded = {**_TRACED, "matmul": "matmul"}.get(f.__name__)

    def op(x1: Any, x2: Any) -> _tensor.Tensor:
        if _trace.symbolic(x1, x2):  # a node of the model's graph (keras/_trace.py)
            if f.__name__ == "matmul":
                return _trace.matmul(x1, x2)
            if traced is None:
                raise _trace.not_supported(f"keras.ops.{f.__name__}")
            return _trace.binary(traced, x1, x2)
        if recorded is not None and (_tensor._is_tf(x1) or _tensor._is_tf(x2)):
            return getattr(_tensor, recorded)(*_same_dtype(x1, x2))
        return _tensor.tensor(f(_a(x1), _a(x2)))

    op.__name__ = f.__name__
    return op


add, subtract, multiply, divide, equal, not_equal, maximum, minimum, matmul = (
    _binary(f)
    for f in (
        np.add,
        np.subtract,
        np.multiply,
        np.true_divide,
        np.equal,
        np.not_equal,
        np.maximum,
        np.minimum,
        np.matmul,
    )
)


def reshape(x: Any, newshape: Any) -> _tensor.Tensor:
    return _tensor.reshape(x, newshape)


def expand_dims(x: Any, axis: int) -> _tensor.Tensor:
    return _tensor.expand_dims(x, axis)


def squeeze(x: Any, axis: Any = None) -> _tensor.Tensor:
    return _tensor.squeeze(x, axis=axis)


def stack(x: Any, axis: int = 0) -> _tensor.Tensor:
    return _tensor.stack(list(x), axis=axis)


def concatenate(xs: Any, axis: int = 0) -> _tensor.Tensor:
    if _trace.symbolic(xs):
        return _trace.concat(xs, axis)
    return _tensor.concat(list(xs), axis=axis)


def zeros(shape: Any, dtype: Any = "float32") -> _tensor.Tensor:
    return _tensor.tensor(np.zeros(shape, _tensor.as_dtype(dtype)))


def ones(shape: Any, dtype: Any = "float32") -> _tensor.Tensor:
    return _tensor.tensor(np.ones(shape, _tensor.as_dtype(dtype)))


def shape(x: Any) -> tuple[int, ...]:
    return tuple(np.shape(_tensor._plain(x)))


def __getattr__(name: str) -> Any:
    raise unsupported_attribute("keras.ops", name, ", ".join(__all__))


__all__ = [
    "convert_to_tensor",
    "convert_to_numpy",
    "cast",
    "argmax",
    "argmin",
    "sum",
    "mean",
    "max",
    "min",
    "prod",
    "softmax",
    "sigmoid",
    "relu",
    "tanh",
    "negative",
    "one_hot",
    "exp",
    "log",
    "sqrt",
    "square",
    "abs",
    "round",
    "floor",
    "ceil",
    "add",
    "subtract",
    "multiply",
    "divide",
    "equal",
    "not_equal",
    "maximum",
    "minimum",
    "matmul",
    "reshape",
    "expand_dims",
    "squeeze",
    "stack",
    "concatenate",
    "zeros",
    "ones",
    "shape",
]
