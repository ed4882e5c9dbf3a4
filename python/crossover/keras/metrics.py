"""keras.metrics: the accuracy crossover's engine computes, as objects or names.

The engine counts one accuracy, the one that goes with the loss (Keras's rule for 'accuracy'):
sparse_categorical_accuracy with sparse_categorical_crossentropy, categorical_accuracy with
categorical_crossentropy, binary_accuracy (threshold 0.5) with binary_crossentropy; with
mean_squared_error it counts categorical_accuracy (argmax against argmax), which Keras's
'accuracy' is not (exact equality), so there only CategoricalAccuracy is taken. Any other metric
is refused by name."""

from typing import Any, Optional

from ._args import reject_unknown, reject_unsupported, unsupported_attribute

# Which accuracy the engine counts for each loss.
_ENGINE_ACCURACY = {
    "sparse_categorical_crossentropy": "sparse_categorical_accuracy",
    "categorical_crossentropy": "categorical_accuracy",
    "binary_crossentropy": "binary_accuracy",
    "mean_squared_error": "categorical_accuracy",
}


class Metric:
    _kind: str

    def __init__(self, name: Optional[str] = None, dtype: Any = None, **kwargs: Any) -> None:
        reject_unknown(type(self).__name__, kwargs)
        self.name = name or self._kind
        self.dtype = dtype

    def __repr__(self) -> str:
        return f"<{type(self).__name__} name={self.name}>"


class SparseCategoricalAccuracy(Metric):
    _kind = "sparse_categorical_accuracy"


class CategoricalAccuracy(Metric):
    _kind = "categorical_accuracy"


class BinaryAccuracy(Metric):
    _kind = "binary_accuracy"

    def __init__(self, name: Optional[str] = None, dtype: Any = None, threshold: float = 0.5):
        super().__init__(name=name, dtype=dtype)
        reject_unsupported("BinaryAccuracy", threshold=(float(threshold), 0.5))


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
                f"compile: metric {name!r} is not supported: crossover computes only "
                f"'accuracy' (here {engine})"
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
