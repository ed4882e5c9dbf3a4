"""Custom layers called on data, as Keras 3 calls a layer eagerly: `Linear(4)(tf.ones((2, 2)))`.

The layer's call() runs in Python on the values (crossover's tensors: numpy arrays, float32),
with the ops crossover has (tf.matmul, keras.ops.*, tf.reduce_*, arithmetic, activations,
keras.random.dropout ...), each computed by numpy. As Keras's __call__ does:
- the inputs become tensors (floating ones float32, the layer's dtype);
- build(input_shape) runs once, before the first call (add_weight's weights get their values
  then, drawn from their initializers: Weight in layers.py);
- `training` is the one given, else the one of the call it is inside, else call()'s default;
- the outermost call clears the `losses` of the layer and of the layers inside it, and
  add_loss() in call() adds to them.
The same layer object used later in a model is traced (keras/_trace.py): its ops start from the
values its weights have, and the values the engine trains are its weights' from then on.

A call() that applies something crossover has no eager implementation of raises one
NotImplementedError naming it (and the layer)."""

import inspect
import sys
from typing import Any, Optional

import numpy as np

from .. import _tensor
from .._args import SEE_SUPPORTED
from . import layers
from .layers import _calls


def _array_like(value: Any) -> bool:
    from .layers import Weight

    return isinstance(value, (np.ndarray, np.generic, Weight)) or hasattr(value, "__array__")


def _converted(value: Any) -> Any:
    """An input as Keras converts it: a tensor (a floating one float32); tuples, lists and
    dicts of tensors keep their structure."""
    if value is None:
        return None
    if isinstance(value, dict):
        return {k: _converted(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and value and any(_array_like(v) for v in value):
        return type(value)(_converted(v) for v in value)
    t = _tensor.convert_to_tensor(value)
    if t.dtype.kind == "f" and t.dtype != np.float32:
        t = _tensor.tensor(t.view(np.ndarray).astype(np.float32))
    return t


def _shape_of(value: Any) -> Any:
    """build()'s input_shape: the tensor's shape (batch included), or their structure's."""
    if isinstance(value, dict):
        return {k: _shape_of(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_shape_of(v) for v in value)
    return None if value is None else tuple(int(d) for d in np.shape(value))


def _parameters(layer: Any) -> Any:
    try:
        return inspect.signature(layer.call).parameters
    except (TypeError, ValueError):
        return {}


def call(layer: Any, inputs: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """layer(inputs, *args, **kwargs) on data: build() once, then call() in Python."""
    outermost = not _calls
    if outermost:
        layer._clear_losses()  # Keras's: each top-level call starts the losses again
    inputs = _converted(inputs)
    args = tuple(_converted(a) for a in args)
    if not getattr(layer, "_custom_built", False):
        layer.build(_shape_of(inputs))
        layer._custom_built = True
    params = _parameters(layer)
    kwargs = dict(kwargs)
    training = kwargs.pop("training", None)
    if training is None and _calls:
        training = _calls[-1][1]  # the outer call's
    if "training" in params and training is not None:
        kwargs["training"] = training
    if "mask" in kwargs and kwargs["mask"] is None and "mask" not in params:
        del kwargs["mask"]
    _calls.append((layer, training))
    try:
        return layer.call(inputs, *args, **kwargs)
    except AttributeError as e:
        if "is not supported (yet)" not in str(e):
            raise
        raise NotImplementedError(
            f"{e} (in the call() of layer '{layer.name}' ({type(layer).__name__}), called on "
            "data)"
        ) from None
    finally:
        _calls.pop()


def builtin_call(layer: Any, inputs: Any, kwargs: dict[str, Any]) -> Any:
    """A built-in layer (Dense, Conv2D, ...) called on data, as a custom layer's call() on data
    calls them: computed by the engine, in a one-layer model of the input's shape kept with the
    layer (its weights live there until a model uses the layer: _sequential.py's weight sharing
    moves them, so the layer keeps one set of weights wherever it is used). Inference mode:
    training=True is refused for the layers it changes (Dropout and the noise layers,
    BatchNormalization)."""
    from .layers import InputLayer, _changed_by_training
    from ._sequential import Sequential

    kwargs = dict(kwargs)
    training = kwargs.pop("training", None)
    if training is None and _calls:
        training = _calls[-1][1]
    kwargs.pop("mask", None)
    if kwargs:
        owner = type(layer).__name__
        raise TypeError(f"{owner}.__call__ got unexpected arguments {sorted(kwargs)}")
    if getattr(layer, "_merges", False) or isinstance(inputs, (list, tuple, dict)):
        raise NotImplementedError(
            f"layer '{layer.name}' ({type(layer).__name__}) called on a list of arrays is not "
            f"supported (yet): crossover runs merging layers inside a model; {SEE_SUPPORTED}"
        )
    if training and _changed_by_training(layer):
        raise NotImplementedError(
            f"layer '{layer.name}' ({type(layer).__name__}) called on data with training=True "
            "is not supported (yet): on data crossover runs built-in layers in inference mode; "
            f"train them in a model (fit or a GradientTape loop); {SEE_SUPPORTED}"
        )
    x = np.asarray(_converted(inputs), dtype=np.float32)
    if x.ndim < 2:
        raise ValueError(
            f"layer '{layer.name}' ({type(layer).__name__}) called on an array of shape "
            f"{x.shape}: give (batch, ...) values"
        )
    model = layer.__dict__.get("_eager_model")
    if model is None or model._eager_shape != x.shape[1:]:
        model = Sequential([InputLayer(shape=x.shape[1:]), layer])
        model._eager_shape = x.shape[1:]
        layer._eager_model = model
    return _tensor.tensor(model.predict(x, batch_size=max(len(x), 1), verbose=0))


def add_loss(layer: Any, loss: Any) -> None:
    """Keras's add_loss: a scalar tensor (or a list of them) kept in the layer's losses."""
    from . import _trace

    values = list(loss) if isinstance(loss, (list, tuple)) else [loss]
    traced = any(_trace.is_loss_term(v) or _trace.symbolic(v) for v in values)
    if traced or _trace._sinks:  # in a call() traced into a model: terms of its graph
        for v in values:
            _trace.add_loss_term(layer, v)
        return
    if not _calls:
        raise ValueError(
            "`add_loss()` can only be called from inside `build()` or `call()`, on a tensor "
            f"input. Received invalid value: {loss}"
        )
    kept = layer.__dict__.setdefault("_eager_losses", [])
    kept.extend(_tensor.convert_to_tensor(v) for v in values)


# --- a subclassed keras.Model called on data before it is compiled ---------------------------
def _held_layers(model: Any) -> list[Any]:
    """The layers a model holds in its attributes, and the layers inside them."""
    from .layers import Layer

    found: list[Any] = []
    for name, value in vars(model).items():
        if name.startswith("_"):
            continue
        values = list(value.values()) if isinstance(value, dict) else value
        for v in values if isinstance(values, (list, tuple)) else [values]:
            if isinstance(v, Layer) and not any(v is f for f in found):
                found += [v] + [s for s in v._all_sublayers() if not any(s is f for f in found)]
    return found


_TRACE_STATE = ("_output_tensor", "_calls", "_op_layers", "_traced_shapes")


def model_call(
    model: Any,
    inputs: Any,
    training: Any,
    trace: Any,
    kwargs: Optional[dict[str, Any]] = None,
) -> Any:
    """model(x) (or model(x, **kwargs): keywords of call()'s own, passed on to it) on data for a
    subclassed model not compiled yet: traced into the engine's graph when its call() can be
    (trace() succeeds: None is returned and the engine runs it), else its call() run in Python
    on the values, as Keras runs it (the layers it applies compute as above); what the failed
    trace left on its layers is undone, so that a later fit says why it cannot trace."""
    held = _held_layers(model)
    kept = [(layer, {k: layer.__dict__[k] for k in _TRACE_STATE if k in layer.__dict__})
            for layer in held]  # fmt: skip
    try:
        trace()
        return None
    except NotImplementedError:
        for layer, state in kept:
            for key in _TRACE_STATE:
                layer.__dict__.pop(key, None)
            layer.__dict__.update(state)
    for layer in held:
        layer._clear_losses()
    params = _parameters(model)
    x = _converted(inputs)
    kwargs = dict(kwargs or {})
    if "training" in params:
        kwargs["training"] = training
    _calls.append((model, training))
    try:
        return model.call(x, **kwargs)
    finally:
        _calls.pop()


layers._register_eager(sys.modules[__name__])  # layer(x) on data: here
