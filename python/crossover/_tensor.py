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

    # Arithmetic is TensorFlow's ops (below), recorded by the tapes that watch an operand.
    def __add__(self, o: Any) -> "Tensor":
        return add(self, o)

    def __radd__(self, o: Any) -> "Tensor":
        return add(o, self)

    def __sub__(self, o: Any) -> "Tensor":
        return subtract(self, o)

    def __rsub__(self, o: Any) -> "Tensor":
        return subtract(o, self)

    def __mul__(self, o: Any) -> "Tensor":
        return multiply(self, o)

    def __rmul__(self, o: Any) -> "Tensor":
        return multiply(o, self)

    def __truediv__(self, o: Any) -> "Tensor":
        return divide(self, o)

    def __rtruediv__(self, o: Any) -> "Tensor":
        return divide(o, self)

    def __pow__(self, o: Any) -> "Tensor":  # type: ignore[override]
        return pow(self, o)

    def __rpow__(self, o: Any) -> "Tensor":  # type: ignore[override]
        return pow(o, self)

    def __matmul__(self, o: Any) -> "Tensor":
        return matmul(self, o)

    def __rmatmul__(self, o: Any) -> "Tensor":
        return matmul(o, self)

    def __neg__(self) -> "Tensor":
        return negative(self)

    def __abs__(self) -> "Tensor":
        return abs(self)

    def __getitem__(self, key: Any) -> Any:
        return _getitem(self, key)


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


# keras/_trace.py, which registers itself when imported (it imports this module, not the
# reverse). None before: no symbolic tensor exists until keras is imported, so ops use numpy.
_tracer: Any = None


def register_tracer(tracer: Any) -> None:
    """Set the module that makes an op on symbolic tensors a graph node (keras/_trace.py)."""
    global _tracer
    _tracer = tracer


def _traced(*values: Any) -> Any:
    """keras/_trace.py when an op's operands hold a symbolic tensor (a custom layer's call()
    traced, a functional model): the op becomes a node of the model's graph. Else None: numpy."""
    trace = _tracer
    return trace if trace is not None and trace.symbolic(*values) else None


def convert_to_tensor(
    value: Any, dtype: Any = None, dtype_hint: Any = None, name: Any = None
) -> Tensor:
    """tf.convert_to_tensor: Python floats become float32 and Python ints int32 (TensorFlow's
    rule), numpy arrays keep their dtype; `dtype` converts."""
    trace = _traced(value)
    if trace is not None:  # an op that has no node on symbolic tensors
        import sys

        frame = sys._getframe(1)  # the public op that was called, past the helpers (_arr)
        while frame.f_code.co_name.startswith("_") and frame.f_back is not None:
            frame = frame.f_back
        op = frame.f_code.co_name
        raise trace.not_supported(f"the op '{op}'" if op != "op" else "this op")
    if hasattr(value, "_eager_read"):  # a tf.Variable: its value read now (recorded)
        read = identity(value)
        return read if dtype is None or as_dtype(dtype) == read.dtype else cast(read, dtype)
    if isinstance(value, Tensor) and (dtype is None or as_dtype(dtype) == value.dtype):
        return value
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


# --- Recording: what tf.GradientTape (_tape.py) differentiates ---------------------------------
#
# Every op below computes its value with numpy and, beside it, its backward: a function of the
# output's gradient that gives each operand's, written with these same ops, so that a tape
# recording while another tape's gradient is computed records the gradient's ops too (second
# order). An op is recorded by each tape that is recording and sees one of its operands
# (watched, or made by an op that tape recorded); a tf.Variable read under a tape is watched
# when it is trainable, as TensorFlow's tapes watch the variables they access.

_recording: list[Any] = []  # the tapes recording now (_tape.GradientTape pushes itself)


class InvalidArgumentError(ValueError):
    """tf.errors.InvalidArgumentError: an op's operands it cannot compute with."""


def _is_var(x: Any) -> bool:
    """A tf.Variable (keras/layers.py's Weight): its values are read with _eager_read()."""
    return hasattr(x, "_eager_read")


def _is_tf(x: Any) -> bool:
    return isinstance(x, Tensor) or hasattr(x, "_eager_read")


def _arr(x: Any) -> np.ndarray:
    """An operand's value as a plain ndarray, without a copy (a Python value: TensorFlow's
    conversion, floats float32 and ints int32)."""
    if isinstance(x, np.ndarray):
        return x if type(x) is np.ndarray else x.view(np.ndarray)
    if hasattr(x, "_eager_read"):
        return x._eager_read()
    return convert_to_tensor(x).view(np.ndarray)


def _record(inputs: tuple[Any, ...], out: "Tensor", backward: Any) -> None:
    if out.dtype.kind != "f":
        return  # integers and booleans have no gradient (TensorFlow's)
    for tape in _recording:
        ids = tape._ids
        seen = False
        for x in inputs:
            if id(x) in ids:
                seen = True
            elif tape._watch_accessed and (
                (_is_var(x) and x.trainable) or getattr(x, "_crossover_variable", None)
            ):
                # A tf.Variable read, or one of a model's trainable_variables: watched, as
                # TensorFlow's tapes watch the variables they access.
                tape._watch_one(x)
                seen = True
        if seen:
            tape._records.append((inputs, out, backward))
            ids.add(id(out))


def _out(value: Any, inputs: tuple[Any, ...], backward: Any) -> "Tensor":
    """The op's result as a Tensor (a new object), recorded where a tape sees an operand."""
    out = np.asarray(value).view(Tensor)
    if _recording:
        _record(inputs, out, backward)
    return out


def _cast_to(v: Any, dtype: np.dtype, op: str) -> np.ndarray:
    """A Python or numpy operand converted to the other operand's dtype, as TensorFlow's binary
    ops convert it (a fraction is not an integer: TensorFlow's TypeError)."""
    a = np.asarray(_plain(v))
    if a.dtype == dtype:
        return a
    if dtype.kind in "iub" and a.dtype.kind in "fc" and not np.all(np.mod(a, 1) == 0):
        raise TypeError(f"{op}: cannot convert {v!r} to a tensor of dtype {dtype.name}")
    return a.astype(dtype)


def _pair(x: Any, y: Any, op: str) -> tuple[np.ndarray, np.ndarray]:
    """Two operands of one dtype: a Python value or numpy array takes the tensor's dtype; two
    tensors of different dtypes are TensorFlow's InvalidArgumentError."""
    xt, yt = _is_tf(x), _is_tf(y)
    if xt and yt:
        a, b = _arr(x), _arr(y)
        if a.dtype != b.dtype:
            raise InvalidArgumentError(
                f"cannot compute {op} as input #1(zero-based) was expected to be a "
                f"{a.dtype.name} tensor but is a {b.dtype.name} tensor (cast one: tf.cast)"
            )
        return a, b
    if xt:
        a = _arr(x)
        return a, _cast_to(y, a.dtype, op)
    if yt:
        b = _arr(y)
        return _cast_to(x, b.dtype, op), b
    a = _arr(convert_to_tensor(x))
    return a, _cast_to(y, a.dtype, op)


def _float_arg(x: Any, op: str) -> np.ndarray:
    a = _arr(x)
    if a.dtype.kind != "f":
        raise TypeError(f"{op}: expected a floating-point tensor, got dtype {a.dtype.name}")
    return a


def _sum_to(g: Any, shape: tuple[int, ...]) -> Any:
    """A broadcast operand's gradient: g summed over the axes broadcasting added or stretched."""
    gshape = np.shape(g)
    shape = tuple(shape)
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and gshape[lead + i] != 1
    )
    return reshape(reduce_sum(g, axis=axes), shape)


def _mask(condition: np.ndarray, dtype: np.dtype) -> np.ndarray:
    return condition.astype(dtype)


# --- Conversions and constants ----------------------------------------------------------------


def identity(input: Any, name: Any = None) -> Tensor:
    """tf.identity: the value (a variable's, read now), its gradient passed through."""
    return _out(np.array(_arr(input)), (input,), lambda g, need: (g,))


def cast(x: Any, dtype: Any, name: Any = None) -> Tensor:
    """tf.cast: a float to float cast passes the gradient (cast back); to an integer none."""
    a = _arr(x) if _is_tf(x) else np.asarray(_plain(x))
    to = as_dtype(dtype)

    def backward(g: Any, need: Any) -> Any:
        return (cast(g, a.dtype) if a.dtype.kind == "f" else None,)

    return _out(a.astype(to), (x,), backward)


def zeros_like(input: Any, dtype: Any = None, name: Any = None) -> Tensor:
    a = _arr(input) if _is_tf(input) else np.asarray(_plain(input))
    return tensor(np.zeros(a.shape, as_dtype(dtype) if dtype is not None else a.dtype))


def ones_like(input: Any, dtype: Any = None, name: Any = None) -> Tensor:
    a = _arr(input) if _is_tf(input) else np.asarray(_plain(input))
    return tensor(np.ones(a.shape, as_dtype(dtype) if dtype is not None else a.dtype))


def fill(dims: Any, value: Any, name: Any = None) -> Tensor:
    """tf.fill: `value`'s dtype (a Python float float32, an int int32)."""
    v = convert_to_tensor(value).view(np.ndarray)
    return tensor(np.full(_dims(dims), v, dtype=v.dtype))


def _dims(shape: Any) -> tuple[int, ...]:
    if np.ndim(_plain(shape)) == 0:
        return (int(_plain(shape)),)
    return tuple(int(d) for d in np.asarray(_plain(shape)).reshape(-1))


def _axis(axis: Any) -> Any:
    if axis is None:
        return None
    if isinstance(axis, (list, tuple, np.ndarray)):
        return tuple(int(a) for a in np.asarray(axis).reshape(-1))
    return int(axis)


# --- Reductions ---------------------------------------------------------------------------------


def _reduced_back(g: Any, shape: tuple[int, ...], axis: Any, keepdims: bool) -> Any:
    """A reduction's output gradient broadcast back over the input's shape."""
    if not keepdims:
        axes = range(len(shape)) if axis is None else np.atleast_1d(axis)
        kept = list(shape)
        for a in axes:
            kept[int(a) % max(len(shape), 1)] = 1
        g = reshape(g, kept)
    return broadcast_to(g, shape)


def _count(shape: tuple[int, ...], axis: Any) -> int:
    if axis is None:
        return int(np.prod(shape, dtype=np.int64))
    return int(np.prod([shape[int(a)] for a in np.atleast_1d(axis)], dtype=np.int64))


def reduce_sum(
    input_tensor: Any, axis: Any = None, keepdims: bool = False, name: Any = None
) -> Tensor:
    if (trace := _traced(input_tensor)) is not None:
        return trace.reduce("sum", input_tensor, axis, keepdims)
    x = _arr(input_tensor)
    ax = _axis(axis)

    def backward(g: Any, need: Any) -> Any:
        return (_reduced_back(g, x.shape, ax, keepdims),)

    return _out(np.sum(x, axis=ax, keepdims=keepdims, dtype=x.dtype), (input_tensor,), backward)


def reduce_mean(
    input_tensor: Any, axis: Any = None, keepdims: bool = False, name: Any = None
) -> Tensor:
    """TensorFlow's mean: in the input's dtype (an integer mean is truncated)."""
    if (trace := _traced(input_tensor)) is not None:
        return trace.reduce("mean", input_tensor, axis, keepdims)
    x = _arr(input_tensor)
    ax = _axis(axis)
    if np.issubdtype(x.dtype, np.integer) or x.dtype == np.bool_:
        total = np.sum(x, axis=ax, keepdims=keepdims, dtype=np.int64)
        count = x.size // max(np.asarray(total).size, 1) if x.size else 1
        return tensor((np.asarray(total) // count).astype(x.dtype))

    def backward(g: Any, need: Any) -> Any:
        scale = np.asarray(1.0 / max(_count(x.shape, ax), 1), dtype=x.dtype)
        return (multiply(_reduced_back(g, x.shape, ax, keepdims), scale),)

    return _out(np.mean(x, axis=ax, keepdims=keepdims, dtype=x.dtype), (input_tensor,), backward)


def _reduce_extreme(f: Any, input_tensor: Any, axis: Any, keepdims: bool) -> Tensor:
    x = _arr(input_tensor)
    ax = _axis(axis)
    value = f(x, axis=ax, keepdims=keepdims)

    def backward(g: Any, need: Any) -> Any:
        # Shared equally among the elements equal to the extreme (TensorFlow's rule).
        hit = _mask(x == f(x, axis=ax, keepdims=True), x.dtype)
        share = hit / np.sum(hit, axis=ax, keepdims=True)
        return (multiply(_reduced_back(g, x.shape, ax, keepdims), share),)

    return _out(value, (input_tensor,), backward)


def reduce_max(
    input_tensor: Any, axis: Any = None, keepdims: bool = False, name: Any = None
) -> Tensor:
    return _reduce_extreme(np.max, input_tensor, axis, keepdims)


def reduce_min(
    input_tensor: Any, axis: Any = None, keepdims: bool = False, name: Any = None
) -> Tensor:
    return _reduce_extreme(np.min, input_tensor, axis, keepdims)


def argmax(input: Any, axis: Any = None, output_type: Any = int64, name: Any = None) -> Tensor:
    """tf.argmax: along axis 0 when no axis is given (TensorFlow's default), as int64."""
    x = _arr(input)
    return tensor(np.argmax(x, axis=0 if axis is None else int(axis)).astype(as_dtype(output_type)))


def argmin(input: Any, axis: Any = None, output_type: Any = int64, name: Any = None) -> Tensor:
    x = _arr(input)
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
        if _is_tf(indices) or not np.issubdtype(idx.dtype, np.floating):
            raise InvalidArgumentError(
                f"one_hot: indices must be uint8, int8, int32 or int64, got dtype {idx.dtype}"
            )
        # A numpy array or list of floats: TensorFlow converts it to integers (truncating).
        idx = np.trunc(idx).astype(np.int64)
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


# --- Activations --------------------------------------------------------------------------------


def softmax(logits: Any, axis: int = -1, name: Any = None) -> Tensor:
    """tf.nn.softmax, in the input's float dtype: exp(x - max) / sum."""
    if (trace := _traced(logits)) is not None:
        return trace.activation("softmax", logits, axis)
    x = _float_arg(logits, "softmax")
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    y = e / np.sum(e, axis=axis, keepdims=True)

    def backward(g: Any, need: Any) -> Any:
        return (multiply(out, subtract(g, reduce_sum(g * out, axis=axis, keepdims=True))),)

    out = _out(y, (logits,), backward)
    return out


def _log_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    shifted = x - np.max(x, axis=axis, keepdims=True)
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def log_softmax(logits: Any, axis: int = -1, name: Any = None) -> Tensor:
    x = _float_arg(logits, "log_softmax")

    def backward(g: Any, need: Any) -> Any:
        return (subtract(g, multiply(exp(out), reduce_sum(g, axis=axis, keepdims=True))),)

    out = _out(_log_softmax(x, axis), (logits,), backward)
    return out


def sigmoid(x: Any, name: Any = None) -> Tensor:
    if (trace := _traced(x)) is not None:
        return trace.activation("sigmoid", x)
    v = _float_arg(x, "sigmoid")

    def backward(g: Any, need: Any) -> Any:
        return (multiply(g, multiply(out, subtract(1, out))),)

    out = _out(1 / (1 + np.exp(-v)), (x,), backward)
    return out


def relu(features: Any, name: Any = None) -> Tensor:
    if (trace := _traced(features)) is not None:
        return trace.activation("relu", features)
    v = _arr(features)
    return _out(
        np.maximum(v, np.zeros((), v.dtype)),
        (features,),
        lambda g, need: (multiply(g, _mask(v > 0, v.dtype)),),
    )


def leaky_relu(features: Any, alpha: float = 0.2, name: Any = None) -> Tensor:
    if (trace := _traced(features)) is not None:
        return trace.leaky_relu(features, alpha)
    v = _float_arg(features, "leaky_relu")
    slope = np.where(v > 0, 1, alpha).astype(v.dtype)
    return _out(v * slope, (features,), lambda g, need: (multiply(g, slope),))


def elu(features: Any, name: Any = None) -> Tensor:
    v = _float_arg(features, "elu")
    positive = _mask(v > 0, v.dtype)

    def backward(g: Any, need: Any) -> Any:  # 1 above 0, exp(x) = elu(x) + 1 below
        return (multiply(g, add(positive, multiply(add(out, 1), 1 - positive))),)

    out = _out(np.where(v > 0, v, np.expm1(np.minimum(v, 0))), (features,), backward)
    return out


def softplus(features: Any, name: Any = None) -> Tensor:
    v = _float_arg(features, "softplus")
    value = np.maximum(v, 0) + np.log1p(np.exp(-np.abs(v)))
    return _out(value, (features,), lambda g, need: (multiply(g, sigmoid(features)),))


def tanh(x: Any, name: Any = None) -> Tensor:
    if (trace := _traced(x)) is not None:
        return trace.activation("tanh", x)
    v = _float_arg(x, "tanh")

    def backward(g: Any, need: Any) -> Any:
        return (multiply(g, subtract(1, square(out))),)

    out = _out(np.tanh(v), (x,), backward)
    return out


# --- Losses (tf.nn) -----------------------------------------------------------------------------


def softmax_cross_entropy_with_logits(
    labels: Any, logits: Any, axis: int = -1, name: Any = None
) -> Tensor:
    """-sum(labels * log_softmax(logits)) over `axis`; the gradient of both operands."""
    x = _float_arg(logits, "softmax_cross_entropy_with_logits")
    z = _cast_to(labels, x.dtype, "softmax_cross_entropy_with_logits")
    if _is_tf(labels) and _arr(labels).dtype != x.dtype:
        raise InvalidArgumentError(
            f"softmax_cross_entropy_with_logits: labels of dtype {_arr(labels).dtype.name} and "
            f"logits of dtype {x.dtype.name} (cast one: tf.cast)"
        )
    if z.shape != x.shape:
        raise InvalidArgumentError(
            f"softmax_cross_entropy_with_logits: logits and labels must be broadcastable: "
            f"logits_size={list(x.shape)} labels_size={list(z.shape)}"
        )
    ls = _log_softmax(x, axis)

    def backward(g: Any, need: Any) -> Any:
        ge = expand_dims(g, axis)
        gz = multiply(ge, negative(log_softmax(logits, axis))) if need[0] else None
        gx = None
        if need[1]:
            total = np.sum(z, axis=axis, keepdims=True)
            gx = multiply(ge, subtract(multiply(softmax(logits, axis), total), labels_t))
        return gz, gx

    labels_t = labels if _is_tf(labels) else tensor(z)
    return _out(-np.sum(z * ls, axis=axis), (labels, logits), backward)


def sparse_softmax_cross_entropy_with_logits(labels: Any, logits: Any, name: Any = None) -> Tensor:
    """-log_softmax(logits)[label] per row; labels int32 or int64 in [0, classes), as
    TensorFlow's (which refuses other label dtypes and an index out of range)."""
    op = "sparse_softmax_cross_entropy_with_logits"
    x = _float_arg(logits, op)
    idx = _arr(labels) if _is_tf(labels) else np.asarray(_plain(labels))
    if idx.dtype not in (int32, int64):
        raise InvalidArgumentError(
            f"{op}: labels must be int32 or int64 (TensorFlow's), got {idx.dtype.name}: cast "
            f"them (tf.cast(labels, tf.int32))"
        )
    if idx.shape != x.shape[:-1]:
        raise InvalidArgumentError(
            f"{op}: labels of shape {list(idx.shape)} do not match logits of shape "
            f"{list(x.shape)} (labels must have the logits' shape without its last axis)"
        )
    classes = x.shape[-1]
    if idx.size and (idx.min() < 0 or idx.max() >= classes):
        bad = idx[(idx < 0) | (idx >= classes)].reshape(-1)[0]
        raise InvalidArgumentError(
            f"{op}: received a label value of {bad} which is outside the valid range of "
            f"[0, {classes})"
        )
    onehot = np.zeros(x.shape, x.dtype)
    np.put_along_axis(onehot, idx[..., None], 1, axis=-1)
    ls = _log_softmax(x, -1)

    def backward(g: Any, need: Any) -> Any:
        return None, multiply(expand_dims(g, -1), subtract(softmax(logits), onehot))

    return _out(
        -np.take_along_axis(ls, idx[..., None], axis=-1)[..., 0], (labels, logits), backward
    )


def sigmoid_cross_entropy_with_logits(
    labels: Any = None, logits: Any = None, name: Any = None
) -> Tensor:
    """max(x, 0) - x * z + log(1 + exp(-|x|)) element by element (TensorFlow's stable form)."""
    op = "sigmoid_cross_entropy_with_logits"
    x = _float_arg(logits, op)
    z = _arr(labels) if _is_tf(labels) else _cast_to(labels, x.dtype, op)
    if z.dtype != x.dtype:
        raise InvalidArgumentError(f"{op}: labels of dtype {z.dtype.name}, logits {x.dtype.name}")
    if z.shape != x.shape:
        raise ValueError(
            f"{op}: logits and labels must have the same shape ({x.shape} vs {z.shape})"
        )

    def backward(g: Any, need: Any) -> Any:
        gz = multiply(g, negative(logits)) if need[0] else None
        gx = multiply(g, subtract(sigmoid(logits), labels_t)) if need[1] else None
        return gz, gx

    labels_t = labels if _is_tf(labels) else tensor(z)
    value = np.maximum(x, 0) - x * z + np.log1p(np.exp(-np.abs(x)))
    return _out(value, (labels, logits), backward)


def l2_loss(t: Any, name: Any = None) -> Tensor:
    """sum(t ** 2) / 2."""
    x = _float_arg(t, "l2_loss")
    return _out(np.sum(x * x, dtype=x.dtype) / 2, (t,), lambda g, need: (multiply(g, t),))


# --- Element-wise arithmetic --------------------------------------------------------------------


def _unary_float(name: str, f: Any, grad: Any) -> Any:
    """An element-wise op of a float tensor; grad(x, out, g) is its backward, with these ops."""

    def op(x: Any, name: Any = None) -> Tensor:
        if (trace := _traced(x)) is not None:
            return trace.unary(op.__name__, x, f"tf.{op.__name__}")
        v = _float_arg(x, op.__name__)

        def backward(g: Any, need: Any) -> Any:
            return (grad(x, out, g),)

        out = _out(f(v), (x,), backward)
        return out

    op.__name__ = name
    return op


exp = _unary_float("exp", np.exp, lambda x, out, g: multiply(g, out))
sin = _unary_float("sin", np.sin, lambda x, out, g: multiply(g, cos(x)))
cos = _unary_float("cos", np.cos, lambda x, out, g: negative(multiply(g, sin(x))))


def _stepwise(name: str, f: Any) -> Any:
    """An element-wise op of a float tensor whose gradient TensorFlow leaves undefined (None):
    floor and round (half to even, as TensorFlow's)."""

    def op(x: Any, name: Any = None) -> Tensor:
        return _out(f(_float_arg(x, op.__name__)), (x,), lambda g, need: (None,))

    op.__name__ = name
    return op


floor = _stepwise("floor", np.floor)
round = _stepwise("round", np.round)


def tile(input: Any, multiples: Any, name: Any = None) -> Tensor:
    """The tensor repeated multiples[i] times along axis i; its gradient the sum of the copies."""
    x = _arr(input)
    reps = tuple(int(m) for m in np.asarray(_plain(multiples)).reshape(-1))
    if len(reps) != x.ndim or any(m < 0 for m in reps):
        raise InvalidArgumentError(
            f"tile: multiples {list(reps)} must have one value >= 0 per axis of the input, "
            f"which has shape {list(x.shape)}"
        )

    def backward(g: Any, need: Any) -> Any:
        # g of shape (m0 * s0, m1 * s1, ...) as (m0, s0, m1, s1, ...), summed over the copies.
        interleaved = [d for pair in zip(reps, x.shape) for d in pair]
        return (reduce_sum(reshape(g, interleaved), axis=tuple(range(0, 2 * x.ndim, 2))),)

    return _out(np.tile(x, reps), (input,), backward)


def where(condition: Any, x: Any = None, y: Any = None, name: Any = None) -> Tensor:
    """tf.where: x where condition holds, else y (broadcast together); with neither, the
    coordinates of the true elements (int64, one row each). The gradient goes to the chosen
    operand."""
    c = _arr(condition) if _is_tf(condition) else np.asarray(_plain(condition))
    if c.dtype != np.bool_:
        raise InvalidArgumentError(f"where: condition must be bool, got dtype {c.dtype.name}")
    if x is None and y is None:
        return tensor(np.argwhere(c).astype(int64))
    if x is None or y is None:
        raise ValueError("x and y must both be non-None or both be None.")
    a, b = _pair(x, y, "SelectV2")

    def backward(g: Any, need: Any) -> Any:
        to_x = _mask(np.broadcast_to(c, np.shape(g)), a.dtype)
        return (
            None,
            _sum_to(multiply(g, to_x), a.shape) if need[1] else None,
            _sum_to(multiply(g, 1 - to_x), b.shape) if need[2] else None,
        )

    return _out(np.where(c, a, b), (condition, x, y), backward)


def _reduce_bool(f: Any, name: str) -> Any:
    def op(input_tensor: Any, axis: Any = None, keepdims: bool = False, name: Any = None) -> Tensor:
        x = _arr(input_tensor)
        if x.dtype != np.bool_:
            raise InvalidArgumentError(f"{op.__name__}: expects a bool tensor, got {x.dtype.name}")
        return tensor(f(x, axis=_axis(axis), keepdims=keepdims))

    op.__name__ = name
    return op


reduce_any = _reduce_bool(np.any, "reduce_any")
reduce_all = _reduce_bool(np.all, "reduce_all")


def size(input: Any, out_type: Any = int32, name: Any = None) -> Tensor:
    """The number of elements, as a scalar of out_type (int32 by default, as TensorFlow's)."""
    return tensor(np.asarray(_arr(input).size, dtype=as_dtype(out_type)))


def rank(input: Any, name: Any = None) -> Tensor:
    """The number of axes, as an int32 scalar."""
    return tensor(np.asarray(_arr(input).ndim, dtype=int32))
log = _unary_float("log", np.log, lambda x, out, g: divide(g, x))
sqrt = _unary_float("sqrt", np.sqrt, lambda x, out, g: divide(g, multiply(out, 2)))
log1p = _unary_float("log1p", np.log1p, lambda x, out, g: divide(g, add(x, 1)))
rsqrt = _unary_float(
    "rsqrt", lambda v: 1 / np.sqrt(v), lambda x, out, g: multiply(g, multiply(pow(out, 3), -0.5))
)


def square(x: Any, name: Any = None) -> Tensor:
    if (trace := _traced(x)) is not None:
        return trace.unary("square", x, "tf.square")
    v = _arr(x)
    return _out(np.square(v), (x,), lambda g, need: (multiply(g, multiply(x, 2)),))


def abs(x: Any, name: Any = None) -> Tensor:
    v = _arr(x)
    return _out(np.abs(v), (x,), lambda g, need: (multiply(g, np.sign(v)),))


def negative(x: Any, name: Any = None) -> Tensor:
    return _out(np.negative(_arr(x)), (x,), lambda g, need: (negative(g),))


def sign(x: Any, name: Any = None) -> Tensor:
    return tensor(np.sign(_arr(x)))


def add(x: Any, y: Any, name: Any = None) -> Tensor:
    if (trace := _traced(x, y)) is not None:
        return trace.binary("add", x, y)
    a, b = _pair(x, y, "AddV2")

    def backward(g: Any, need: Any) -> Any:
        return (_sum_to(g, a.shape) if need[0] else None, _sum_to(g, b.shape) if need[1] else None)

    return _out(a + b, (x, y), backward)


def subtract(x: Any, y: Any, name: Any = None) -> Tensor:
    if (trace := _traced(x, y)) is not None:
        return trace.binary("subtract", x, y)
    a, b = _pair(x, y, "Sub")

    def backward(g: Any, need: Any) -> Any:
        return (
            _sum_to(g, a.shape) if need[0] else None,
            _sum_to(negative(g), b.shape) if need[1] else None,
        )

    return _out(a - b, (x, y), backward)


def multiply(x: Any, y: Any, name: Any = None) -> Tensor:
    if (trace := _traced(x, y)) is not None:
        return trace.binary("multiply", x, y)
    a, b = _pair(x, y, "Mul")

    def backward(g: Any, need: Any) -> Any:
        return (
            _sum_to(multiply(g, y if _is_tf(y) else b), a.shape) if need[0] else None,
            _sum_to(multiply(g, x if _is_tf(x) else a), b.shape) if need[1] else None,
        )

    return _out(a * b, (x, y), backward)


def divide(x: Any, y: Any, name: Any = None) -> Tensor:
    """tf.divide (truediv): integers are divided as float64 (int32) or float32 (int16, int8)."""
    if (trace := _traced(x, y)) is not None:
        return trace.binary("divide", x, y)
    a, b = _pair(x, y, "RealDiv")
    if a.dtype.kind in "iub":
        to = float32 if a.dtype.itemsize <= 2 else float64
        return tensor(np.true_divide(a, b, dtype=to))
    xs, ys = (x if _is_tf(x) else a), (y if _is_tf(y) else b)

    def backward(g: Any, need: Any) -> Any:
        gx = _sum_to(divide(g, ys), a.shape) if need[0] else None
        gy = None
        if need[1]:
            gy = _sum_to(negative(divide(multiply(g, xs), multiply(ys, ys))), b.shape)
        return gx, gy

    return _out(a / b, (x, y), backward)


def pow(x: Any, y: Any, name: Any = None) -> Tensor:
    """tf.pow: x ** y element by element (the gradient by y where x > 0, else 0)."""
    a, b = _pair(x, y, "Pow")
    xs, ys = (x if _is_tf(x) else a), (y if _is_tf(y) else b)

    def backward(g: Any, need: Any) -> Any:
        gx = gy = None
        if need[0]:
            gx = _sum_to(multiply(g, multiply(ys, pow(xs, subtract(ys, 1)))), a.shape)
        if need[1]:
            safe_log = log(add(multiply(xs, _mask(a > 0, a.dtype)), _mask(a <= 0, a.dtype)))
            gy = _sum_to(multiply(g, multiply(out, safe_log)), b.shape)
        return gx, gy

    out = _out(np.power(a, b), (x, y), backward)
    return out


def _extreme(name: str, f: Any, x_wins: Any) -> Any:
    def op(x: Any, y: Any, name: Any = None) -> Tensor:
        if (trace := _traced(x, y)) is not None:
            return trace.binary(op.__name__, x, y)
        a, b = _pair(x, y, op.__name__.capitalize())

        def backward(g: Any, need: Any) -> Any:
            to_x = _mask(np.broadcast_to(x_wins(a, b), np.shape(g)), a.dtype)
            return (
                _sum_to(multiply(g, to_x), a.shape) if need[0] else None,
                _sum_to(multiply(g, 1 - to_x), b.shape) if need[1] else None,
            )

        return _out(f(a, b), (x, y), backward)

    op.__name__ = name
    return op


maximum = _extreme("maximum", np.maximum, np.greater_equal)
minimum = _extreme("minimum", np.minimum, np.less_equal)


def _compare(f: Any) -> Any:
    def op(x: Any, y: Any, name: Any = None) -> Tensor:
        a, b = _pair(x, y, f.__name__.capitalize())
        return tensor(f(a, b))

    op.__name__ = f.__name__
    return op


equal, not_equal, greater, less, greater_equal, less_equal = (
    _compare(f)
    for f in (np.equal, np.not_equal, np.greater, np.less, np.greater_equal, np.less_equal)
)


def clip_by_value(t: Any, clip_value_min: Any, clip_value_max: Any, name: Any = None) -> Tensor:
    """tf.clip_by_value: the gradient passes where min <= t <= max."""
    x = _arr(t)
    lo = _cast_to(clip_value_min, x.dtype, "clip_by_value")
    hi = _cast_to(clip_value_max, x.dtype, "clip_by_value")
    inside = _mask((x >= lo) & (x <= hi), x.dtype)
    return _out(np.clip(x, lo, hi), (t,), lambda g, need: (multiply(g, inside),))


# --- Matrix product and shapes ------------------------------------------------------------------


def matmul(
    a: Any, b: Any, transpose_a: bool = False, transpose_b: bool = False, name: Any = None
) -> Tensor:
    if (trace := _traced(a, b)) is not None:
        if transpose_a or transpose_b:
            raise trace.not_supported("matmul with transpose_a or transpose_b")
        return trace.matmul(a, b)
    x, y = _pair(a, b, "MatMul")
    if x.ndim < 2 or y.ndim < 2:
        raise InvalidArgumentError(
            f"matmul: In[0] and In[1] must be at least 2-D (ranks {x.ndim} and {y.ndim})"
        )
    value = np.matmul(
        np.swapaxes(x, -1, -2) if transpose_a else x, np.swapaxes(y, -1, -2) if transpose_b else y
    )

    def backward(g: Any, need: Any) -> Any:
        ga = gb = None
        if need[0]:  # TensorFlow's MatMul gradient, per transposition
            if not transpose_a:
                ga = matmul(g, b, transpose_b=not transpose_b)
            elif not transpose_b:
                ga = matmul(b, g, transpose_b=True)
            else:
                ga = matmul(b, g, transpose_a=True, transpose_b=True)
            ga = _sum_to(ga, x.shape)
        if need[1]:
            if not transpose_b:
                gb = matmul(a, g, transpose_a=not transpose_a)
            elif not transpose_a:
                gb = matmul(g, a, transpose_a=True)
            else:
                gb = matmul(g, a, transpose_a=True, transpose_b=True)
            gb = _sum_to(gb, y.shape)
        return ga, gb

    return _out(value, (a, b), backward)


def broadcast_to(input: Any, shape: Any, name: Any = None) -> Tensor:
    x = _arr(input)
    dims = _dims(shape)
    return _out(np.broadcast_to(x, dims), (input,), lambda g, need: (_sum_to(g, x.shape),))


def reshape(tensor_: Any, shape: Sequence[int], name: Any = None) -> Tensor:
    if (trace := _traced(tensor_)) is not None:
        return trace.reshape(tensor_, shape)
    x = _arr(tensor_)
    return _out(np.reshape(x, _dims(shape)), (tensor_,), lambda g, need: (reshape(g, x.shape),))


def expand_dims(input: Any, axis: int, name: Any = None) -> Tensor:
    x = _arr(input)
    return _out(np.expand_dims(x, int(axis)), (input,), lambda g, need: (reshape(g, x.shape),))


def squeeze(input: Any, axis: Any = None, name: Any = None) -> Tensor:
    x = _arr(input)
    return _out(np.squeeze(x, axis=_axis(axis)), (input,), lambda g, need: (reshape(g, x.shape),))


def transpose(a: Any, perm: Any = None, name: Any = None) -> Tensor:
    x = _arr(a)
    order = tuple(range(x.ndim))[::-1] if perm is None else tuple(int(p) for p in _plain(perm))
    back = tuple(int(i) for i in np.argsort(order))
    return _out(np.transpose(x, order), (a,), lambda g, need: (transpose(g, back),))


def concat(values: Sequence[Any], axis: int, name: Any = None) -> Tensor:
    if (trace := _traced(values)) is not None:
        return trace.concat(values, axis)
    values = tuple(values)
    arrays = [_arr(v) for v in values]
    dtypes = {a.dtype for a in arrays}
    if len(dtypes) > 1 and all(_is_tf(v) for v in values):
        raise InvalidArgumentError(
            f"concat: tensors of different dtypes {sorted(map(str, dtypes))}"
        )
    ax = int(axis)
    ends = np.cumsum([a.shape[ax] for a in arrays])

    def backward(g: Any, need: Any) -> Any:
        out = []
        for i, end in enumerate(ends):
            if not need[i]:
                out.append(None)
                continue
            key = [slice(None)] * np.ndim(g)
            key[ax] = slice(int(end - arrays[i].shape[ax]), int(end))
            out.append(_getitem(g, tuple(key)))
        return tuple(out)

    return _out(np.concatenate(arrays, axis=ax), values, backward)


def stack(values: Sequence[Any], axis: int = 0, name: Any = None) -> Tensor:
    values = tuple(values)
    ax = int(axis)

    def backward(g: Any, need: Any) -> Any:
        out = []
        for i in range(len(values)):
            key = [slice(None)] * np.ndim(g)
            key[ax] = i
            out.append(_getitem(g, tuple(key)) if need[i] else None)
        return tuple(out)

    return _out(np.stack([_arr(v) for v in values], axis=ax), values, backward)


def _index_key(key: Any) -> Any:
    """An index with tensors in it (x[idx]) as numpy takes it."""
    if isinstance(key, tuple):
        return tuple(_plain(k) for k in key)
    return _plain(key)


def _getitem(x: Any, key: Any) -> Any:
    """x[key]: numpy's indexing (slices, integers, None, Ellipsis, index arrays); the gradient
    is scattered back into zeros of x's shape."""
    v = _arr(x)
    k = _index_key(key)
    return _out(np.array(v[k]), (x,), lambda g, need: (_scatter(g, k, v.shape),))


def _scatter(g: Any, key: Any, shape: tuple[int, ...]) -> Tensor:
    """getitem's backward: zeros of `shape` with g added at `key` (repeated indices add up)."""
    a = _arr(g)
    out = np.zeros(shape, a.dtype)
    np.add.at(out, key, a)
    return _out(out, (g,), lambda gg, need: (_getitem(gg, key),))


def gather(params: Any, indices: Any, axis: int = 0, name: Any = None) -> Tensor:
    """tf.gather: params' slices along `axis` at `indices`."""
    key = (slice(None),) * (int(axis) % max(_arr(params).ndim, 1)) + (np.asarray(_plain(indices)),)
    return _getitem(params, key)


def zeros(shape: Any, dtype: Any = float32, name: Any = None) -> Tensor:
    return tensor(np.zeros(_dims(shape), as_dtype(dtype)))


def ones(shape: Any, dtype: Any = float32, name: Any = None) -> Tensor:
    return tensor(np.ones(_dims(shape), as_dtype(dtype)))


def shape(input: Any, out_type: Any = int32, name: Any = None) -> Tensor:
    if _is_var(input):
        return tensor(np.asarray(_arr(input).shape, dtype=as_dtype(out_type)))
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


Number = Union[int, float]
