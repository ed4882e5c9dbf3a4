"""tf.GradientTape for custom training loops, over the engine's split training step.

crossover has no general autograd: a model is a fixed graph of layers with its backward pass in
C++. A tape therefore records the one thing the engine differentiates, fit's step taken apart:

    with tf.GradientTape() as tape:
        predictions = model(x, training=True)   # Sequential::training_forward (dropout on)
        loss = loss_object(y, predictions)      # Sequential::training_backward (loss + backward)
    grads = tape.gradient(loss, model.trainable_variables)   # those gradients, as arrays
    optimizer.apply_gradients(zip(grads, model.trainable_variables))   # the engine's update

The values are the engine's: `predictions` are the outputs of the training pass, `loss` the
batch's mean loss, the gradients those of the backward pass. Anything else (arithmetic on the
outputs before the loss, a target other than a loss object's value, sources other than the
model's trainable variables, two calls of the model under one loss) raises NotImplementedError
naming it, never a wrong number.
"""

from __future__ import annotations

import contextlib
from typing import Any, Iterator, Optional

import numpy as np

from . import _tensor
from .keras._args import SEE_SUPPORTED

_active: list["GradientTape"] = []


def _refuse(what: str) -> NotImplementedError:
    return NotImplementedError(
        f"{what} is not supported (yet): crossover's GradientTape differentiates a keras loss "
        f"object applied to a model's outputs, model(x, training=True), with respect to "
        f"model.trainable_variables; {SEE_SUPPORTED}"
    )


class _Call:
    """One model(x, training=True): the engine's training pass, its loss and gradients once a
    loss object was applied to its outputs."""

    def __init__(self, model: Any, core: Any, rows: int) -> None:
        self.model = model
        self.core = core
        self.rows = rows
        self.loss: Optional[str] = None  # the loss object's name, once applied
        self.tapes: list["GradientTape"] = []  # those that recorded the call
        self.gradients: dict[str, np.ndarray] = {}


def _variable_of(value: Any) -> Optional[tuple[Any, int]]:
    return getattr(value, "_crossover_variable", None)


def tag_variable(value: _tensor.Tensor, layer: Any, index: int) -> _tensor.Tensor:
    """Marks a tensor of model.trainable_variables as weight `index` of the layer object (the
    same variable in every model the layer is in, as Keras's layers share their variables)."""
    value._crossover_variable = (layer, index)
    return value


def _engine_name(model: Any, core: Any, layer: Any, index: int) -> Optional[str]:
    """The engine's name of the layer's weight `index` in `model` (None: not in it)."""
    cached = getattr(model, "_engine_names", None)
    if cached is None or cached[0] is not core:
        cached = (core, [name for name, _ in core.get_weights()])
        model._engine_names = cached
    for layer_in, first, end in model._weight_slices():
        if layer_in is layer and first + index < end:
            return cached[1][first + index]
    return None


def recording() -> bool:
    return any(t._recording for t in _active)


def training_call(model: Any, inputs: Any) -> _tensor.Tensor:
    """model(x, training=True): the engine's training pass (dropout on, batch normalization on
    the batch's statistics); recorded by the tapes recording now."""
    x = np.ascontiguousarray(np.asarray(_tensor._plain(inputs), dtype=np.float32))
    core = model._device_model()
    out = _tensor.tensor(core.training_forward(x))
    # The engine keeps one training pass: this one, from now on (an earlier call's outputs can
    # no longer be differentiated; the engine refuses the rest: another run, new weights).
    model._latest_training_call = None
    tapes = [t for t in _active if t._recording]
    if tapes:
        call = _Call(model, core, len(x))
        model._latest_training_call = call
        out._crossover_call = call
        for tape in tapes:
            tape._calls.append(call)
        call.tapes = tapes
    return out


def loss_of(loss: Any, y_true: Any, y_pred: Any, sample_weight: Any) -> Optional[_tensor.Tensor]:
    """A keras loss object applied to recorded outputs: the engine's loss and backward pass
    (None when y_pred is not a recorded model output: the loss is computed as usual)."""
    call = getattr(y_pred, "_crossover_call", None)
    if call is None and any(id(y_pred) in t._ids for t in _tensor._recording):
        # Eager ops' output under a tape: numpy's loss would not be recorded (a None gradient).
        raise _refuse(
            f"{type(loss).__name__} on the result of TensorFlow's eager ops under a "
            f"GradientTape (its gradient is not recorded: use tf.nn's losses, e.g. "
            f"tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits)))"
        )
    if call is None or not any(t._recording for t in call.tapes):
        return None  # not recorded (a tape records only inside its `with`): numpy's value
    from .keras import losses as losses_module

    owner = type(loss).__name__
    if sample_weight is not None:
        raise _refuse(f"{owner}(..., sample_weight=) on a model's outputs under a GradientTape")
    if call.loss is not None:
        raise _refuse(
            f"a second loss ({owner}) of the same model call under a GradientTape (the first was "
            f"{call.loss})"
        )
    try:
        name = losses_module.library_name(loss)
    except (ValueError, TypeError) as e:
        raise _refuse(f"{owner} on a model's outputs under a GradientTape ({e})") from None
    y = np.ascontiguousarray(np.asarray(_tensor._plain(y_true), dtype=np.float32))
    if y.ndim == 1 and name in ("mean_squared_error", "binary_crossentropy"):
        y = y.reshape(-1, 1)
    if getattr(call.model, "_latest_training_call", None) is not call:
        raise _refuse(
            f"{owner} of a model call's outputs after the model ran again in training since "
            f"that call"
        )
    try:
        value, gradients = call.core.training_backward(y, name, losses_module.from_logits(loss))
    except ValueError as e:
        if "no training pass" in str(e):
            raise _refuse(
                f"{owner} of a model call's outputs after the model ran again (or its weights "
                f"changed) since that call"
            ) from None
        if "needs logits" in str(e) or "from_logits applies" in str(e):
            raise _refuse(f"{owner} with these outputs ({e})") from None
        raise
    call.loss = owner
    call.gradients = dict(gradients)
    out = _LossValue(np.float32(value))
    out._crossover_loss = call
    return out


class _LossValue(_tensor.Tensor):
    """A recorded loss's value. `loss + sum(model.losses)` keeps it the recorded loss when that
    sum is 0 (crossover's layers have no regularization losses); any other arithmetic gives a
    plain tensor, which tape.gradient refuses."""

    def __add__(self, other: Any) -> Any:
        if isinstance(other, (int, float, np.number)) and float(other) == 0.0:
            return self
        return _tensor.tensor(np.asarray(self) + np.asarray(_tensor._plain(other)))

    __radd__ = __add__


class UnconnectedGradients:
    """tf.UnconnectedGradients: what gradient gives for a source the target does not depend
    on, None (TensorFlow's default) or zeros."""

    NONE = "none"
    ZERO = "zero"


def _flatten(structure: Any) -> list[Any]:
    if isinstance(structure, dict):
        return [v for k in structure for v in _flatten(structure[k])]
    if isinstance(structure, (list, tuple)):
        return [v for item in structure for v in _flatten(item)]
    return [structure]


def _pack(structure: Any, flat: Iterator[Any]) -> Any:
    if isinstance(structure, dict):
        return {k: _pack(v, flat) for k, v in structure.items()}
    if isinstance(structure, (list, tuple)):
        return type(structure)(_pack(v, flat) for v in structure)
    return next(flat)


def _is_watchable(value: Any) -> bool:
    return isinstance(value, _tensor.Tensor) or _tensor._is_var(value)


class GradientTape:
    """tf.GradientTape. Two kinds of computation are differentiated:

    - TensorFlow's eager ops (_tensor.py: tf.matmul, tf.nn.*, arithmetic on tensors and
      tf.Variables, ...), each recorded with its backward while the tape records, as
      TensorFlow's tape does (persistent and nested tapes, watch, stop_recording);
    - a keras loss object applied to model(x, training=True), differentiated with respect to
      model.trainable_variables by the engine's split training step (see the module's text).
    """

    def __init__(self, persistent: bool = False, watch_accessed_variables: bool = True) -> None:
        self._persistent = bool(persistent)
        self._watch_accessed = bool(watch_accessed_variables)
        self._calls: list[_Call] = []
        self._recording = False
        self._used = False
        self._ids: set[int] = set()  # what the tape sees: watched, or made by a recorded op
        self._watched: list[Any] = []  # keeps them alive, so that their ids stay theirs
        self._records: list[tuple[Any, Any, Any]] = []  # (operands, output, backward)

    def __enter__(self) -> "GradientTape":
        self._start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop()

    def _start(self) -> None:
        self._recording = True
        _active.append(self)
        _tensor._recording.append(self)

    def _stop(self) -> None:
        self._recording = False
        if self in _active:
            _active.remove(self)
        if self in _tensor._recording:
            _tensor._recording.remove(self)

    def _watch_one(self, value: Any) -> None:
        if id(value) not in self._ids:
            self._ids.add(id(value))
            self._watched.append(value)

    def watch(self, tensor: Any) -> None:
        """Records the ops on `tensor` (a tensor or variable, or a list or dict of them) from now
        on, as TensorFlow's watch."""
        for value in _flatten(tensor):
            if not _is_watchable(value):
                raise ValueError(
                    f"GradientTape.watch: passed in object of type {type(value).__name__}, "
                    f"not a tf.Tensor or tf.Variable (tf.constant(value) makes one)"
                )
            self._watch_one(value)

    def watched_variables(self) -> tuple[Any, ...]:
        return tuple(v for v in self._watched if _tensor._is_var(v))

    @contextlib.contextmanager
    def stop_recording(self) -> Iterator[None]:
        """Ops inside are not recorded (by this tape)."""
        if not self._recording:
            raise RuntimeError("Tape.stop_recording: the tape is not recording")
        self._stop()
        try:
            yield
        finally:
            self._start()

    def reset(self) -> None:
        self._calls = []
        self._ids = set()
        self._watched = []
        self._records = []

    def gradient(
        self,
        target: Any,
        sources: Any,
        output_gradients: Any = None,
        unconnected_gradients: Any = UnconnectedGradients.NONE,
    ) -> Any:
        if self._used and not self._persistent:
            raise RuntimeError(
                "A non-persistent GradientTape can only be used to compute one set of gradients "
                "(or jacobians)"
            )
        if getattr(target, "_crossover_loss", None) is not None:
            return self._model_gradient(target, sources, output_gradients)
        self._used = True
        flat = _flatten(sources)
        for i, source in enumerate(flat):
            if getattr(source, "_crossover_variable", None) is not None and id(source) not in (
                self._ids
            ):
                raise _refuse(
                    f"GradientTape.gradient with respect to a model's trainable variable (source "
                    f"{i}) of a target that is not the value of a loss object applied to a "
                    f"model's outputs on this tape (eager arithmetic on a model's outputs, or a "
                    f"loss function called as a function, before the loss)"
                )
            if not _is_watchable(source):
                raise ValueError(
                    f"GradientTape.gradient: source {i} is a {type(source).__name__}, not a "
                    f"tf.Tensor or tf.Variable"
                )
        grads = self._backward(target, output_gradients)
        if self._calls and any(grads.get(id(s)) is None for s in flat):
            # A model ran on this tape: its weights' gradients come from the engine's step,
            # which sees a loss object applied to its outputs only; None would be wrong.
            raise _refuse(
                "GradientTape.gradient of a target that is not the value of a loss object "
                "applied to a model's outputs on this tape (arithmetic on a loss or on the "
                "outputs, a loss function called as a function, a custom computation), with "
                "respect to sources it does not reach by TensorFlow's eager ops"
            )
        zero = str(getattr(unconnected_gradients, "value", unconnected_gradients)).lower()
        out = []
        for source in flat:
            g = grads.get(id(source))
            if g is not None and _tensor._arr(source).dtype.kind != "f":
                g = None  # integer sources have no gradient (TensorFlow's)
            if g is None and zero == "zero":
                g = _tensor.zeros_like(source)
            out.append(g if g is None or isinstance(g, _tensor.Tensor) else _tensor.tensor(g))
        return _pack(sources, iter(out))

    def _backward(self, target: Any, output_gradients: Any) -> dict[int, Any]:
        """The gradient of the target(s), summed, with respect to everything the tape saw, by
        id: the records in reverse, each op's backward (recorded by the tapes that record)."""
        targets = _flatten(target)
        if output_gradients is None:
            seeds = [None] * len(targets)
        elif isinstance(target, (list, tuple, dict)):
            seeds = _flatten(output_gradients)
        else:
            seeds = [output_gradients]
        if len(seeds) != len(targets):
            raise ValueError(
                "GradientTape.gradient: output_gradients must have one gradient per target"
            )
        ids = self._ids
        grads: dict[int, Any] = {}
        for t, seed in zip(targets, seeds):
            if not _is_watchable(t) or id(t) not in ids:
                continue  # not computed from what the tape watched: every gradient is None
            a = _tensor._arr(t)
            g = _tensor.ones_like(a) if seed is None else _tensor.cast(seed, a.dtype)
            grads[id(t)] = g if id(t) not in grads else _tensor.add(grads[id(t)], g)
        for inputs, out, backward in reversed(list(self._records)):
            g = grads.get(id(out))
            if g is None:
                continue
            need = [id(x) in ids for x in inputs]
            if not any(need):
                continue
            for x, gx, wanted in zip(inputs, backward(g, need), need):
                if gx is None or not wanted:
                    continue
                k = id(x)
                grads[k] = gx if k not in grads else _tensor.add(grads[k], gx)
        return grads

    def _model_gradient(self, target: Any, sources: Any, output_gradients: Any) -> Any:
        if output_gradients is not None:
            raise _refuse("GradientTape.gradient(output_gradients=)")
        call = getattr(target, "_crossover_loss", None)
        if call is None or not any(c is call for c in self._calls):
            raise _refuse(
                "GradientTape.gradient of a target that is not the value of a loss object "
                "applied to a model's outputs on this tape (arithmetic on a loss or on the "
                "outputs, a loss function called as a function, a custom computation)"
            )
        self._used = True
        single = not isinstance(sources, (list, tuple))
        items = [sources] if single else list(sources)
        grads = []
        for i, source in enumerate(items):
            tag = _variable_of(source)
            name = None if tag is None else _engine_name(call.model, call.core, *tag)
            if name is None:
                raise _refuse(
                    f"GradientTape.gradient with respect to source {i}, which is not one of "
                    f"the trainable_variables of the model called on this tape"
                )
            if name not in call.gradients:
                raise _refuse(
                    f"GradientTape.gradient with respect to {name}, which the model's training "
                    f"step does not update (a frozen layer since its last compile)"
                )
            grads.append(_tensor.tensor(call.gradients[name]))
        if single:
            return grads[0]
        return tuple(grads) if isinstance(sources, tuple) else grads


def apply_gradients(optimizer: Any, grads_and_vars: Any) -> None:
    """optimizer.apply_gradients(zip(grads, model.trainable_variables)): the engine's update
    with these gradients (the tape's, or arrays made from them, e.g. clipped)."""
    pairs = list(grads_and_vars)
    if not pairs:
        raise ValueError("apply_gradients: no gradients given")
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ValueError(
                f"apply_gradients: expected (gradient, variable) pairs, got {type(pair).__name__} "
                f"at {i}"
            )
    eager = [_tensor._is_var(v) for _, v in pairs]
    if all(eager):
        optimizer._apply_to_variables(pairs)
        return
    if any(eager):
        raise _refuse(
            "apply_gradients on tf.Variables and a model's trainable variables in one call "
            "(apply each set with its own call)"
        )
    from .keras.models import Sequential

    model = None
    given: dict[str, np.ndarray] = {}
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ValueError(
                f"apply_gradients: expected (gradient, variable) pairs, got {type(pair).__name__} "
                f"at {i}"
            )
        grad, var = pair
        tag = _variable_of(var)
        if tag is None:
            raise _refuse(
                f"apply_gradients on variable {i}, which is not one of a crossover model's "
                f"trainable_variables"
            )
        # The model whose engine holds the layer's latest weights: the one the tape ran.
        holder = tag[0]._weights_in
        if not isinstance(holder, Sequential):
            raise _refuse(f"apply_gradients on variable {i} of a model that has not run yet")
        if model is not None and holder is not model:
            raise _refuse("apply_gradients on the variables of two models at once")
        model = holder
        core = model._device_model()
        name = _engine_name(model, core, *tag)
        if name is None:
            raise _refuse(f"apply_gradients on variable {i}, which is not in its model")
        if grad is None:
            raise _refuse(f"apply_gradients with no gradient (None) for {name}")
        given[name] = np.ascontiguousarray(np.asarray(_tensor._plain(grad), dtype=np.float32))
    core = model._device_model()
    names = core.trainable_gradient_names()
    if set(given) != set(names):
        missing = [n for n in names if n not in given]
        raise _refuse(
            f"apply_gradients on some of the model's trainable variables only (missing: "
            f"{', '.join(missing) or 'none'}; not trained by its step: "
            f"{', '.join(n for n in given if n not in names) or 'none'})"
        )
    optimizer._bind_to(model, core)
    core.apply_gradients([(n, given[n]) for n in names])
