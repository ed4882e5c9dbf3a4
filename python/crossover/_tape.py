"""tf.GradientTape for custom training loops, over the engine's split training step.

A model is a graph of layers with its backward pass in C++; TensorFlow's eager ops (_tensor.py)
carry their own backward in Python. A tape records both and joins them at the model's outputs:

    with tf.GradientTape() as tape:
        predictions = model(x, training=True)   # Sequential::training_forward (dropout on)
        loss = loss_object(y, predictions)      # eager ops, recorded on the outputs
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))   # the engine's update

- When the target is a keras loss object's value on the outputs (the loop above), its gradient
  is the engine's loss op and backward pass (Sequential::training_backward): fit's step split in
  three, the same numbers.
- Otherwise (a loss function called as a function, tf.reduce_mean of tf.nn ops on the outputs,
  a penalty added to the loss, a custom loss), the eager ops' backward gives the target's
  gradient with respect to the outputs, and the engine's backward pass takes it to the weights
  (Sequential::training_backward_outputs); eager ops on model.trainable_variables themselves (a
  weight penalty) add theirs.

One backward pass per model call: a second gradient through the same call (a persistent tape),
one after the model ran again in training, and a gradient through a model's inputs (a model
applied to another's outputs, as a GAN's generator under its discriminator) raise
NotImplementedError naming it, never a wrong number.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Optional

import numpy as np

from . import _tensor
from ._args import SEE_SUPPORTED

_active: list["GradientTape"] = []


def _refuse(what: str) -> NotImplementedError:
    return NotImplementedError(
        f"{what} is not supported (yet): crossover's GradientTape differentiates TensorFlow's "
        f"eager ops, and a model's outputs, model(x, training=True), with respect to "
        f"model.trainable_variables by one backward pass of the engine per call; {SEE_SUPPORTED}"
    )


class _Call:
    """One model(x, training=True): the engine's training pass, its loss and gradients once a
    loss object was applied to its outputs, or once the gradient of a loss computed from them
    by eager ops reached them (`backward`)."""

    def __init__(self, model: Any, core: Any, rows: int, weights: _tensor.Tensor) -> None:
        self.model = model
        self.core = core
        self.rows = rows
        self.tapes: list["GradientTape"] = []  # those that recorded the call
        # What a tape's gradient() computation reached this call with, by engine name (summed
        # over the paths to it), and whether a gradient with respect to its inputs was asked for
        # (the engine gives none: a model applied to another model's outputs).
        self.reached: dict[str, np.ndarray] = {}
        self.input_gradient_asked = False
        self.differentiated = False  # the engine's pass was used by a backward pass
        # Stands for the call's weights among a record's operands (the tapes see it).
        self.weights = weights

    def reach(self, gradients: Any) -> None:
        for name, g in gradients:
            g = np.asarray(g, dtype=np.float32)
            self.reached[name] = g if name not in self.reached else self.reached[name] + g

    def backward_outputs(self, g: Any, need: list[bool]) -> list[Any]:
        """The record's backward for the call's outputs: the engine's backward pass from the
        gradient g of the target with respect to them (training_backward_outputs)."""
        if need[0]:
            self.input_gradient_asked = True
        if self.differentiated or getattr(self.model, "_latest_training_call", None) is not self:
            raise _refuse(
                "a second gradient through one model(x, training=True) call, or one after the "
                "model ran again in training since that call (call the model again under a new "
                "tape for each gradient)"
            )
        grad = np.ascontiguousarray(np.asarray(_tensor._plain(g), dtype=np.float32))
        try:
            gradients = self.core.training_backward_outputs(grad)
        except ValueError as e:
            if "no training pass" in str(e):
                raise _refuse(
                    "a gradient through a model call's outputs after the model ran again (or "
                    "its weights changed) since that call"
                ) from None
            raise
        self.differentiated = True
        self.reach(gradients)
        return [None, None]

    def gradient_of(self, layer: Any, index: int) -> Optional[np.ndarray]:
        name = _engine_name(self.model, self.core, layer, index)
        return None if name is None else self.reached.get(name)


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
    the batch's statistics); recorded by the tapes recording now. A model of several inputs
    takes them as predict does (a list or a dict: packed side by side, model._x_array)."""
    plain = _tensor._plain(inputs)
    if hasattr(model, "_x_array"):
        x = np.ascontiguousarray(model._x_array(plain, "x"), dtype=np.float32)
    else:
        x = np.ascontiguousarray(np.asarray(plain, dtype=np.float32))
    core = model._device_model()
    out = _tensor.tensor(core.training_forward(x))
    # The engine keeps one training pass: this one, from now on (an earlier call's outputs can
    # no longer be differentiated; the engine refuses the rest: another run, new weights).
    model._latest_training_call = None
    # Keras's softmax and sigmoid keep their input on their outputs (_keras_logits), which a
    # cross-entropy with from_logits=True takes back (keras/losses.py, _takes_logits).
    leaves = model._leaves() if hasattr(model, "_leaves") else []
    last = leaves[-1] if leaves else None
    activation = "softmax" if type(last).__name__ == "Softmax" else getattr(last, "activation", "")
    if activation in ("softmax", "sigmoid"):
        out._keras_logits_of = activation
    tapes = [t for t in _active if t._recording]
    if tapes:
        call = _Call(model, core, len(x), _seen_marker(tapes))
        model._latest_training_call = call
        out._crossover_call = call
        for tape in tapes:
            tape._calls.append(call)
        # Eager ops on the outputs are recorded (the tapes see them); their gradient reaches
        # the engine's backward pass through this record.
        _tensor._record((inputs, call.weights), out, call.backward_outputs)
        call.tapes = tapes
    return out


def inference_call(
    model: Any, inputs: Any, changed_by_training: Callable[[Any], bool]
) -> _tensor.Tensor:
    """model(x) (training not True) under a recording tape: TensorFlow differentiates the
    inference pass. Where no layer depends on training (`changed_by_training(layer)` false for
    each), that is the training pass (recorded); otherwise the inference outputs, whose gradient
    is refused (the engine differentiates its training pass only)."""
    leaves = model._leaves() if hasattr(model, "_leaves") else []
    dependent = {
        "dropout in a custom layer" if hasattr(l, "_signature") else type(l).__name__
        for l in leaves
        if changed_by_training(l)
    }
    if not dependent:
        return training_call(model, inputs)
    out = _tensor.tensor(model.predict(inputs, verbose=0))
    what = ", ".join(sorted(dependent))

    def backward(g: Any, need: list[bool]) -> list[Any]:
        raise _refuse(
            f"a gradient through model(x) in inference mode (training not True) of a model with "
            f"{what} (its inference pass is not the training pass the engine differentiates: "
            f"call model(x, training=True) under the tape)"
        )

    marker = _seen_marker([t for t in _active if t._recording])
    _tensor._record((marker,), out, backward)
    return out


def _seen_marker(tapes: list["GradientTape"]) -> _tensor.Tensor:
    """A stand-in operand the tapes see, for a record whose real operands are not tensors they
    watch (a model call's weights, which live in the engine)."""
    marker = _tensor.tensor(np.zeros((), np.float32))
    for tape in tapes:
        tape._watch_one(marker)
    return marker


def engine_loss(loss: Any, y_true: Any, y_pred: Any, sample_weight: Any, value: Any) -> Any:
    """A keras loss object applied to a recorded model output, its value `value` computed by
    eager ops (recorded on the outputs): returned as a _LossValue that tape.gradient
    differentiates with the engine's loss op and backward pass, as fit's step does, when it is
    the target itself; through the eager ops otherwise (a penalty added to it, a second loss).
    `value` itself where the engine has no such loss op (`loss._engine_op()` is None)."""
    call = getattr(y_pred, "_crossover_call", None)
    if call is None or sample_weight is not None or np.ndim(value) != 0:
        return value
    op = loss._engine_op()
    if op is None:
        return value
    name, parameter, from_logits, one_target_column = op
    y = np.ascontiguousarray(np.asarray(_tensor._plain(y_true), dtype=np.float32))
    if y.ndim == 1 and one_target_column:
        y = y.reshape(-1, 1)
    out = _LossValue(np.float32(value))
    out._crossover_loss = (call, y, (name, parameter), from_logits, type(loss).__name__)
    _tensor._record((value,), out, _identity)  # by the tapes that see the value
    return out


def _identity(g: Any, need: list[bool]) -> list[Any]:
    return [g]


class _LossValue(_tensor.Tensor):
    """A recorded loss's value. `loss + sum(model.losses)` keeps it the recorded loss when that
    sum is 0 (crossover's layers have no regularization losses); other arithmetic is eager ops,
    recorded (the loss's gradients reach the model through its record)."""

    def __add__(self, other: Any) -> Any:
        if isinstance(other, (int, float, np.number)) and float(other) == 0.0:
            return self
        return _tensor.Tensor.__add__(self, other)

    def __radd__(self, other: Any) -> Any:
        if isinstance(other, (int, float, np.number)) and float(other) == 0.0:
            return self
        return _tensor.Tensor.__radd__(self, other)


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
        if getattr(target, "_crossover_loss", None) is not None and output_gradients is None:
            fast = self._model_gradient(target, sources)
            if fast is not None:
                return fast
        self._used = True
        flat = _flatten(sources)
        for i, source in enumerate(flat):
            if _variable_of(source) is None and not _is_watchable(source):
                raise ValueError(
                    f"GradientTape.gradient: source {i} is a {type(source).__name__}, not a "
                    f"tf.Tensor or tf.Variable"
                )
        for call in self._calls:
            call.reached = {}
            call.input_gradient_asked = False
        grads = self._backward(target, output_gradients)
        # Eager ops on a model's trainable variables (a weight penalty): by variable, since
        # each model.trainable_variables gives new tensors of the same variables.
        by_tag: dict[tuple[int, int], Any] = {}
        for w in self._watched:
            tag = _variable_of(w)
            if tag is not None and grads.get(id(w)) is not None:
                key = (id(tag[0]), tag[1])
                g = grads[id(w)]
                by_tag[key] = g if key not in by_tag else _tensor.add(by_tag[key], g)
        zero = str(getattr(unconnected_gradients, "value", unconnected_gradients)).lower()
        out = []
        for i, source in enumerate(flat):
            g = grads.get(id(source))
            tag = _variable_of(source)
            if tag is not None:
                # A model's trainable variable: what the engine's backward passes of the model
                # calls on this tape gave it, plus what eager ops on it gave.
                g = by_tag.get((id(tag[0]), tag[1]))
                layer, index = tag
                kinds = layer._weight_kinds() if hasattr(layer, "_weight_kinds") else []
                # A moving statistic has no gradient (TensorFlow's None).
                moving = index < len(kinds) and not kinds[index][1]
                for call in [] if moving else self._calls:
                    if call.reached and _engine_name(call.model, call.core, *tag) is not None:
                        gc = call.gradient_of(*tag)
                        if gc is None:
                            raise _refuse(
                                f"GradientTape.gradient with respect to source {i}, which the "
                                f"model's training step does not update (a frozen layer since "
                                f"its last compile)"
                            )
                        g = _tensor.tensor(gc) if g is None else _tensor.add(g, gc)
                if g is None and any(c.input_gradient_asked for c in self._calls):
                    raise _refuse(
                        f"GradientTape.gradient with respect to a model's trainable variable "
                        f"(source {i}) through another model's inputs (a model applied to the "
                        f"outputs of a model or of eager ops on watched tensors, as a GAN's "
                        f"generator under its discriminator: the engine gives no gradient with "
                        f"respect to a model's inputs)"
                    )
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

    def _model_gradient(self, target: Any, sources: Any) -> Any:
        """The gradient of a loss object's value on a model's outputs with respect to that
        model's trainable variables: the engine's loss op and backward pass (fit's step split:
        the same numbers). None where that is not what was asked (the generic path then)."""
        call, y, (name, parameter), logits, owner = target._crossover_loss
        items = list(sources) if isinstance(sources, (list, tuple)) else [sources]
        names = [_engine_name(call.model, call.core, *_variable_of(s)) if _variable_of(s)
                 else None for s in items]  # fmt: skip
        if call.differentiated or call not in self._calls or None in names:
            return None
        if getattr(call.model, "_latest_training_call", None) is not call:
            raise _refuse(
                f"{owner} of a model call's outputs after the model ran again in training since "
                f"that call"
            )
        try:
            _, gradients = call.core.training_backward(y, name, logits, parameter)
        except ValueError as e:
            if "no training pass" in str(e):
                raise _refuse(
                    f"{owner} of a model call's outputs after the model ran again (or its "
                    f"weights changed) since that call"
                ) from None
            if "needs logits" in str(e) or "from_logits applies" in str(e):
                return None  # Keras computes it as asked: the eager ops do (the pass is kept)
            raise
        call.differentiated = True
        gradients = dict(gradients)
        grads = []
        for n in names:
            if n not in gradients:
                raise _refuse(
                    f"GradientTape.gradient with respect to {n}, which the model's training "
                    f"step does not update (a frozen layer since its last compile)"
                )
            grads.append(_tensor.tensor(gradients[n]))
        self._used = True
        if not isinstance(sources, (list, tuple)):
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
        if not hasattr(holder, "_device_model"):  # None or arrays: no model has run
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
