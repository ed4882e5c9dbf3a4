"""keras.metrics: the accuracy crossover's engine computes, as objects or names.

The engine counts one accuracy, the one that goes with the loss (Keras's rule for 'accuracy'):
sparse_categorical_accuracy with sparse_categorical_crossentropy, categorical_accuracy with
categorical_crossentropy, binary_accuracy (threshold 0.5) with binary_crossentropy; with
mean_squared_error it counts categorical_accuracy (argmax against argmax), which Keras's
'accuracy' is not (exact equality), so there only CategoricalAccuracy is taken. Any other metric
is refused by name."""

from typing import Any, Optional

import numpy as np

from .. import _tensor
from . import losses as _losses
from ._args import SEE_SUPPORTED, reject_unknown, reject_unsupported, unsupported_attribute


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


mean_squared_error = mse = _losses.mean_squared_error
mean_absolute_error = mae = _losses.mean_absolute_error

# Which accuracy the engine counts for each loss.
_ENGINE_ACCURACY = {
    "sparse_categorical_crossentropy": "sparse_categorical_accuracy",
    "categorical_crossentropy": "categorical_accuracy",
    "binary_crossentropy": "binary_accuracy",
    "mean_squared_error": "categorical_accuracy",
}


class Metric:
    """A Keras metric object: compile takes the accuracies (the engine counts them during fit);
    any metric also works on arrays as in Keras: update_state(y_true, y_pred), result(),
    reset_state(), or called as m(y_true, y_pred) (update, then result), on numpy in float32."""

    _kind: str

    def __init__(self, name: Optional[str] = None, dtype: Any = None, **kwargs: Any) -> None:
        reject_unknown(type(self).__name__, kwargs)
        self.name = name or self._kind
        self.dtype = dtype
        self.reset_state()

    def _values(self, y_true: Any, y_pred: Any) -> np.ndarray:
        return _plain(_FUNCTIONS[self._kind](y_true, y_pred)).astype(np.float32)

    def reset_state(self) -> None:
        self._total = np.float32(0)
        self._count = np.float32(0)

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


class SparseCategoricalAccuracy(Metric):
    _kind = "sparse_categorical_accuracy"


class CategoricalAccuracy(Metric):
    _kind = "categorical_accuracy"


class BinaryAccuracy(Metric):
    _kind = "binary_accuracy"

    def __init__(self, name: Optional[str] = None, dtype: Any = None, threshold: float = 0.5):
        reject_unsupported("BinaryAccuracy", threshold=(float(threshold), 0.5))
        super().__init__(name=name, dtype=dtype)


class MeanSquaredError(Metric):
    """On arrays only: the engine does not compute it during fit (compile refuses it)."""

    _kind = "mean_squared_error"


class MeanAbsoluteError(Metric):
    """On arrays only: the engine does not compute it during fit (compile refuses it)."""

    _kind = "mean_absolute_error"


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
}


def resolve(metrics: Any, loss: str) -> list[str]:
    """The names the user gave (Keras's history keys) for the metrics of a model with the library
    loss `loss`: [] or [name]. ValueError for a metric the engine does not compute."""
    if metrics is None:
        return []
    if isinstance(metrics, (str, Metric)) or not isinstance(metrics, (list, tuple)):
        raise TypeError(
            f"compile: metrics must be a list, e.g. metrics=['accuracy'], got {metrics!r}"
        )
    engine = _ENGINE_ACCURACY[loss]
    names: list[str] = []
    for metric in metrics:
        if isinstance(metric, Metric):
            kind, name = metric._kind, metric.name
        elif isinstance(metric, str):
            if metric in ("accuracy", "acc"):
                if loss == "mean_squared_error":
                    raise ValueError(
                        f"compile: metric {metric!r} with loss mean_squared_error is exact "
                        f"equality in Keras, which crossover does not compute; it computes "
                        f"categorical accuracy (argmax): pass metrics=['categorical_accuracy']"
                    )
                kind, name = engine, metric
            else:
                kind, name = metric, metric
        else:
            raise ValueError(
                f"compile: metric {metric!r} is not supported: crossover computes only the "
                f"accuracy that goes with the loss ('accuracy')"
            )
        if kind not in _ENGINE_ACCURACY.values():
            raise ValueError(
                f"compile: metric {name!r} is not supported (yet): crossover's engine computes "
                f"only 'accuracy' (here {engine}) during fit; {SEE_SUPPORTED}"
            )
        if kind != engine:
            raise ValueError(
                f"compile: metric {name!r} ({kind}) does not go with loss {loss}: crossover "
                f"computes {engine} there ('accuracy')"
            )
        if names:
            raise ValueError(
                f"compile: metrics {names[0]!r} and {name!r} are the same accuracy: give it once"
            )
        names.append(name)
    return names


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "keras.metrics",
        name,
        "SparseCategoricalAccuracy, CategoricalAccuracy and BinaryAccuracy (the accuracy that "
        "goes with the loss)",
    )


__all__ = ["Metric", "SparseCategoricalAccuracy", "CategoricalAccuracy", "BinaryAccuracy"]
__all__ += ["MeanSquaredError", "MeanAbsoluteError", "Mean"]
__all__ += ["sparse_categorical_accuracy", "categorical_accuracy", "binary_accuracy"]
__all__ += ["mean_squared_error", "mean_absolute_error", "mse", "mae"]
