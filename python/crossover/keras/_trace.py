"""Custom layers (a subclass of keras.layers.Layer with its own call()), traced as Keras 3 traces
them: the layer's build() runs once with its input shape (add_weight records each weight: shape,
initializer, name, trainable), then its call() runs on a symbolic KerasTensor, and every op it
applies to symbolic tensors (keras.ops, tf ops, x - y, -x, ...) becomes a node of the model's
graph, one engine layer each (nn/layers/elementwise.cpp, reduce.cpp; x . w a Dense without bias
whose kernel is the weight). The engine computes forward and backward; nothing runs in Python
during fit.

The ops a call() may apply: +, -, *, / (and add, subtract, multiply, divide, maximum, minimum)
between two tensors of one shape, or one whose last axis is 1 (keepdims), between a tensor and a
weight of the last axis's size (a bias) or a scalar weight, or a Python number; unary minus;
matmul of a (batch, K) tensor by a (K, M) weight; relu, sigmoid, tanh, softmax and the other
activations, exp, square; mean and sum over the last axis with keepdims=True; concatenate on the
last axis; keras.random.dropout. add_loss() of a number times the mean or the sum of every value
of a tensor (ops.mean(x), tf.reduce_sum(x): a LossTerm), or of a sum of such terms, adds them to
the loss of fit and evaluate (an AddLoss node each, nn/layers/activity_regularization.cpp); a
layer's activity_regularizer (L1, L2, L1L2) is an ActivityRegularization node on its output.
Anything else (Python control flow on a tensor's values, another op) raises NotImplementedError
naming the op and the layer, never a model that computes something else."""

import inspect
import json
import sys
from typing import Any, Optional

import numpy as np

from .. import _core, _tensor
from .._args import SEE_SUPPORTED
from . import _names, initializers, regularizers
from ._symbolic import KerasTensor, _ordered


class _Trace:
    """One run of a custom layer's call(): the op layers it makes, in order. A later trace of
    the same layer (its model rebuilt) takes the earlier one's op layers back in the same order,
    so that they keep their weights."""

    def __init__(self, layer: Any) -> None:
        self.layer = layer
        self.made: list[Any] = []
        self.earlier: list[Any] = list(getattr(layer, "_op_layers", []))


_traces: list[_Trace] = []
# The add_loss terms (AddLoss nodes) of each call being traced (a custom layer's, a subclassed
# model's): the call's outputs carry them (_finish_call), so that the model's graph holds them.
_sinks: list[list[KerasTensor]] = []


class LossTerm:
    """What add_loss() takes in a traced call: a sum of terms `scale * mean(x)` or
    `scale * sum(x)`, x a symbolic tensor and the mean or sum over every value of the batch (Keras
    adds such a scalar to the loss). Numbers scale it; terms add; nothing else is an op on it."""

    def __init__(self, terms: list[tuple[KerasTensor, bool, float]]) -> None:
        self.terms = terms  # (tensor, mean, scale)
        self.shape: tuple[int, ...] = ()

    def _scaled(self, factor: Any, op: str) -> "LossTerm":
        c = _number(factor)
        if c is None:
            raise not_supported(f"{op} of a loss term (a mean or sum) and {type(factor).__name__}")
        return LossTerm([(t, mean, scale * c) for t, mean, scale in self.terms])

    def __mul__(self, other: Any) -> "LossTerm":
        return self._scaled(other, "multiply")

    __rmul__ = __mul__

    def __truediv__(self, other: Any) -> "LossTerm":
        c = _number(other)
        if c is None or c == 0:
            raise not_supported(f"divide of a loss term (a mean or sum) by {other!r}")
        return self._scaled(1.0 / c, "divide")

    def __neg__(self) -> "LossTerm":
        return self._scaled(-1.0, "negative")

    def __pos__(self) -> "LossTerm":
        return self

    def __add__(self, other: Any) -> "LossTerm":
        if isinstance(other, LossTerm):
            return LossTerm(self.terms + other.terms)
        if _number(other) == 0.0:
            return self  # sum(model.losses) starts from 0
        raise not_supported(f"add of a loss term (a mean or sum) and {type(other).__name__}")

    __radd__ = __add__

    def __sub__(self, other: Any) -> "LossTerm":
        return self + (-other if isinstance(other, LossTerm) else _refuse_term(other, "subtract"))

    def __rsub__(self, other: Any) -> "LossTerm":
        return -self + other

    def __bool__(self) -> bool:
        raise not_supported("Python control flow on a loss term's value")

    def __float__(self) -> float:
        raise not_supported("the value of a loss term (a mean or sum of a symbolic tensor)")

    def __repr__(self) -> str:
        parts = [f"{s:g} * {'mean' if m else 'sum'}({t.name})" for t, m, s in self.terms]
        return f"<LossTerm {' + '.join(parts)}>"


def _refuse_term(other: Any, op: str) -> Any:
    raise not_supported(f"{op} of a loss term (a mean or sum) and {type(other).__name__}")


def is_loss_term(value: Any) -> bool:
    return isinstance(value, LossTerm)


def add_loss_term(layer: Any, value: Any) -> None:
    """add_loss(value) in a traced call: an AddLoss node per term, carried by the call's outputs.
    A symbolic tensor that is not a full mean or sum (a per-sample loss) is refused."""
    if not isinstance(value, LossTerm):
        raise not_supported(
            f"add_loss() of a symbolic tensor of shape {getattr(value, 'shape', None)} (crossover "
            "adds a number times the mean or the sum of a tensor's values: ops.mean(x), "
            "tf.reduce_sum(x))"
        )
    if not _sinks:
        raise not_in_a_model(layer)
    for tensor, mean, scale in value.terms:
        sig = ("add_loss", mean, scale)
        made = lambda m=mean, s=scale: _core.AddLoss(s, m)  # noqa: E731
        _sinks[-1].append(_node(made, sig, "add_loss", [tensor], tuple(tensor.shape[1:])))


def refuse_terms_under_training(owner: Any, params: Any) -> None:
    """add_loss in a call() that takes `training`: traced once, in training mode, a term under
    `if training:` would join evaluate's loss too, where Keras leaves it out. Refused."""
    if _sinks and _sinks[-1] and "training" in params:
        raise NotImplementedError(
            f"add_loss() in the call() of '{owner.name}' ({type(owner).__name__}), which takes "
            "`training`, is not supported (yet): crossover traces call() once, in training "
            "mode, so a term Keras adds only in training would count in evaluate too; "
            f"{SEE_SUPPORTED}"
        )


def finish_outputs(sinks: list[KerasTensor], out: Any) -> Any:
    """A traced model call's outputs (a tensor, or a list, tuple or dict of them) with its
    add_loss terms (_finish_call)."""
    if not sinks:
        return out
    if isinstance(out, KerasTensor):
        return _finish_call(sinks, [out]).get(id(out), out)
    items = list(out.values()) if isinstance(out, dict) else list(out)
    tensors = [t for t in items if isinstance(t, KerasTensor)]
    if not tensors:
        raise not_supported("add_loss() in a call() that returns no symbolic tensor")
    replaced = _finish_call(sinks, tensors)
    new = [replaced.get(id(t), t) if isinstance(t, KerasTensor) else t for t in items]
    if isinstance(out, dict):
        return dict(zip(out.keys(), new))
    return type(out)(new) if isinstance(out, tuple) else new


def _finish_call(sinks: list[KerasTensor], outputs: list[KerasTensor]) -> dict[int, KerasTensor]:
    """A traced call's add_loss terms: one on an output itself becomes that output (an AddLoss
    is the identity on its input); the others ride on an output (_symbolic._ordered visits them
    before it): on the first, or, for a term computed from an output (add_loss(ops.sum(
    ops.square(y))); return y), on an identity op of that output, so that the term comes after
    the output it reads and before the call's output (the engine's last layer is a model's
    output). Returns the outputs replaced, by id."""
    replaced: dict[int, KerasTensor] = {}
    riders = []
    for sink in sinks:
        source = sink._inputs[0]
        at = replaced.get(id(source), source)
        if any(at is o or replaced.get(id(o)) is at for o in outputs):
            sink._inputs = [at]
            replaced[id(source)] = sink
            for o in outputs:
                if replaced.get(id(o)) is at:
                    replaced[id(o)] = sink
        else:
            riders.append(sink)
    for sink in riders:
        current = [replaced.get(id(o), o) for o in outputs]
        read = next((i for i, c in enumerate(current) if _reads(sink, c)), None)
        if read is None:
            carrier = current[0]
        else:
            carrier = identity(current[read])
            replaced[id(outputs[read])] = carrier
        carrier._riders = list(getattr(carrier, "_riders", [])) + [sink]
    return replaced


def _reads(tensor: KerasTensor, source: KerasTensor) -> bool:
    """Whether `tensor` is computed from `source`."""
    seen: set[int] = set()
    stack = list(tensor._inputs)
    while stack:
        t = stack.pop()
        if t is source:
            return True
        if id(t) not in seen:
            seen.add(id(t))
            stack.extend(t._inputs)
    return False


def _engine(class_name: str, **config: Any) -> Any:
    """An engine layer of a Keras class (keras.layers' _engine_layer: through the registry)."""
    from .layers import _engine_layer

    return _engine_layer(class_name, **config)


def _where() -> str:
    """"in layer 'name' (Class)" of the custom layer being traced, for messages."""
    if not _traces:
        return "on a symbolic tensor"
    layer = _traces[-1].layer
    return f"in the call() of layer '{layer.name}' ({type(layer).__name__})"


def not_supported(what: str) -> NotImplementedError:
    return NotImplementedError(
        f"{what} {_where()} is not supported (yet): crossover traces a custom layer's call() "
        "into engine ops (element-wise arithmetic with broadcasting of the last axis, matmul "
        "by a weight, activations, exp, square, sqrt, mean and sum over the last axis, "
        "concatenate, dropout, add_loss of a mean or sum); "
        f"{SEE_SUPPORTED}"
    )


def not_in_a_model(layer: Any) -> NotImplementedError:
    """add_loss of a symbolic value outside a traced call (a functional model's add_loss)."""
    return NotImplementedError(
        f"add_loss() on '{layer.name}' ({type(layer).__name__}) of a symbolic value outside a "
        "layer's or a model's call() is not supported (yet): call add_loss in call(); "
        f"{SEE_SUPPORTED}"
    )


# --- a custom layer called on a symbolic tensor ----------------------------------------------
def custom_call(layer: Any, inputs: Any, kwargs: dict[str, Any]) -> Any:
    """layer(inputs) for a custom layer on a KerasTensor, or on a list or tuple of them (a VAE's
    Sampling((z_mean, z_log_var)), a Lambda over two towers): build() once (with the list of
    shapes for a list, as Keras builds it), then call() traced."""
    tensors = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    if not tensors or not all(isinstance(t, KerasTensor) for t in tensors):
        raise NotImplementedError(
            f"custom layer '{layer.name}' ({type(layer).__name__}) called on "
            f"{type(inputs).__name__}: crossover traces custom layers called on a symbolic "
            f"tensor or a list of them; {SEE_SUPPORTED}"
        )
    if _traces and _traces[-1].layer is layer:
        raise NotImplementedError(f"layer '{layer.name}' calling itself is not supported (yet)")
    if not getattr(layer, "_custom_built", False):
        shapes = [tuple(t.shape) for t in tensors]
        layer.build(shapes[0] if isinstance(inputs, KerasTensor) else type(inputs)(shapes))
        layer._custom_built = True
    trace = _Trace(layer)
    _traces.append(trace)
    _sinks.append([])
    try:
        try:
            params = inspect.signature(layer.call).parameters
        except (TypeError, ValueError):
            params = {}
        given = {k: v for k, v in kwargs.items() if k in params and v is not None}
        if "training" in params and "training" not in given:
            given["training"] = True  # the graph holds every op; the engine picks the mode
        unknown = sorted(k for k in kwargs if k not in params and kwargs[k] is not None)
        if unknown:
            raise TypeError(f"{type(layer).__name__}.call got unexpected arguments {unknown}")
        out = layer.call(inputs, **given)
        refuse_terms_under_training(layer, params)
        if isinstance(out, KerasTensor):
            out = _finish_call(_sinks[-1], [out]).get(id(out), out)
            out = _activity(layer, out)
    finally:
        _sinks.pop()
        _traces.pop()
    if not isinstance(out, KerasTensor):
        raise NotImplementedError(
            f"the call() of layer '{layer.name}' ({type(layer).__name__}) returned "
            f"{type(out).__name__}: crossover traces call() into ops on symbolic tensors "
            f"and takes one tensor out; {SEE_SUPPORTED}"
        )
    if any(out is t for t in tensors):
        raise NotImplementedError(
            f"the call() of layer '{layer.name}' ({type(layer).__name__}) returned its input "
            f"unchanged: an identity layer is not supported (yet); {SEE_SUPPORTED}"
        )
    unused = [w.name for w in layer.__dict__.get("_custom_weights", []) if w._op is None]
    if unused:
        raise NotImplementedError(
            f"layer '{layer.name}' ({type(layer).__name__}) made weights its call() does not "
            f"use ({', '.join(unused)}): not supported (yet); {SEE_SUPPORTED}"
        )
    layer._op_layers = trace.made
    if isinstance(inputs, KerasTensor):
        layer._traced_shapes = (tuple(inputs.shape[1:]), tuple(out.shape[1:]))
    # The call as one node (summary's row, Layer.output); the graph holds its ops.
    layer._output_tensor = KerasTensor(out.shape, layer, [_shown(t) for t in tensors])
    return out


def _activity(layer: Any, out: KerasTensor) -> KerasTensor:
    """A custom layer's activity_regularizer (L1, L2, L1L2): an ActivityRegularization node on
    its output (Keras adds R(output) / batch size to the loss)."""
    r = getattr(layer, "activity_regularizer", None)
    if r is None:
        return out
    if not isinstance(r, regularizers.Regularizer):
        raise not_supported(f"activity_regularizer {r!r} (crossover runs L1, L2 and L1L2)")
    l1, l2 = regularizers._factors(r)
    made = lambda: _engine("ActivityRegularization", l1=l1, l2=l2)  # noqa: E731
    return _node(made, ("activity", l1, l2), "activity_regularization", [out], tuple(out.shape[1:]))


def _shown(tensor: Any) -> Any:
    """The tensor as summary names it: the output of the custom layer whose op made it."""
    owner = getattr(tensor._layer, "_owner", None)
    call = getattr(owner, "_output_tensor", None) if owner is not None else None
    return call if call is not None else tensor


def output_shape(layer: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A layer's per-sample output shape for a per-sample input shape."""
    from .layers import InputLayer, _ModelBase, _built, _is_custom

    if isinstance(layer, _ModelBase):
        for inner in layer._leaves():
            if not isinstance(inner, InputLayer):
                shape = output_shape(inner, shape)
        return shape
    if _is_custom(layer):
        return _custom_output_shape(layer, shape)
    return tuple(_built(layer, [shape])[0])


def _custom_output_shape(layer: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A custom layer's per-sample output shape for a per-sample input shape (traced if need
    be)."""
    traced = getattr(layer, "_traced_shapes", None)
    if traced is not None and traced[0] == tuple(shape):
        return traced[1]
    saved = getattr(layer, "_output_tensor", None)
    out = custom_call(layer, KerasTensor((None, *shape), None, []), {})
    layer._output_tensor = saved if saved is not None else layer._output_tensor
    return tuple(out.shape[1:])


# --- a Sequential model holding custom layers ------------------------------------------------
def expand(model: Any, leaves: list[Any]) -> list[Any]:
    """The engine's layers of a Sequential's leaves: a custom layer's traced ops in its place,
    in the graph's order (graph_of gives the graph). Unchanged without custom layers, or while
    the input shape is unknown."""
    from .layers import InputLayer, _is_custom

    if not any(_is_custom(l) for l in leaves):
        return leaves
    first = leaves[0]
    shape = getattr(first, "_input_shape", None)
    if not shape:
        return leaves
    key = (tuple(id(l) for l in leaves), tuple(shape))
    cached = getattr(model, "_custom_trace", None)
    if cached is not None and cached[0] == key:
        return list(cached[1])
    if isinstance(first, InputLayer):
        entry, rest = first, leaves[1:]
    else:  # Dense(input_shape=...) first: the graph's own input
        old = getattr(model, "_custom_input", None)
        entry = old if old is not None and list(old._input_shape) == list(shape) else None
        entry = entry or InputLayer(shape=tuple(shape))
        model._custom_input = entry
        rest = leaves
    x = KerasTensor((None, *shape), entry, [])
    inputs_tensor = x
    for leaf in rest:
        if isinstance(leaf, InputLayer):
            continue
        if _is_custom(leaf):
            x = custom_call(leaf, x, {})
        else:
            x = KerasTensor((None, *output_shape(leaf, tuple(x.shape[1:]))), leaf, [x])
    tensors = _ordered([x])
    if tensors[0] is not inputs_tensor:
        raise ValueError("the model's output does not depend on its input")
    position = {id(t): i for i, t in enumerate(tensors)}
    layers = [t._layer for t in tensors]
    graph = [[position[id(p)] for p in t._inputs] for t in tensors]
    model._custom_trace = (key, layers, graph)
    return list(layers)


def graph_of(model: Any) -> Optional[list[list[int]]]:
    """The graph expand() traced for the model's current leaves, else None (a chain)."""
    leaves = model._leaves()
    cached = getattr(model, "_custom_trace", None)
    if cached is None or [id(l) for l in cached[1]] != [id(l) for l in leaves]:
        return None
    return cached[2]


# --- the op nodes ------------------------------------------------------------------------------
def _op_layer(core_make: Any, signature: tuple[Any, ...], op: str, weight: Any = None) -> Any:
    """The op's layer: the earlier trace's at this place when it is the same op, else new."""
    from .layers import _OpLayer

    trace = _traces[-1] if _traces else None
    if trace is not None:
        at = len(trace.made)
        if at < len(trace.earlier) and trace.earlier[at]._signature == signature:
            layer = trace.earlier[at]
            trace.made.append(layer)
            if weight is not None:
                weight._attach(layer)
            return layer
    owner = trace.layer if trace is not None else None
    name = _names.uniquify(f"{owner.name}_{op}" if owner is not None else op)
    layer = _OpLayer(core_make(), name, owner, weight, signature)
    if weight is not None:
        weight._attach(layer)  # values it had (drawn or assigned on data) go with it
    if trace is not None:
        trace.made.append(layer)
    return layer


def _node(
    core_make: Any,
    signature: tuple[Any, ...],
    op: str,
    inputs: list[Any],
    shape: tuple[int, ...],
    weight: Any = None,
) -> Any:
    layer = _op_layer(core_make, signature, op, weight)
    out = KerasTensor((None, *shape), layer, inputs)
    layer._output_tensor = out
    return out


def _is_tensor(v: Any) -> bool:
    return isinstance(v, KerasTensor)


def _is_weight(v: Any) -> bool:
    from .layers import Weight

    return isinstance(v, Weight)


def _number(v: Any) -> Optional[float]:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float, np.integer, np.floating)):
        return float(v)
    if isinstance(v, np.ndarray) and v.shape in ((), (1,)):
        return float(v.reshape(()))
    return None


def symbolic(*values: Any) -> bool:
    """Whether an op's operands hold a symbolic tensor (then it becomes a node)."""
    for v in values:
        if _is_tensor(v):
            return True
        if isinstance(v, (list, tuple)) and any(_is_tensor(e) for e in v):
            return True
    return False


def _claim(weight: Any, op: str) -> None:
    """A weight is one op's operand in a trace (its engine layer holds it)."""
    if _traces and weight._op is not None and any(weight._op is m for m in _traces[-1].made):
        raise not_supported(f"{op} with weight '{weight.name}', which an earlier op used too")


def binary(op: str, a: Any, b: Any) -> Any:
    """a <op> b where one of them is a symbolic tensor."""
    ta, tb = _is_tensor(a), _is_tensor(b)
    if ta and tb:
        sa, sb = tuple(a.shape[1:]), tuple(b.shape[1:])
        if sa == sb and op == "add" and not _traces:
            from .layers import Add

            return Add()([a, b])  # x + y in a functional model: an Add layer
        same_rest = len(sa) == len(sb) and len(sa) > 0 and sa[:-1] == sb[:-1]
        if sa == sb:
            out = sa
        elif same_rest and sb[-1] == 1:
            out = sa
        elif same_rest and sa[-1] == 1:
            out = sb
        else:
            raise not_supported(f"{op} of tensors of shapes {a.shape} and {b.shape}")
        return _node(lambda: _core.BinaryOp(op), ("binary", op), op, [a, b], out)
    tensor, other, weight_first = (a, b, False) if ta else (b, a, True)
    shape = tuple(tensor.shape[1:])
    if _is_weight(other):
        w = other
        size = int(np.prod(w.shape)) if w.shape else 1
        if not (size == 1 or (len(w.shape) == 1 and shape and w.shape[0] == shape[-1])):
            raise not_supported(
                f"{op} of a tensor of shape {tensor.shape} and weight '{w.name}' of shape "
                f"{w.shape}"
            )
        _claim(w, op)

        def make() -> Any:
            init = initializers._to_json(w.initializer)
            return _core.WeightOp(
                op, list(w.shape), w.name, init, w.trainable, weight_first, _regularizer_json(w)
            )

        sig = ("weight", op, w.shape, w.name, weight_first)
        return _node(make, sig, op, [tensor], shape, weight=w)
    c = _number(other)
    if c is None:
        raise not_supported(f"{op} of a symbolic tensor and {type(other).__name__}")
    sig = ("constant", op, c, weight_first)
    return _node(lambda: _core.ConstantOp(op, c, weight_first), sig, op, [tensor], shape)


def _regularizer_json(w: Any) -> str:
    """add_weight's regularizer as the engine reads it (JSON text; null for none)."""
    return json.dumps(None if w.regularizer is None else regularizers.serialize(w.regularizer))


def negative(x: Any) -> Any:
    return binary("multiply", x, -1.0)


def matmul(a: Any, b: Any) -> Any:
    """a . w of a (batch, K) tensor and a (K, M) weight."""
    if not (_is_tensor(a) and _is_weight(b)):
        raise not_supported(
            f"matmul of {type(a).__name__} and {type(b).__name__} (crossover has a tensor times "
            "a weight made by add_weight)"
        )
    shape, w = tuple(a.shape[1:]), b
    if len(shape) != 1 or len(w.shape) != 2 or w.shape[0] != shape[0]:
        raise not_supported(
            f"matmul of a tensor of shape {a.shape} and a weight of shape {w.shape}"
        )
    _claim(w, "matmul")

    def make() -> Any:
        init = initializers._to_json(w.initializer)
        return _core.MatMul(int(w.shape[1]), w.name, init, w.trainable, _regularizer_json(w))

    sig = ("matmul", w.shape, w.name)
    return _node(make, sig, "matmul", [a], (int(w.shape[1]),), weight=w)


def activation(name: str, x: Any, axis: int = -1) -> Any:
    if not _is_tensor(x):
        raise not_supported(f"{name} of {type(x).__name__}")
    if name == "softmax" and axis not in (-1, len(x.shape) - 1):
        raise not_supported(f"softmax over axis {axis}")
    shape = tuple(x.shape[1:])
    made = lambda: _engine("Activation", activation=name)  # noqa: E731
    return _node(made, ("activation", name), name, [x], shape)


def leaky_relu(x: Any, alpha: Any) -> Any:
    """tf.nn.leaky_relu: the engine's LeakyReLU of that slope."""
    if not _is_tensor(x):
        raise not_supported(f"leaky_relu of {type(x).__name__}")
    slope = float(alpha)
    made = lambda: _engine("LeakyReLU", negative_slope=slope)  # noqa: E731
    return _node(made, ("leaky_relu", slope), "leaky_relu", [x], tuple(x.shape[1:]))


def _last_axis(x: Any, axis: Any, op: str) -> None:
    if isinstance(axis, (list, tuple)) and len(axis) == 1:
        axis = axis[0]
    if axis not in (-1, len(x.shape) - 1):
        raise not_supported(f"{op} over axis {axis!r} (crossover has the last axis, -1)")


def unary(op: str, x: Any, api: str = "") -> Any:
    """exp (the exponential activation), square (x * x) and sqrt (the engine's Sqrt op) of a
    symbolic tensor."""
    if not _is_tensor(x):
        raise not_supported(f"{op} of {type(x).__name__}")
    if op == "exp":
        return activation("exponential", x)
    if op == "square":
        return binary("multiply", x, x)
    if op == "sqrt":
        return _node(_core.Sqrt, ("sqrt",), "sqrt", [x], tuple(x.shape[1:]))
    raise not_supported(api or f"the op '{op}'")


def reduce(op: str, x: Any, axis: Any, keepdims: bool) -> Any:
    """mean or sum over the last axis, keepdims=True; over every value (axis None: a LossTerm,
    for add_loss)."""
    if axis is None and not keepdims and _is_tensor(x):
        return LossTerm([(x, op == "mean", 1.0)])
    _last_axis(x, axis, op)
    if not keepdims:
        raise not_supported(f"{op} with keepdims=False (crossover keeps the axis: keepdims=True)")
    shape = (*x.shape[1:-1], 1)
    mean = op == "mean"
    return _node(lambda: _core.Reduce(mean), ("reduce", op), op, [x], shape)


def concat(values: Any, axis: Any) -> Any:
    values = list(values)
    if not values or not all(_is_tensor(v) for v in values):
        raise not_supported("concatenate of symbolic tensors with other values")
    _last_axis(values[0], axis, "concatenate")
    first = tuple(values[0].shape[1:])
    for v in values[1:]:
        s = tuple(v.shape[1:])
        if len(s) != len(first) or s[:-1] != first[:-1]:
            raise ValueError(
                "concatenate needs tensors that differ only in the last axis, got shapes "
                f"{[v.shape for v in values]}"
            )
    shape = (*first[:-1], sum(int(v.shape[-1]) for v in values))
    sig = ("concatenate", len(values))
    return _node(lambda: _engine("Concatenate", axis=-1), sig, "concatenate", values, shape)


def identity(x: Any) -> Any:
    """x unchanged, as its own node (functional.py: a model's output that a layer also reads)."""
    shape = tuple(x.shape[1:])
    made = lambda: _engine("Activation", activation="linear")  # noqa: E731
    return _node(made, ("identity",), "output_identity", [x], shape)


def dropout(x: Any, rate: Any) -> Any:
    if not _is_tensor(x):
        raise not_supported(f"dropout of {type(x).__name__}")
    rate = float(rate)
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout: rate must be in [0, 1), got {rate}")
    shape = tuple(x.shape[1:])
    return _node(lambda: _engine("Dropout", rate=rate), ("dropout", rate), "dropout", [x], shape)


def reshape(x: Any, shape: Any) -> Any:
    """tf.reshape of a symbolic tensor to (-1, ...): the batch axis kept, the sample reshaped (a
    Reshape layer); one other -1 is inferred, as TensorFlow infers it."""
    if not _is_tensor(x):
        raise not_supported(f"reshape of {type(x).__name__}")
    dims = [-1 if d is None else int(d) for d in np.asarray(shape).reshape(-1).tolist()]
    if not dims or dims[0] != -1:
        raise not_supported(
            f"tf.reshape of a symbolic tensor to {dims}, whose first axis is not -1 (the batch: "
            f"the model's samples keep it)"
        )
    size, target = int(np.prod(x.shape[1:])), dims[1:]
    known = int(np.prod([d for d in target if d != -1]))
    if target.count(-1) > 1 or (target.count(-1) == 0 and known != size) or size % max(known, 1):
        raise ValueError(
            f"reshape: cannot reshape samples of shape {tuple(x.shape[1:])} ({size} values) to "
            f"{tuple(target)}"
        )
    target = [size // known if d == -1 else d for d in target]
    sig = ("reshape", tuple(target))
    made = lambda: _engine("Reshape", target_shape=target)  # noqa: E731
    return _node(made, sig, "reshape", [x], tuple(target))


_tensor.register_tracer(sys.modules[__name__])  # crossover's ops on symbolic tensors: here
