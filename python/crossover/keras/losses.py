"""keras.losses: the losses crossover's engine computes, as objects or names for compile, and
Keras's loss functions and objects called on arrays (computed by numpy, Keras's arithmetic:
probabilities clipped to [1e-7, 1 - 1e-7], the categorical ones renormalised first).

Each class maps to the library's loss name. Called as a function, a loss takes Keras's arguments
(from_logits=True, label_smoothing, reduction 'sum' or None); compile refuses those the engine
does not run, by name. The cross-entropies' from_logits=True goes to the engine (the loss applies
the softmax or sigmoid itself, as Keras's does, to the model's output, or to the input of a final
sigmoid or softmax, which Keras takes back as the logits)."""

from typing import Any, Optional

import numpy as np

from .. import _core, _tensor
from .._args import SEE_SUPPORTED, reject_unknown, reject_unsupported, unsupported_attribute
from . import _names

EPSILON = 1e-7  # keras.backend.epsilon()


def _pred(y_pred: Any) -> np.ndarray:
    """y_pred as Keras's convert_to_tensor takes it: a float array (Python floats: float32)."""
    a = _tensor.convert_to_tensor(y_pred).view(np.ndarray)
    if not np.issubdtype(a.dtype, np.floating):
        a = a.astype(np.float32)
    return a


def _same_rank(y_true: np.ndarray, y_pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keras's squeeze_or_expand_to_same_rank: a last axis of 1 added or dropped."""
    if y_true.ndim == y_pred.ndim + 1 and y_true.shape[-1] == 1:
        if y_pred.ndim == 1:
            y_pred = y_pred[..., None]
        else:
            y_true = y_true[..., 0]
    if y_pred.ndim == y_true.ndim + 1 and y_pred.shape[-1] == 1:
        if y_true.ndim == 1:
            y_true = y_true[..., None]
        else:
            y_pred = y_pred[..., 0]
    return y_true, y_pred


def _logsumexp(x: np.ndarray, axis: int) -> np.ndarray:
    top = np.max(x, axis=axis, keepdims=True)
    return np.squeeze(top, axis) + np.log(np.sum(np.exp(x - top), axis=axis))


def _on_tape(y_pred: Any) -> bool:
    """Whether a recording GradientTape sees y_pred (a result of eager ops on watched variables):
    the loss is then computed with the eager ops themselves (_eager_loss), which the tape
    differentiates, instead of numpy's (the same values)."""
    return any(id(y_pred) in t._ids for t in _tensor._recording)


def _takes_logits(y_pred: Any, name: str, from_logits: bool) -> bool:
    """Keras 3 on TensorFlow: a cross-entropy with from_logits=True of a model's final softmax
    (sigmoid) output takes that activation's input back as the logits, which gives the loss of
    the probabilities themselves (from_logits=False)."""
    own = "sigmoid" if name == "binary_crossentropy" else "softmax"
    return bool(from_logits) and getattr(y_pred, "_keras_logits_of", None) != own


def _eager_loss(name: str, y_true: Any, y_pred: Any, **kwargs: Any) -> _tensor.Tensor:
    """The per-sample loss `name` of recorded y_pred, Keras's formula in the eager ops (the values
    numpy's path gives, and their gradients): probabilities clipped to [1e-7, 1 - 1e-7] before
    their log, as Keras's backend does."""
    T = _tensor
    if not np.issubdtype(y_pred.dtype, np.floating):
        y_pred = T.cast(y_pred, np.float32)
    from_logits = _takes_logits(y_pred, name, kwargs.get("from_logits", False))
    if name == "sparse_categorical_crossentropy":
        target = np.asarray(_tensor._plain(y_true)).astype(np.int64)
        if target.ndim == y_pred.ndim and target.shape[-1] == 1:
            target = target[..., 0]
        logits = y_pred if from_logits else T.log(T.clip_by_value(y_pred, EPSILON, 1 - EPSILON))
        return T.sparse_softmax_cross_entropy_with_logits(target, logits)
    target = np.asarray(_tensor._plain(y_true)).astype(y_pred.dtype)
    if name in ("mean_squared_error", "mean_absolute_error"):
        target, y_pred = _same_rank(target, y_pred)  # a tensor's indexing is recorded
        error = T.subtract(target, y_pred)
        per_value = T.square(error) if name == "mean_squared_error" else T.abs(error)
        return T.reduce_mean(per_value, axis=-1)
    _check_same_shape(target, np.asarray(y_pred))
    smoothing = kwargs.get("label_smoothing", 0.0)
    axis = kwargs.get("axis", -1)
    if name == "categorical_crossentropy":
        if smoothing:
            target = target * (1.0 - smoothing) + smoothing / target.shape[-1]
        if from_logits:
            return T.softmax_cross_entropy_with_logits(target.astype(y_pred.dtype), y_pred, axis)
        p = T.divide(y_pred, T.reduce_sum(y_pred, axis=axis, keepdims=True))
        p = T.clip_by_value(p, EPSILON, 1.0 - EPSILON)
        return T.negative(T.reduce_sum(T.multiply(target.astype(y_pred.dtype), T.log(p)), axis))
    if smoothing:
        target = target * (1.0 - smoothing) + 0.5 * smoothing
    target = target.astype(y_pred.dtype)
    if from_logits:
        bce = T.sigmoid_cross_entropy_with_logits(target, y_pred)
    else:
        p = T.clip_by_value(y_pred, EPSILON, 1.0 - EPSILON)
        bce = T.negative(
            T.add(T.multiply(target, T.log(p)), T.multiply(1 - target, T.log(T.subtract(1.0, p))))
        )
    return T.reduce_mean(bce, axis=axis)


def _check_same_shape(y_true: np.ndarray, y_pred: np.ndarray) -> None:
    if y_true.shape != y_pred.shape:
        raise ValueError(
            "Arguments `target` and `output` must have the same shape. Received: "
            f"target.shape={y_true.shape}, output.shape={y_pred.shape}"
        )


def sparse_categorical_crossentropy(
    y_true: Any, y_pred: Any, from_logits: bool = False, ignore_class: Any = None, axis: int = -1
) -> _tensor.Tensor:
    """Per sample: -log of the probability of the true class (Keras: probabilities clipped to
    [1e-7, 1 - 1e-7], then log-softmax of their logs, i.e. renormalised)."""
    reject_unsupported("sparse_categorical_crossentropy", ignore_class=(ignore_class, None))
    if _on_tape(y_pred):
        return _eager_loss(
            "sparse_categorical_crossentropy",
            y_true,
            y_pred,
            from_logits=from_logits,
        )
    output = _pred(y_pred)
    if axis not in (-1, output.ndim - 1):
        raise ValueError(f"Only axis=-1 is currently supported. Received: axis={axis}")
    target = np.asarray(_tensor._plain(y_true)).astype(np.int64)
    if target.ndim == output.ndim and target.shape[-1] == 1:
        target = target[..., 0]
    if target.shape != output.shape[:-1]:
        raise ValueError(
            "Argument `output` must have rank (ndim) `target.ndim - 1`. Received: "
            f"target.shape={target.shape}, output.shape={output.shape}"
        )
    classes = output.shape[-1]
    if np.any((target < 0) | (target >= classes)):
        raise ValueError(
            f"sparse_categorical_crossentropy: a label is outside [0, {classes}): "
            f"{int(target[(target < 0) | (target >= classes)][0])}"
        )
    logits = output if from_logits else np.log(np.clip(output, EPSILON, 1 - EPSILON))
    picked = np.take_along_axis(logits, target[..., None], axis=-1)[..., 0]
    return _tensor.tensor((_logsumexp(logits, -1) - picked).astype(output.dtype))


def categorical_crossentropy(
    y_true: Any,
    y_pred: Any,
    from_logits: bool = False,
    label_smoothing: float = 0.0,
    axis: int = -1,
) -> _tensor.Tensor:
    """Per sample: -sum(y_true * log(p)), p renormalised and clipped to [1e-7, 1 - 1e-7]."""
    if _on_tape(y_pred):
        return _eager_loss(
            "categorical_crossentropy",
            y_true,
            y_pred,
            from_logits=from_logits,
            label_smoothing=label_smoothing,
            axis=axis,
        )
    output = _pred(y_pred)
    target = np.asarray(_tensor._plain(y_true)).astype(output.dtype)
    _check_same_shape(target, output)
    if label_smoothing:
        classes = output.dtype.type(target.shape[-1])
        target = target * (1.0 - label_smoothing) + (label_smoothing / classes)
        target = target.astype(output.dtype)
    if from_logits:
        log_p = output - np.expand_dims(_logsumexp(output, axis), axis)
        return _tensor.tensor((-np.sum(target * log_p, axis=axis)).astype(output.dtype))
    p = output / np.sum(output, axis=axis, keepdims=True)
    p = np.clip(p, EPSILON, 1.0 - EPSILON)
    return _tensor.tensor((-np.sum(target * np.log(p), axis=axis)).astype(output.dtype))


def binary_crossentropy(
    y_true: Any,
    y_pred: Any,
    from_logits: bool = False,
    label_smoothing: float = 0.0,
    axis: int = -1,
) -> _tensor.Tensor:
    """Per sample: the mean over `axis` of -(y log p + (1 - y) log(1 - p)), p clipped."""
    if _on_tape(y_pred):
        return _eager_loss(
            "binary_crossentropy",
            y_true,
            y_pred,
            from_logits=from_logits,
            label_smoothing=label_smoothing,
            axis=axis,
        )
    output = _pred(y_pred)
    target = np.asarray(_tensor._plain(y_true)).astype(output.dtype)
    _check_same_shape(target, output)
    if label_smoothing:
        target = (target * (1.0 - label_smoothing) + 0.5 * label_smoothing).astype(output.dtype)
    if from_logits:
        bce = np.maximum(output, 0) - output * target + np.log1p(np.exp(-np.abs(output)))
    else:
        p = np.clip(output, EPSILON, 1.0 - EPSILON)
        bce = -(target * np.log(p) + (1 - target) * np.log(1 - p))
    return _tensor.tensor(np.mean(bce, axis=axis).astype(output.dtype))


def mean_squared_error(y_true: Any, y_pred: Any) -> _tensor.Tensor:
    """Per sample: the mean over the last axis of (y_true - y_pred)**2."""
    if _on_tape(y_pred):
        return _eager_loss("mean_squared_error", y_true, y_pred)
    output = _pred(y_pred)
    target, output = _same_rank(np.asarray(_tensor._plain(y_true)).astype(output.dtype), output)
    return _tensor.tensor(np.mean(np.square(target - output), axis=-1))


def huber(y_true: Any, y_pred: Any, delta: float = 1.0) -> _tensor.Tensor:
    """Per sample: the mean over the last axis of 0.5 e**2 where |e| <= delta, else
    delta |e| - 0.5 delta**2, with e = y_pred - y_true (Keras 3's huber); in the eager ops on a
    tape, whose gradient is e inside delta and delta sign(e) beyond."""
    if _on_tape(y_pred):
        T = _tensor
        y_pred = T.cast(y_pred, np.float32) if y_pred.dtype != np.float32 else y_pred
        target = np.asarray(_tensor._plain(y_true)).astype(np.float32)
        target, y_pred = _same_rank(target, y_pred)
        error = T.subtract(y_pred, target)
        a = T.abs(error)
        d = np.float32(delta)
        inside = np.asarray(_tensor._plain(a)) <= d
        per_value = T.where(
            inside,
            T.multiply(np.float32(0.5), T.square(error)),
            T.subtract(T.multiply(d, a), np.float32(0.5) * d * d),
        )
        return T.reduce_mean(per_value, axis=-1)
    output = _pred(y_pred)
    target, output = _same_rank(np.asarray(_tensor._plain(y_true)).astype(output.dtype), output)
    error = output - target
    a = np.abs(error)
    d = np.float32(delta)
    per_value = np.where(
        a <= d, np.float32(0.5) * np.square(error), d * a - np.float32(0.5) * d * d
    )
    return _tensor.tensor(np.mean(per_value, axis=-1).astype(output.dtype))


def mean_absolute_error(y_true: Any, y_pred: Any) -> _tensor.Tensor:
    """Per sample: the mean over the last axis of |y_true - y_pred|."""
    if _on_tape(y_pred):
        return _eager_loss("mean_absolute_error", y_true, y_pred)
    output = _pred(y_pred)
    target, output = _same_rank(np.asarray(_tensor._plain(y_true)).astype(output.dtype), output)
    return _tensor.tensor(np.mean(np.abs(target - output), axis=-1))


def kl_divergence(y_true: Any, y_pred: Any) -> _tensor.Tensor:
    """Per sample: the sum over the last axis of t log(t / p), t and p clipped to [1e-7, 1], as
    Keras computes it; in the eager ops (a tape records them: knowledge distillation's loss)."""
    T = _tensor
    p = T.convert_to_tensor(y_pred)
    p = p if p.dtype.kind == "f" else T.cast(p, np.float32)
    t = T.clip_by_value(T.cast(T.convert_to_tensor(y_true), p.dtype), EPSILON, 1.0)
    p = T.clip_by_value(p, EPSILON, 1.0)
    return T.reduce_sum(T.multiply(t, T.log(T.divide(t, p))), axis=-1)


mse = MSE = mean_squared_error
mae = MAE = mean_absolute_error
kld = KLD = kullback_leibler_divergence = kl_divergence


def _reduce(values: np.ndarray, reduction: Optional[str], sample_weight: Any) -> _tensor.Tensor:
    """Keras's reduce_weighted_values: weights broadcast over the values, then 'sum' or
    'sum_over_batch_size' (the sum over the number of values) or None/'none' (as they are)."""
    if sample_weight is not None:
        w = np.asarray(_tensor._plain(sample_weight)).astype(values.dtype)
        while w.ndim > values.ndim and w.shape[-1] == 1:
            w = w[..., 0]
        values = values * w
    if reduction in (None, "none") or values.ndim == 0:
        return _tensor.tensor(values)
    total = np.sum(values, dtype=values.dtype)
    if reduction == "sum":
        return _tensor.tensor(total)
    count = values.dtype.type(values.size)
    return _tensor.tensor(total / count if values.size else values.dtype.type(0))


def _eager_reduce(values: Any, reduction: Optional[str], sample_weight: Any) -> _tensor.Tensor:
    """_reduce in the eager ops, for recorded per-sample losses."""
    T = _tensor
    if sample_weight is not None:
        w = np.asarray(_tensor._plain(sample_weight)).astype(values.dtype)
        while w.ndim > values.ndim and w.shape[-1] == 1:
            w = w[..., 0]
        values = T.multiply(values, w)
    if reduction in (None, "none") or values.ndim == 0:
        return values
    total = T.reduce_sum(values)
    if reduction == "sum":
        return total
    return T.divide(total, values.dtype.type(max(values.size, 1)))


# Keras's names of each loss (function names and aliases) -> the library's name.
# The engine's loss units (src/backends/losses/, _core.loss_rules): their names, aliases and
# rules, read here rather than restated.
RULES = {r["name"]: r for r in _core.loss_rules()}
_NAMES = {r["name"]: r["name"] for r in RULES.values()}
for _r in RULES.values():
    if _r["alias"]:
        _NAMES[_r["alias"]] = _NAMES[_r["alias"].upper()] = _r["name"]  # mse, MSE


class Loss:
    """What every loss takes: name, reduction ('sum_over_batch_size' only), dtype float32."""

    _library_name: str

    def __init__(
        self,
        name: Optional[str] = None,
        reduction: Optional[str] = "sum_over_batch_size",
        dtype: Any = None,
        **kwargs: Any,
    ) -> None:
        owner = type(self).__name__
        reject_unknown(owner, kwargs, like="signature")
        if reduction == "auto":
            reduction = "sum_over_batch_size"
        if reduction not in ("sum_over_batch_size", "sum", "mean", "none", None):
            raise ValueError(
                "Invalid value for argument `reduction`. Expected one of {None, 'none', 'sum', "
                f"'sum_over_batch_size', 'mean'}}. Received: reduction={reduction}"
            )
        if dtype is not None and str(getattr(dtype, "name", dtype)) != "float32":
            raise ValueError(
                f"{owner}: dtype {dtype!r} is not supported: crossover computes in float32"
            )
        # A subclass of the user's has no library name: Keras's name, the class's in snake case.
        self.name = name or getattr(self, "_library_name", None) or _names.to_snake_case(owner)
        self.reduction = reduction
        self._fn_kwargs: dict[str, Any] = {}

    def call(self, y_true: Any, y_pred: Any) -> _tensor.Tensor:
        """The per-sample losses (Keras's Loss.call)."""
        y_true, y_pred = _same_rank(
            np.asarray(_tensor._plain(y_true)), np.asarray(_tensor._plain(y_pred))
        )
        return _FUNCTIONS[self._library_name](y_true, y_pred, **self._fn_kwargs)

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> _tensor.Tensor:
        """Keras's Loss.__call__: y_true and y_pred as float32, the per-sample losses, reduced
        (a scalar tensor for the default 'sum_over_batch_size'). On the outputs of
        model(x, training=True) under a GradientTape: the engine's loss and gradients (_tape)."""
        from .. import _tape

        own_call = type(self).call is not Loss.call  # a subclass's own call()
        if own_call or _on_tape(y_pred):
            # In eager ops (recorded under a tape: a model's outputs, or eager ops' results):
            # Keras's __call__, y_true and y_pred float32 tensors, call(), the reduction.
            y_pred = _tensor.convert_to_tensor(y_pred)
            if y_pred.dtype != np.float32:  # (a cast would drop a model output's marks)
                y_pred = _tensor.cast(y_pred, np.float32)
            if own_call:
                y_true = _tensor.cast(_tensor.convert_to_tensor(y_true), np.float32)
                values = _tensor.convert_to_tensor(self.call(y_true, y_pred))
            else:
                values = _FUNCTIONS[self._library_name](y_true, y_pred, **self._fn_kwargs)
            loss = _eager_reduce(values, self.reduction, sample_weight)
            return _tape.engine_loss(self, y_true, y_pred, sample_weight, loss)
        y_pred = np.asarray(_tensor._plain(y_pred), dtype=np.float32)
        y_true = np.asarray(_tensor._plain(y_true), dtype=np.float32)
        values = self.call(y_true, y_pred).view(np.ndarray).astype(np.float32)
        return _reduce(values, self.reduction, sample_weight)

    def _engine_op(self) -> Optional[tuple[str, Optional[float], bool, bool]]:
        """The engine's loss op for this object, for a GradientTape (_tape.engine_loss): its
        library name, its parameter, from_logits, and whether a 1-D y is one target column;
        None where the engine has no such op."""
        try:
            name = library_name(self)
        except (ValueError, TypeError):
            return None
        return name, parameter(self), from_logits(self), one_target_column(name)

    def _engine_problem(self) -> Optional[str]:
        """Why the engine cannot train with this loss as configured (None when it can)."""
        for argument, value, default in self._engine_defaults():
            if value != default:
                return f"{argument}={value!r}"
        return None

    def _engine_defaults(self) -> list[tuple[str, Any, Any]]:
        return [("reduction", self.reduction, "sum_over_batch_size")]

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "reduction": self.reduction, **self._fn_kwargs}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name}>"


class _Crossentropy(Loss):
    def __init__(
        self,
        from_logits: bool = False,
        label_smoothing: float = 0.0,
        axis: int = -1,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.from_logits = bool(from_logits)
        self.label_smoothing = float(label_smoothing)
        self.axis = axis
        self._fn_kwargs = {
            "from_logits": self.from_logits,
            "label_smoothing": self.label_smoothing,
            "axis": axis,
        }

    def _engine_defaults(self) -> list[tuple[str, Any, Any]]:
        return super()._engine_defaults() + [
            ("label_smoothing", self.label_smoothing, 0.0),
            ("axis", self.axis, -1),
        ]


class SparseCategoricalCrossentropy(Loss):
    _library_name = "sparse_categorical_crossentropy"

    def __init__(
        self, from_logits: bool = False, ignore_class: Optional[int] = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        reject_unsupported("SparseCategoricalCrossentropy", ignore_class=(ignore_class, None))
        self.from_logits = bool(from_logits)
        self.ignore_class = None
        self._fn_kwargs = {"from_logits": self.from_logits}


class CategoricalCrossentropy(_Crossentropy):
    _library_name = "categorical_crossentropy"


class BinaryCrossentropy(_Crossentropy):
    _library_name = "binary_crossentropy"


class MeanSquaredError(Loss):
    _library_name = "mean_squared_error"


class Huber(Loss):
    """Keras 3's Huber(delta=1.0, reduction, name="huber_loss"): trained by the engine's unit of
    it (src/backends/losses/huber.h), with its delta."""

    _library_name = "huber"

    def __init__(
        self,
        delta: float = RULES["huber"]["parameter_default"],  # the unit's (Keras's 1.0)
        name: str = "huber_loss",
        **kwargs: Any,
    ) -> None:
        super().__init__(name=name, **kwargs)
        if isinstance(delta, bool) or not isinstance(delta, (int, float)):
            raise ValueError(f"Huber: delta must be a number, got {delta!r}")
        why = _core.loss_parameter_problem("huber", float(delta))  # the engine's rule
        if why:
            raise ValueError(f"Huber: {why}")
        self.delta = float(delta)
        self._fn_kwargs = {"delta": self.delta}

    def get_config(self) -> dict[str, Any]:
        """Keras 3.15's: Loss.get_config, without delta (Keras's own Huber leaves it out; the
        model's compile_config, which crossover writes from the engine, keeps it)."""
        return {"name": self.name, "reduction": self.reduction}


class MeanAbsoluteError(Loss):
    """Called on arrays only: the engine has no mean absolute error loss (compile refuses it)."""

    _library_name = "mean_absolute_error"


class KLDivergence(Loss):
    """Keras's Kullback-Leibler divergence: trained with Keras's steps in Python (the engine has
    no such loss op)."""

    _library_name = "kl_divergence"


_FUNCTIONS: dict[str, Any] = {
    "sparse_categorical_crossentropy": sparse_categorical_crossentropy,
    "categorical_crossentropy": categorical_crossentropy,
    "binary_crossentropy": binary_crossentropy,
    "mean_squared_error": mean_squared_error,
    "huber": huber,
    "mean_absolute_error": mean_absolute_error,
    "kl_divergence": kl_divergence,
}
_ENGINE_LOSSES = tuple(RULES)


def one_target_column(name: str) -> bool:
    """Whether the engine's loss `name` takes one target per output element that a 1-D y gives
    for a one-unit output (mean_squared_error, binary_crossentropy, huber), not a class index
    or a row of classes."""
    r = RULES.get(name)
    return r is not None and not r["class_index_targets"] and not r["classes_on_last_axis"]


def from_logits(loss: Any) -> bool:
    """Whether a loss given to compile takes logits (a cross-entropy object's from_logits)."""
    return isinstance(loss, Loss) and bool(getattr(loss, "from_logits", False))


def parameter(loss: Any) -> Optional[float]:
    """The engine loss's one argument a loss object gives (its unit's, Huber's delta); None:
    its default."""
    rules = RULES.get(getattr(loss, "_library_name", "")) if isinstance(loss, Loss) else None
    if rules is None or not rules["parameter"]:
        return None
    value = getattr(loss, rules["parameter"], None)
    return None if value is None else float(value)


def library_name(loss: Any) -> str:
    """The library's loss name for a Keras loss name or object; ValueError/TypeError otherwise."""
    if isinstance(loss, Loss):
        owner = type(loss).__name__
        if type(loss).call is not Loss.call or not hasattr(loss, "_library_name"):
            raise TypeError(f"compile: loss {owner} computes its own call(): no engine loss op")
        if loss._library_name not in _ENGINE_LOSSES:
            raise ValueError(
                f"compile: loss {owner} is not supported (yet) in training: crossover's engine "
                f"computes {', '.join(_ENGINE_LOSSES)}; {SEE_SUPPORTED}"
            )
        problem = loss._engine_problem()
        if problem is not None:
            why = f"the engine computes only the default of {problem.split('=')[0]}"
            raise ValueError(
                f"compile: {owner}({problem}) is not supported (yet): {why}; {SEE_SUPPORTED}"
            )
        return loss._library_name
    if loss in (mean_absolute_error,) or loss in ("mean_absolute_error", "mae", "MAE"):
        raise ValueError(
            f"compile: loss {getattr(loss, '__name__', loss)!r} is not supported (yet) in "
            f"training: crossover's engine computes {', '.join(_ENGINE_LOSSES)}; {SEE_SUPPORTED}"
        )
    if any(loss is f for f in _FUNCTIONS.values()):  # keras.losses.categorical_crossentropy
        return _NAMES[loss.__name__]
    if isinstance(loss, str):
        if loss in _NAMES:
            return _NAMES[loss]
        raise ValueError(
            f"compile: unknown loss {loss!r}: crossover computes {', '.join(sorted(set(_NAMES)))} "
            f"(or keras.losses.SparseCategoricalCrossentropy(), CategoricalCrossentropy(), "
            f"BinaryCrossentropy(), MeanSquaredError())"
        )
    raise TypeError(
        f"compile: loss must be a name such as 'sparse_categorical_crossentropy' or a "
        f"keras.losses object, got {loss!r} (a custom loss function is not supported: the loss "
        f"runs inside the engine)"
    )


def get(identifier: Any) -> Any:
    """keras.losses.get: a loss function by name, or the object/function given."""
    if isinstance(identifier, str):
        if identifier in _FUNCTIONS:
            return _FUNCTIONS[identifier]
        if identifier in ("mse", "MSE", "mae", "MAE", "kld", "KLD", "kullback_leibler_divergence"):
            return globals()[identifier]
        raise ValueError(f"Could not interpret loss identifier: {identifier}")
    return identifier


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "keras.losses",
        name,
        "SparseCategoricalCrossentropy, CategoricalCrossentropy, BinaryCrossentropy, "
        "MeanSquaredError and Huber (objects, or their names as strings in compile)",
    )


__all__ = [
    "Loss",
    "SparseCategoricalCrossentropy",
    "CategoricalCrossentropy",
    "BinaryCrossentropy",
    "MeanSquaredError",
    "Huber",
    "MeanAbsoluteError",
    "KLDivergence",
    "sparse_categorical_crossentropy",
    "categorical_crossentropy",
    "binary_crossentropy",
    "mean_squared_error",
    "huber",
    "mean_absolute_error",
    "mse",
    "mae",
    "MSE",
    "MAE",
    "kl_divergence",
    "kld",
    "KLD",
    "kullback_leibler_divergence",
    "get",
]
