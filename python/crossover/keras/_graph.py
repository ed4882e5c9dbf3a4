"""A layer called on symbolic tensors (keras.Input's, another layer's output): the call recorded
as a node of a model's graph, its output a new symbolic tensor (functional.py's models are made
of these calls; a Sequential called on symbolic tensors adds its layers' calls in its place).
layers.py's Layer.__call__ runs call() below, registered there when this module is imported."""

from typing import Any, Optional

from .._args import SEE_SUPPORTED, reject_unsupported
from . import _trace
from ._symbolic import KerasTensor
from .layers import (
    InputLayer,
    Layer,
    _ModelBase,
    _built,
    _changed_by_training,
    _is_custom,
    _register_symbolic_call,
)

# Inside a subclassed model's traced call() (depth): layers may be given training= (the engine
# runs them in training mode in fit, in inference mode elsewhere, as the call meant), and a
# Sequential called on a symbolic tensor adds its layers in its place.
_tracing = [0]


class _Modes:
    """A subclassed model's call() traced for keyword arguments of its own (Subclassed.
    _call_variant): the training mode Keras would run each layer that training changes in
    (Dropout, the noise layers, BatchNormalization, a custom layer's dropout): the `training=`
    given to its call, else the enclosing call's, else inference (`seen`: the modes met). The
    engine runs a graph in one mode."""

    def __init__(self, training: Optional[bool], seen: Optional[set[bool]] = None) -> None:
        self.training = training
        self.seen: set[bool] = set() if seen is None else seen


_modes: list[_Modes] = []


def _as_mode(training: Any) -> Optional[bool]:
    return None if training is None else bool(training)


def call(layer: Any, inputs: Any, kwargs: dict[str, Any]) -> KerasTensor:
    """layer(inputs) on symbolic tensors: the output tensor of the call, recorded."""
    if not _modes:
        return _call(layer, inputs, kwargs)
    # Inside a call() traced for keywords of its own: the mode this call runs in, which the
    # layers it calls inherit (a model's, a custom layer's).
    given = _as_mode(kwargs.get("training"))
    mode = _Modes(given if given is not None else _modes[-1].training, _modes[-1].seen)
    _modes.append(mode)
    try:
        out = _call(layer, inputs, kwargs)
    finally:
        _modes.pop()
    if _changed_by_training(layer):
        mode.seen.add(bool(mode.training))
    return out


def _call(layer: Any, inputs: Any, kwargs: dict[str, Any]) -> KerasTensor:
    owner = type(layer).__name__
    reject_unsupported(f"{owner}.__call__", mask=(kwargs.pop("mask", None), None))
    training = kwargs.pop("training", None)
    if isinstance(layer, _ModelBase) and layer._subclassed:
        return layer._call_symbolic(inputs, training, kwargs)
    if training is not None and not _tracing[0]:
        raise NotImplementedError(
            f"{owner}.__call__: training={training!r} is not supported (yet): in a crossover "
            "model, layers run in training mode in fit and in inference mode in evaluate and "
            f"predict; {SEE_SUPPORTED}"
        )
    if kwargs:
        raise TypeError(f"{owner}.__call__ got unexpected keyword arguments {sorted(kwargs)}")
    tensors = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    for t in tensors:
        if not isinstance(t, KerasTensor):
            raise TypeError(
                f"{owner}: a functional model's layer is called on symbolic tensors only "
                f"(keras.Input(...) or another layer's output), got {type(t).__name__} among them"
            )
    if isinstance(layer, Layer) and _is_custom(layer):
        return _trace.custom_call(layer, inputs, {"training": training, **kwargs})
    if isinstance(layer, Layer):
        layer._refuse_python_code()
    if isinstance(layer, InputLayer):
        raise TypeError("an InputLayer is not called: keras.Input(shape=...) makes the input")
    if isinstance(layer, _ModelBase):
        out = tensors[0] if len(tensors) == 1 else tensors
        if not layer.built and len(tensors) == 1:
            layer.build(tensors[0].shape)  # as Keras builds a model at its first call
        leaves = [inner for inner in layer._leaves() if not isinstance(inner, InputLayer)]
        if not layer._functional_class:
            for inner in leaves:
                out = call(inner, out, {})
            return out
        # A functional model's layers were called once already, making it: the model applied
        # as a layer calls them again, on this input (a chain of them only, as Sequential.add
        # takes it); their first outputs stay the model's own.
        if not layer._is_chain():
            raise NotImplementedError(
                f"functional model '{layer.name}' called as a layer: only a functional model "
                f"whose layers form a chain is supported (yet); {SEE_SUPPORTED}"
            )
        kept = [inner._output_tensor for inner in leaves]
        for inner in leaves:
            inner._output_tensor = None
        try:
            for inner in leaves:
                out = call(inner, out, {})
        finally:
            for inner, first in zip(leaves, kept):
                inner._output_tensor = first
        return out
    if isinstance(layer, _ModelBase):
        raise NotImplementedError(
            f"a model ('{layer.name}') called on a symbolic tensor, as a layer of a functional "
            f"model, is not supported (yet); {SEE_SUPPORTED}"
        )
    merges = getattr(layer, "_merges", False)
    if merges and len(tensors) < 2:
        raise ValueError(
            f"A merge layer should be called on a list of at least 2 inputs. Got {len(tensors)} "
            "inputs."
        )
    if not merges and len(tensors) != 1:
        raise ValueError(
            f"Layer '{layer.name}' expects 1 input, but it received {len(tensors)} input tensors."
        )
    if merges:
        shape = layer._merged_shape([tuple(t.shape[1:]) for t in tensors])
    else:
        shape = _trace.output_shape(layer, tuple(tensors[0].shape[1:]))
    first = getattr(layer, "_output_tensor", None)
    if first is not None:  # a shared layer: its weights must fit this call as its first
        _check_call_again(layer, first, tensors)
    out = KerasTensor((None, *shape), layer, tensors, getattr(layer, "_calls", 0))
    layer._calls = out._node + 1
    if first is None:
        layer._output_tensor = out  # Keras's layer.output: its first call's
    return out


def _check_call_again(layer: Any, first: "KerasTensor", tensors: list["KerasTensor"]) -> None:
    """A layer called again takes its first call's weights: the same shapes, else Keras's
    error for an input that does not fit the layer."""
    if not isinstance(layer, Layer) or isinstance(layer, _ModelBase):
        return
    shapes = [tuple(t.shape[1:]) for t in tensors]
    before = [tuple(t.shape[1:]) for t in first._inputs]
    want = [tuple(w[1]) for w in _built(layer, before)[1]]
    got = [tuple(w[1]) for w in _built(layer, shapes)[1]]
    if want != got:
        raise ValueError(
            f'Input 0 of layer "{layer.name}" is incompatible with the layer: its weights were '
            f"made for inputs of shape {[(None, *s) for s in before]} at its first call, but "
            f"it received {[(None, *s) for s in shapes]}"
        )


_register_symbolic_call(call)  # layer(x) on symbolic tensors: here
