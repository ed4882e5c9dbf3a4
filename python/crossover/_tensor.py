"""What calling a model (and tf.constant, tf.nn.softmax, a loss function ...) returns: a numpy
array with TensorFlow's eager-tensor manners (`.numpy()`, `.shape.as_list()`, TensorFlow's
repr), and the few TensorFlow ops that scripts apply to it, computed by numpy.

A Tensor *is* an ndarray (a subclass), so numpy takes it as it is, without a copy; numpy's own
functions (np.argmax, np.mean, ...) give plain ndarrays, as they do on TensorFlow's tensors;
arithmetic on tensors (`t * 2`) gives tensors."""

from typing import Any, Optional, Sequence, Union

import numpy as np

# TensorFlow's dtypes: numpy dtypes (`tf.float32 == np.float32`, `.name == "float32"`).
float16 = np.dtype("float16")
float32 = np.dtype("float32")
float64 = np.dtype("float64")
double = float64
half = float16
int8 = np.dtype("int8")
int16 = np.dtype("int16")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
uint8 = np.dtype("uint8")
uint16 = np.dtype("uint16")
uint32 = np.dtype("uint32")
uint64 = np.dtype("uint64")
bool_ = np.dtype("bool")
DTYPES = {
    "float16": float16,
    "float32": float32,
    "float64": float64,
    "double": float64,
    "half": float16,
    "int8": int8,
    "int16": int16,
    "int32": int32,
    "int64": int64,
    "uint8": uint8,
    "uint16": uint16,
    "uint32": uint32,
    "uint64": uint64,
    "bool": bool_,
}


# TensorFlow's DataType numbers (types.proto), which tf.as_dtype takes: tf.zeros(1, 1) is float32.
_DATA_TYPES = {1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8"}
_DATA_TYPES.update({9: "int64", 10: "bool", 17: "uint16", 19: "float16", 22: "uint32"})
_DATA_TYPES.update({23: "uint64"})


def as_dtype(dtype: Any) -> np.dtype:
    """A TensorFlow / Keras / numpy dtype (object, name or type) as a numpy dtype."""
    name = getattr(dtype, "name", None)
    if isinstance(dtype, str):
        name = dtype
    if isinstance(dtype, int) and not isinstance(dtype, bool):  # TensorFlow's DataType enum
        name = _DATA_TYPES.get(dtype, name)
    if isinstance(name, str) and name in DTYPES:
        return DTYPES[name]
    try:
        return np.dtype(dtype)
    except TypeError:
        raise TypeError(f"Cannot convert {dtype!r} to a dtype") from None


class TensorShape(tuple):
    """A tensor's shape: a tuple, with TensorFlow's TensorShape methods."""

    def as_list(self) -> list[Optional[int]]:
        return list(self)

    @property
    def rank(self) -> int:
        return len(self)

    ndims = rank

    def num_elements(self) -> int:
        return int(np.prod(self, dtype=np.int64))


class Tensor(np.ndarray):
    """An eager tensor's value: numpy underneath, TensorFlow's `.numpy()` and repr on top."""

    def __new__(cls, value: Any) -> "Tensor":
        return np.asarray(value).view(cls)

    def numpy(self) -> Any:
        """The value as numpy: an ndarray, or a numpy scalar for a 0-d tensor (TensorFlow's)."""
        plain = self.view(np.ndarray)
        return plain[()] if plain.ndim == 0 else plain

    @property  # type: ignore[override]
    def shape(self) -> TensorShape:
        return TensorShape(np.ndarray.shape.__get__(self))  # type: ignore[attr-defined]

    @shape.setter
    def shape(self, value: Any) -> None:
        np.ndarray.shape.__set__(self, value)  # type: ignore[attr-defined]

    def get_shape(self) -> TensorShape:
        return self.shape

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        # numpy's functions give what they give on a plain ndarray (as on TensorFlow's tensors).
        return func(*_plain(args), **_plain(kwargs))

    def __repr__(self) -> str:
        plain = self.view(np.ndarray)
        value = repr(plain[()] if plain.ndim == 0 else plain)
        if plain.ndim == 0:
            value = str(plain[()])
        return f"<tf.Tensor: shape={tuple(plain.shape)}, dtype={plain.dtype.name}, numpy={value}>"

    def __str__(self) -> str:
        plain = self.view(np.ndarray)
        return f"tf.Tensor({str(plain)}, shape={tuple(plain.shape)}, dtype={plain.dtype.name})"

    def __hash__(self) -> int:  # TensorFlow's tensors are not hashable either
        raise TypeError("Tensor is unhashable. Instead, use tensor.ref() as the key.")


def _plain(value: Any) -> Any:
    if isinstance(value, Tensor):
        return value.view(np.ndarray)
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def tensor(value: Any) -> Tensor:
    """`value` (an ndarray, a numpy scalar) as a Tensor, without a copy where it is an array."""
    return np.asarray(value).view(Tensor)


def _traced(*values: Any) -> Any:
    """keras/_trace.py when an op's operands hold a symbolic tensor (a custom layer's call()
    traced, a functional model): the op becomes a node of the model's graph. Else None: numpy."""
    from .keras import _trace

    return _trace if _trace.symbolic(*values) else None


def convert_to_tensor(
    value: Any, dtype: Any = None, dtype_hint: Any = None, name: Any = None
) -> Tensor:
    """tf.convert_to_tensor: Python floats become float32 and Python ints int32 (TensorFlow's
    rule), numpy arrays keep their dtype; `dtype` converts."""
    trace = _traced(value)
    if trace is not None:  # an op that has no node on symbolic tensors
        import sys

        op = sys._getframe(1).f_code.co_name
        raise trace.not_supported(f"the op '{op}'" if op != "op" else "this op")
    if dtype is not None:
        return tensor(np.asarray(_plain(value), dtype=as_dtype(dtype)))
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        return tensor(value)
    a = np.asarray(_plain(value))
    if a.dtype == np.float64:
        a = a.astype(as_dtype(dtype_hint) if dtype_hint is not None else np.float32)
    elif a.dtype == np.int64:
        a = a.astype(as_dtype(dtype_hint) if dtype_hint is not None else np.int32)
    return tensor(a)


def constant(value: Any, dtype: Any = None, shape: Any = None, name: Any = None) -> Tensor:
    """tf.constant: as convert_to_tensor (a copy), reshaped to `shape` (a scalar is broadcast)."""
    t = np.array(convert_to_tensor(value, dtype))
    if shape is not None:
        shape = tuple(shape)
        t = np.broadcast_to(t, shape).copy() if t.size == 1 else t.reshape(shape)
    return tensor(t)


def cast(x: Any, dtype: Any, name: Any = None) -> Tensor:
    return tensor(np.asarray(_plain(x)).astype(as_dtype(dtype)))


def _axis(axis: Any) -> Any:
    if axis is None:
        return None
    if isinstance(axis, (list, tuple, np.ndarray)):
        return tuple(int(a) for a in np.asarray(axis).reshape(-1))
    return int(axis)


def reduce_sum(
    input_tensor: Any, axis: Any = None, keepdims: bool = False, name: Any = None
) -> Tensor:
    if (trace := _traced(input_tensor)) is not None:
        return trace.reduce("sum", input_tensor, axis, keepdims)
    x = convert_to_tensor(input_tensor).view(np.ndarray)
    return tensor(np.sum(x, axis=_axis(axis), keepdims=keepdims, dtype=x.dtype))


def reduce_mean(
    input_tensor: Any, axis: Any = None, keepdims: bool = False, name: Any = None
) -> Tensor:
    """TensorFlow's mean: in the input's dtype (an integer mean is truncated)."""
    if (trace := _traced(input_tensor)) is not None:
        return trace.reduce("mean", input_tensor, axis, keepdims)
    x = convert_to_tensor(input_tensor).view(np.ndarray)
    if np.issubdtype(x.dtype, np.integer) or x.dtype == np.bool_:
        total = np.sum(x, axis=_axis(axis), keepdims=keepdims, dtype=np.int64)
        count = x.size // max(np.asarray(total).size, 1) if x.size else 1
        return tensor((np.asarray(total) // count).astype(x.dtype))
    return tensor(np.mean(x, axis=_axis(axis), keepdims=keepdims, dtype=x.dtype))


def reduce_max(
    input_tensor: Any, axis: Any = None, keepdims: bool = False, name: Any = None
) -> Tensor:
    return tensor(
        np.max(
            convert_to_tensor(input_tensor).view(np.ndarray), axis=_axis(axis), keepdims=keepdims
        )
    )


def reduce_min(
    input_tensor: Any, axis: Any = None, keepdims: bool = False, name: Any = None
) -> Tensor:
    return tensor(
        np.min(
            convert_to_tensor(input_tensor).view(np.ndarray), axis=_axis(axis), keepdims=keepdims
        )
    )


def argmax(input: Any, axis: Any = None, output_type: Any = int64, name: Any = None) -> Tensor:
    """tf.argmax: along axis 0 when no axis is given (TensorFlow's default), as int64."""
    x = convert_to_tensor(input).view(np.ndarray)
    return tensor(np.argmax(x, axis=0 if axis is None else int(axis)).astype(as_dtype(output_type)))


def argmin(input: Any, axis: Any = None, output_type: Any = int64, name: Any = None) -> Tensor:
    x = convert_to_tensor(input).view(np.ndarray)
    return tensor(np.argmin(x, axis=0 if axis is None else int(axis)).astype(as_dtype(output_type)))


def one_hot(
    indices: Any,
    depth: int,
    on_value: Any = None,
    off_value: Any = None,
    axis: Any = None,
    dtype: Any = None,
    name: Any = None,
) -> Tensor:
    """tf.one_hot: a new axis of size `depth` (last unless `axis`); an index outside [0, depth)
    gives a row of off_value, as TensorFlow's does."""
    idx = np.asarray(_plain(indices))
    if not (np.issubdtype(idx.dtype, np.integer)):
        raise TypeError(f"one_hot: indices must be integers, got dtype {idx.dtype}")
    out_dtype = as_dtype(dtype) if dtype is not None else float32
    on = 1 if on_value is None else on_value
    off = 0 if off_value is None else off_value
    depth = int(depth)
    out = np.full(idx.shape + (depth,), off, dtype=out_dtype)
    valid = (idx >= 0) & (idx < depth)
    out[valid, idx[valid]] = on
    if axis is not None and int(axis) != -1:
        out = np.moveaxis(out, -1, int(axis))
    return tensor(out)


def softmax(logits: Any, axis: int = -1, name: Any = None) -> Tensor:
    """tf.nn.softmax, in the input's float dtype: exp(x - max) / sum."""
    if (trace := _traced(logits)) is not None:
        return trace.activation("softmax", logits, axis)
    x = convert_to_tensor(logits).view(np.ndarray)
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"softmax: logits must be floating point, got dtype {x.dtype}")
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return tensor(e / np.sum(e, axis=axis, keepdims=True))


def log_softmax(logits: Any, axis: int = -1, name: Any = None) -> Tensor:
    x = convert_to_tensor(logits).view(np.ndarray)
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return tensor(shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True)))


def sigmoid(x: Any, name: Any = None) -> Tensor:
    if (trace := _traced(x)) is not None:
        return trace.activation("sigmoid", x)
    v = convert_to_tensor(x).view(np.ndarray)
    return tensor(1 / (1 + np.exp(-v)))


def relu(features: Any, name: Any = None) -> Tensor:
    if (trace := _traced(features)) is not None:
        return trace.activation("relu", features)
    v = convert_to_tensor(features).view(np.ndarray)
    return tensor(np.maximum(v, np.zeros((), v.dtype)))


def tanh(x: Any, name: Any = None) -> Tensor:
    if (trace := _traced(x)) is not None:
        return trace.activation("tanh", x)
    return tensor(np.tanh(convert_to_tensor(x).view(np.ndarray)))


def _unary(f: Any) -> Any:
    def op(x: Any, name: Any = None) -> Tensor:
        return tensor(f(convert_to_tensor(x).view(np.ndarray)))

    op.__name__ = f.__name__
    return op


_TRACED_BINARY = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "maximum": "maximum",
    "minimum": "minimum",
}  # fmt: skip


def _binary(f: Any) -> Any:
    traced = _TRACED_BINARY.get(f.__name__)

    def op(x: Any, y: Any, name: Any = None) -> Tensor:
        if traced is not None and (trace := _traced(x, y)) is not None:
            return trace.binary(traced, x, y)
        return tensor(
            f(convert_to_tensor(x).view(np.ndarray), convert_to_tensor(y).view(np.ndarray))
        )

    op.__name__ = f.__name__
    return op


exp, log, sqrt, square, abs = (_unary(f) for f in (np.exp, np.log, np.sqrt, np.square, np.abs))
add, subtract, multiply, maximum, minimum, equal, not_equal, greater, less = (
    _binary(f)
    for f in (
        np.add,
        np.subtract,
        np.multiply,
        np.maximum,
        np.minimum,
        np.equal,
        np.not_equal,
        np.greater,
        np.less,
    )
)


def divide(x: Any, y: Any, name: Any = None) -> Tensor:
    if (trace := _traced(x, y)) is not None:
        return trace.binary("divide", x, y)
    return tensor(
        np.true_divide(convert_to_tensor(x).view(np.ndarray), convert_to_tensor(y).view(np.ndarray))
    )


def matmul(
    a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False, name: Any = None
) -> Tensor:
    if (trace := _traced(a, b)) is not None:
        if transpose_a or transpose_b:
            raise trace.not_supported("matmul with transpose_a or transpose_b")
        return trace.matmul(a, b)
    x, y = convert_to_tensor(a).view(np.ndarray), convert_to_tensor(b).view(np.ndarray)
    return tensor(
        np.matmul(
            np.swapaxes(x, -1, -2) if transpose_a else x,
            np.swapaxes(y, -1, -2) if transpose_b else y,
        )
    )


def reshape(tensor_: Any, shape: Sequence[int], name: Any = None) -> Tensor:
    return tensor(
        np.reshape(convert_to_tensor(tensor_).view(np.ndarray), tuple(int(d) for d in shape))
    )


def expand_dims(input: Any, axis: int, name: Any = None) -> Tensor:
    return tensor(np.expand_dims(convert_to_tensor(input).view(np.ndarray), int(axis)))


def squeeze(input: Any, axis: Any = None, name: Any = None) -> Tensor:
    return tensor(np.squeeze(convert_to_tensor(input).view(np.ndarray), axis=_axis(axis)))


def transpose(a: Any, perm: Any = None, name: Any = None) -> Tensor:
    return tensor(np.transpose(convert_to_tensor(a).view(np.ndarray), perm))


def concat(values: Sequence[Any], axis: int, name: Any = None) -> Tensor:
    if (trace := _traced(values)) is not None:
        return trace.concat(values, axis)
    return tensor(
        np.concatenate([convert_to_tensor(v).view(np.ndarray) for v in values], axis=int(axis))
    )


def stack(values: Sequence[Any], axis: int = 0, name: Any = None) -> Tensor:
    return tensor(np.stack([convert_to_tensor(v).view(np.ndarray) for v in values], axis=int(axis)))


def zeros(shape: Any, dtype: Any = float32, name: Any = None) -> Tensor:
    return tensor(
        np.zeros(tuple(np.atleast_1d(shape)) if np.ndim(shape) else (int(shape),), as_dtype(dtype))
    )


def ones(shape: Any, dtype: Any = float32, name: Any = None) -> Tensor:
    return tensor(
        np.ones(tuple(np.atleast_1d(shape)) if np.ndim(shape) else (int(shape),), as_dtype(dtype))
    )


def shape(input: Any, out_type: Any = int32, name: Any = None) -> Tensor:
    return tensor(np.asarray(np.shape(_plain(input)), dtype=as_dtype(out_type)))


def range_(
    start: Any, limit: Any = None, delta: Any = 1, dtype: Any = None, name: Any = None
) -> Tensor:
    if limit is None:
        start, limit = 0, start
    values = np.arange(start, limit, delta)
    if dtype is not None:
        values = values.astype(as_dtype(dtype))
    elif values.dtype == np.int64:
        values = values.astype(np.int32)
    elif values.dtype == np.float64:
        values = values.astype(np.float32)
    return tensor(values)


def clip_by_value(t: Any, clip_value_min: Any, clip_value_max: Any, name: Any = None) -> Tensor:
    return tensor(np.clip(convert_to_tensor(t).view(np.ndarray), clip_value_min, clip_value_max))


Number = Union[int, float]
