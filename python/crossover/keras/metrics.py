"""keras.metrics: the metrics crossover's engine computes during fit and evaluate, as objects,
names or functions.

The engine computes, on the device, each step: the accuracy that goes with the loss (Keras's
rule for 'accuracy': sparse_categorical_accuracy with sparse_categorical_crossentropy,
categorical_accuracy with categorical_crossentropy, binary_accuracy (threshold 0.5) with
binary_crossentropy for one output column; Keras 3 picks by the output's last axis, so for
several it is categorical_accuracy, computed as a metric where the output's shape is known at
compile (_sequential.py, _binary_loss_accuracy); with mean_squared_error it counts
categorical_accuracy (argmax against argmax), which Keras's 'accuracy' is not (exact equality),
so there only CategoricalAccuracy is taken), and mean_absolute_error, mean_squared_error,
root_mean_squared_error, the accuracies and the top-k accuracies by their Keras names
(src/nn/metrics.h), with TopKCategoricalAccuracy's and SparseTopKCategoricalAccuracy's k and
BinaryAccuracy's threshold. Any other metric is refused by
name (Precision, Recall, AUC, ... are not computed)."""

from typing import Any, Optional

import numpy as np

from .. import _tensor
from .._args import SEE_SUPPORTED, reject_unknown, reject_unsupported, unsupported_attribute
from . import _names
from . import losses as _losses


def _plain(a: Any) -> np.ndarray:
    return np.asarray(_tensor._plain(a))


def sparse_categorical_accuracy(y_true: Any, y_pred: Any) -> _tensor.Tensor:
    """Per sample, float32: 1 where the class index equals the argmax of the prediction."""
    y_pred, y_true = _plain(y_pred), _plain(y_true)
    shape = y_true.shape
    squeezed = y_true.ndim == y_pred.ndim and y_true.shape[-1] == 1
    if squeezed:
        y_true = y_true[..., 0]
    predicted = np.argmax(y_pred, axis=-1).astype(y_true.dtype)
    matches = (y_true == predicted).astype(np.float32)
    if squeezed:
        matches = matches.reshape(shape)
    if matches.ndim > 1 and matches.shape[-1] == 1:
        matches = matches[..., 0]
    return _tensor.tensor(matches)


def categorical_accuracy(y_true: Any, y_pred: Any) -> _tensor.Tensor:
    """Per sample, float32: 1 where argmax(y_true) equals argmax(y_pred)."""
    y_pred, y_true = _plain(y_pred), _plain(y_true)
    return _tensor.tensor(
        (np.argmax(y_true, axis=-1) == np.argmax(y_pred, axis=-1)).astype(np.float32)
    )


def binary_accuracy(y_true: Any, y_pred: Any, threshold: float = 0.5) -> _tensor.Tensor:
    """Per sample, float32: the mean over the last axis of (y_pred > threshold) == y_true."""
    y_pred = _plain(y_pred).astype(np.float32)
    y_true = _plain(y_true).astype(np.float32)
    y_true, y_pred = _losses._same_rank(y_true, y_pred)
    matches = (y_true == (y_pred > np.float32(threshold)).astype(np.float32)).astype(np.float32)
    return _tensor.tensor(np.mean(matches, axis=-1))


def _in_top_k(truth: np.ndarray, y_pred: np.ndarray, k: int) -> np.ndarray:
    """TensorFlow's in_top_k: fewer than k scores above the truth's (ties count in)."""
    scores = np.take_along_axis(y_pred, truth.astype(np.int64)[..., None], axis=-1)
    return (np.sum(y_pred > scores, axis=-1) < k).astype(np.float32)


def top_k_categorical_accuracy(y_true: Any, y_pred: Any, k: int = 5) -> _tensor.Tensor:
    """Per sample, float32: 1 where argmax(y_true) is among the k highest scores of y_pred."""
    y_pred, y_true = _plain(y_pred).astype(np.float32), _plain(y_true)
    return _tensor.tensor(_in_top_k(np.argmax(y_true, axis=-1), y_pred, k))


def sparse_top_k_categorical_accuracy(y_true: Any, y_pred: Any, k: int = 5) -> _tensor.Tensor:
    """Per sample, float32: 1 where the class index is among the k highest scores of y_pred."""
    y_pred, y_true = _plain(y_pred).astype(np.float32), _plain(y_true)
    if y_true.ndim == y_pred.ndim and y_true.shape[-1] == 1:
        y_true = y_true[..., 0]
    return _tensor.tensor(_in_top_k(y_true, y_pred, k))


mean_squared_error = mse = _losses.mean_squared_error
mean_absolute_error = mae = _losses.mean_absolute_error


# Which accuracy the engine counts for each loss (its unit's rules): the class index's, the
# element-wise binary one, else the argmax's.
def _engine_accuracy(rules: dict[str, Any]) -> str:
    if rules["class_index_targets"]:
        return "sparse_categorical_accuracy"
    return "binary_accuracy" if rules["elementwise"] else "categorical_accuracy"


_ENGINE_ACCURACY = {name: _engine_accuracy(r) for name, r in _losses.RULES.items()}


def _count(owner: str, k: Any) -> int:
    """A top-k's k: a whole number of at least 1 (ValueError naming the class otherwise)."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"{owner}: k must be a whole number of at least 1, got {k!r}")
    return int(k)


def _number(owner: str, name: str, value: Any) -> float:
    """A finite float argument (ValueError naming the class and the argument otherwise)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = float("nan")
    if isinstance(value, (bool, np.bool_)) or not np.isfinite(number):
        raise ValueError(f"{owner}: {name} must be a finite number, got {value!r}")
    return number


class Metric:
    """A Keras metric object: compile takes the accuracies (the engine counts them during fit);
    any metric also works on arrays as in Keras: update_state(y_true, y_pred), result(),
    reset_state(), or called as m(y_true, y_pred) (update, then result), on numpy in float32."""

    _kind: str

    def __init__(self, name: Optional[str] = None, dtype: Any = None, **kwargs: Any) -> None:
        reject_unknown(type(self).__name__, kwargs, like="signature")
        # A subclass of the user's has no kind: Keras's name, the class's in snake case.
        owner = type(self).__name__
        self.name = name or getattr(self, "_kind", None) or _names.to_snake_case(owner)
        self.dtype = dtype
        self._variables: list[Any] = []
        # Crossover's own metrics start their state here; a subclass of the user's makes its
        # variables after this (Keras's __init__ resets nothing: its reset_state may read them).
        Metric.reset_state(self) if self._is_users() else self.reset_state()

    def add_weight(
        self,
        shape: Any = (),
        initializer: Any = "zeros",
        dtype: Any = None,
        aggregation: str = "sum",
        name: Optional[str] = None,
    ) -> Any:
        """Keras's Metric.add_weight (add_variable): a state variable (assign, assign_add, read
        by TensorFlow's ops), not trained; reset_state() sets each back to its initializer's."""
        from .layers import Variable

        variable = Variable(
            initializer, shape=shape, dtype=dtype or "float32", trainable=False, name=name
        )
        self._variables.append((variable, initializer, shape))
        return variable

    add_variable = add_weight

    @property
    def variables(self) -> list[Any]:
        return [v for v, _, _ in getattr(self, "_variables", [])]

    def _is_users(self) -> bool:
        """A subclass of the user's, computing its own update_state (no engine kind)."""
        return not hasattr(self, "_kind")

    def _values(self, y_true: Any, y_pred: Any) -> np.ndarray:
        return _plain(_FUNCTIONS[self._kind](y_true, y_pred, **self._arguments())).astype(
            np.float32
        )

    def _arguments(self) -> dict[str, Any]:
        """The class's own argument (k, threshold) as the metric function takes it."""
        return {}

    def get_config(self) -> dict[str, Any]:
        """Keras's: the name, the dtype and the class's own argument (k, threshold)."""
        return {"name": self.name, "dtype": self.dtype or "float32", **self._arguments()}

    def reset_state(self) -> None:
        """The state at the start (Keras's: each variable add_weight made back to its
        initializer's values)."""
        self._total = np.float32(0)
        self._count = np.float32(0)
        from .layers import Variable

        for variable, initializer, shape in getattr(self, "_variables", []):
            variable.assign(Variable(initializer, shape=shape, dtype=variable.dtype)._array)

    def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> None:
        values = self._values(y_true, y_pred)
        if sample_weight is not None:
            w = np.broadcast_to(_plain(sample_weight).astype(np.float32), values.shape)
            self._total = np.float32(self._total + np.sum(values * w, dtype=np.float32))
            self._count = np.float32(self._count + np.sum(w, dtype=np.float32))
        else:
            self._total = np.float32(self._total + np.sum(values, dtype=np.float32))
            self._count = np.float32(self._count + np.float32(values.size))

    def result(self) -> _tensor.Tensor:
        count = self._count
        return _tensor.tensor(np.float32(self._total / count) if count else np.float32(0))

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> _tensor.Tensor:
        self.update_state(y_true, y_pred, sample_weight)
        return self.result()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name}>"


class MeanMetricWrapper(Metric):
    """Keras's MeanMetricWrapper: the mean of fn(y_true, y_pred, **kwargs) over the samples seen
    (a metric function of the user's given to compile is one)."""

    def __init__(
        self, fn: Any, name: Optional[str] = None, dtype: Any = None, **kwargs: Any
    ) -> None:
        self._fn, self._fn_kwargs = fn, kwargs
        super().__init__(name=name or getattr(fn, "__name__", "mean_metric_wrapper"), dtype=dtype)

    def _values(self, y_true: Any, y_pred: Any) -> np.ndarray:
        y_true = _tensor.cast(_tensor.convert_to_tensor(y_true), np.float32)
        y_pred = _tensor.cast(_tensor.convert_to_tensor(y_pred), np.float32)
        return _plain(self._fn(y_true, y_pred, **self._fn_kwargs)).astype(np.float32)


class SparseCategoricalAccuracy(Metric):
    _kind = "sparse_categorical_accuracy"


class CategoricalAccuracy(Metric):
    _kind = "categorical_accuracy"


class BinaryAccuracy(Metric):
    """The fraction of outputs on the target's side of the threshold (1 above it, 0 at or below)."""

    _kind = "binary_accuracy"

    def __init__(self, name: Optional[str] = None, dtype: Any = None, threshold: float = 0.5):
        self.threshold = _number("BinaryAccuracy", "threshold", threshold)
        super().__init__(name=name, dtype=dtype)

    def _arguments(self) -> dict[str, Any]:
        return {"threshold": self.threshold}


class MeanSquaredError(Metric):
    _kind = "mean_squared_error"


class MeanAbsoluteError(Metric):
    _kind = "mean_absolute_error"


class RootMeanSquaredError(Metric):
    """The root of the mean over samples of each sample's mean squared error."""

    _kind = "root_mean_squared_error"

    def _values(self, y_true: Any, y_pred: Any) -> np.ndarray:
        return _plain(mean_squared_error(y_true, y_pred)).astype(np.float32)

    def result(self) -> _tensor.Tensor:
        count = self._count
        return _tensor.tensor(np.sqrt(np.float32(self._total / count)) if count else np.float32(0))


class TopKCategoricalAccuracy(Metric):
    _kind = "top_k_categorical_accuracy"

    def __init__(self, k: int = 5, name: Optional[str] = None, dtype: Any = None):
        self.k = _count("TopKCategoricalAccuracy", k)
        super().__init__(name=name, dtype=dtype)

    def _arguments(self) -> dict[str, Any]:
        return {"k": self.k}


class SparseTopKCategoricalAccuracy(Metric):
    _kind = "sparse_top_k_categorical_accuracy"

    def __init__(
        self,
        k: int = 5,
        name: Optional[str] = None,
        dtype: Any = None,
        from_sorted_ids: bool = False,
    ):
        reject_unsupported(
            "SparseTopKCategoricalAccuracy", from_sorted_ids=(from_sorted_ids, False)
        )
        self.k = _count("SparseTopKCategoricalAccuracy", k)
        super().__init__(name=name, dtype=dtype)

    def _arguments(self) -> dict[str, Any]:
        return {"k": self.k}


class Mean(Metric):
    """keras.metrics.Mean: the (weighted) mean of the values given to update_state."""

    _kind = "mean"

    def update_state(  # type: ignore[override]
        self, values: Any, sample_weight: Any = None
    ) -> None:
        v = _plain(values).astype(np.float32)
        if sample_weight is None:
            self._total = np.float32(self._total + np.sum(v, dtype=np.float32))
            self._count = np.float32(self._count + np.float32(v.size))
        else:
            w = np.broadcast_to(_plain(sample_weight).astype(np.float32), v.shape)
            self._total = np.float32(self._total + np.sum(v * w, dtype=np.float32))
            self._count = np.float32(self._count + np.sum(w, dtype=np.float32))

    def __call__(  # type: ignore[override]
        self, values: Any, sample_weight: Any = None
    ) -> _tensor.Tensor:
        self.update_state(values, sample_weight)
        return self.result()


_FUNCTIONS: dict[str, Any] = {
    "sparse_categorical_accuracy": sparse_categorical_accuracy,
    "categorical_accuracy": categorical_accuracy,
    "binary_accuracy": binary_accuracy,
    "mean_squared_error": mean_squared_error,
    "mean_absolute_error": mean_absolute_error,
    "top_k_categorical_accuracy": top_k_categorical_accuracy,
    "sparse_top_k_categorical_accuracy": sparse_top_k_categorical_accuracy,
}

# The kinds the engine computes during fit, and Keras's names for them (keras.metrics.get: the
# class names, their snake case, and the short aliases).
_CLASSES: dict[str, type] = {
    "mean_absolute_error": MeanAbsoluteError,
    "mean_squared_error": MeanSquaredError,
    "root_mean_squared_error": RootMeanSquaredError,
    "categorical_accuracy": CategoricalAccuracy,
    "sparse_categorical_accuracy": SparseCategoricalAccuracy,
    "binary_accuracy": BinaryAccuracy,
    "top_k_categorical_accuracy": TopKCategoricalAccuracy,
    "sparse_top_k_categorical_accuracy": SparseTopKCategoricalAccuracy,
}
_BY_NAME: dict[str, str] = {"mae": "mean_absolute_error", "MAE": "mean_absolute_error"}
_BY_NAME.update({"mse": "mean_squared_error", "MSE": "mean_squared_error"})
for _kind, _cls in _CLASSES.items():
    _BY_NAME[_kind] = _BY_NAME[_cls.__name__] = _kind


# The class argument each kind's MetricSpec::parameter holds, and its default (nn/metrics.h).
_PARAMETERS: dict[str, tuple[str, float]] = {
    "binary_accuracy": ("threshold", 0.5),
    "top_k_categorical_accuracy": ("k", 5),
    "sparse_top_k_categorical_accuracy": ("k", 5),
}


def _kind_of(metric: Any) -> tuple[str, str, Optional[float]]:
    """(kind, name, parameter) of one metric as compile takes it: a Metric object (with its k or
    threshold; None: the class's default), a Keras name, or one of Keras's metric functions;
    ValueError naming it otherwise."""
    if isinstance(metric, Metric) and metric._kind in _CLASSES:
        parameter = None
        if metric._kind in _PARAMETERS:
            argument, default = _PARAMETERS[metric._kind]
            value = metric._arguments()[argument]
            parameter = None if value == default else float(value)
        return metric._kind, metric.name, parameter
    if isinstance(metric, str):
        if metric.lower() in ("accuracy", "acc"):
            return "accuracy", metric, None
        if metric in _BY_NAME:
            return _BY_NAME[metric], metric, None
    elif callable(metric):
        for kind, fn in _FUNCTIONS.items():
            if metric is fn:
                return kind, fn.__name__, None
    raise ValueError(
        f"compile: metric {metric!r} is not supported (yet): crossover's engine computes "
        f"'accuracy', 'mae', 'mse', 'root_mean_squared_error', the accuracies and the top-k "
        f"accuracies (by their Keras names or keras.metrics classes), not Precision, Recall, AUC "
        f"or the others; {SEE_SUPPORTED}"
    )


def computed_in_python(metrics: Any) -> bool:
    """Whether compile's metrics hold one the engine has no kind for (a Metric subclass of the
    user's, or the user's own function): fit then steps in Python (keras/_python_step.py)."""
    if not isinstance(metrics, (list, tuple)):
        return False
    for metric in metrics:
        if isinstance(metric, Metric) and metric._is_users():
            return True
        if callable(metric) and not isinstance(metric, (Metric, type)):
            if not any(metric is f for f in _FUNCTIONS.values()):
                return True
    return False


def resolve(metrics: Any, loss: str) -> tuple[list[str], list[str], list[Optional[float]]]:
    """For a model with the library loss `loss`: the engine's metric names, the names the user
    gave them (Keras's history keys) and each one's k or threshold (None: the default), in order.
    The accuracy that goes with the loss is the engine's 'accuracy' (counted by the loss itself;
    a BinaryAccuracy with a threshold of its own is computed as a metric). ValueError for a
    metric it does not compute."""
    if metrics is None:
        return [], [], []
    if isinstance(metrics, (str, Metric)) or not isinstance(metrics, (list, tuple)):
        raise TypeError(
            f"compile: metrics must be a list, e.g. metrics=['accuracy'], got {metrics!r}"
        )
    engine = _ENGINE_ACCURACY[loss]
    kinds: list[str] = []
    names: list[str] = []
    parameters: list[Optional[float]] = []
    for metric in metrics:
        kind, name, parameter = _kind_of(metric)
        if kind == "accuracy" and loss == "mean_squared_error":
            raise ValueError(
                f"compile: metric {metric!r} with loss mean_squared_error is exact "
                f"equality in Keras, which crossover does not compute; it computes "
                f"categorical accuracy (argmax): pass metrics=['categorical_accuracy']"
            )
        if kind in ("accuracy", engine) and parameter is None:
            # The first is the one the loss counts; another computed as a metric of its own.
            kind = engine if "accuracy" in kinds else "accuracy"
        if name in names:
            raise ValueError(f"compile: metric name {name!r} is given twice: give each once")
        kinds.append(kind)
        names.append(name)
        parameters.append(parameter)
    return kinds, names, parameters


def get(identifier: Any) -> Any:
    """keras.metrics.get: the metric object for a Keras name (an object or function as is)."""
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _CLASSES[_BY_NAME[identifier]]()
    if isinstance(identifier, Metric) or callable(identifier):
        return identifier
    _kind_of(identifier)  # its error
    return None


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "keras.metrics",
        name,
        "MeanAbsoluteError, MeanSquaredError, RootMeanSquaredError, CategoricalAccuracy, "
        "SparseCategoricalAccuracy, BinaryAccuracy, TopKCategoricalAccuracy, "
        "SparseTopKCategoricalAccuracy and Mean",
    )


__all__ = ["Metric", "SparseCategoricalAccuracy", "CategoricalAccuracy", "BinaryAccuracy"]
__all__ += ["MeanSquaredError", "MeanAbsoluteError", "RootMeanSquaredError", "Mean"]
__all__ += ["TopKCategoricalAccuracy", "SparseTopKCategoricalAccuracy", "get"]
__all__ += ["top_k_categorical_accuracy", "sparse_top_k_categorical_accuracy"]
__all__ += ["sparse_categorical_accuracy", "categorical_accuracy", "binary_accuracy"]
__all__ += ["mean_squared_error", "mean_absolute_error", "mse", "mae"]
