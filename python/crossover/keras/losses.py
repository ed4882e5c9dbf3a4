"""keras.losses: the losses crossover's engine computes, as objects or names.

Each class maps to the library's loss name; arguments the engine does not run (from_logits=True,
label_smoothing, ignore_class, ...) are refused by name: the engine takes probabilities (a
softmax or sigmoid output), which is Keras's from_logits=False."""

from typing import Any, Optional

from ._args import reject_unknown, reject_unsupported, unsupported_attribute

# Keras's names of each loss (function names and aliases) -> the library's name.
_NAMES = {
    "sparse_categorical_crossentropy": "sparse_categorical_crossentropy",
    "categorical_crossentropy": "categorical_crossentropy",
    "binary_crossentropy": "binary_crossentropy",
    "mean_squared_error": "mean_squared_error",
    "mse": "mean_squared_error",
    "MSE": "mean_squared_error",
}


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
        reject_unknown(owner, kwargs)
        if reduction not in ("sum_over_batch_size", "auto"):
            reject_unsupported(owner, reduction=(reduction, "sum_over_batch_size"))
        if dtype is not None and str(getattr(dtype, "name", dtype)) != "float32":
            raise ValueError(
                f"{owner}: dtype {dtype!r} is not supported: crossover computes in float32"
            )
        self.name = name or self._library_name
        self.reduction = "sum_over_batch_size"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"{type(self).__name__}: crossover computes losses inside fit/evaluate only; pass the "
            f"object to compile(loss=...)"
        )

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "reduction": self.reduction}

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
        owner = type(self).__name__
        reject_unsupported(
            owner,
            from_logits=(bool(from_logits), False),
            label_smoothing=(float(label_smoothing), 0.0),
            axis=(axis, -1),
        )
        self.from_logits = False


class SparseCategoricalCrossentropy(Loss):
    _library_name = "sparse_categorical_crossentropy"

    def __init__(
        self, from_logits: bool = False, ignore_class: Optional[int] = None, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        reject_unsupported(
            "SparseCategoricalCrossentropy",
            from_logits=(bool(from_logits), False),
            ignore_class=(ignore_class, None),
        )
        self.from_logits = False


class CategoricalCrossentropy(_Crossentropy):
    _library_name = "categorical_crossentropy"


class BinaryCrossentropy(_Crossentropy):
    _library_name = "binary_crossentropy"


class MeanSquaredError(Loss):
    _library_name = "mean_squared_error"


def library_name(loss: Any) -> str:
    """The library's loss name for a Keras loss name or object; ValueError/TypeError otherwise."""
    if isinstance(loss, Loss):
        return loss._library_name
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


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "keras.losses",
        name,
        "SparseCategoricalCrossentropy, CategoricalCrossentropy, BinaryCrossentropy and "
        "MeanSquaredError (objects, or their names as strings in compile)",
    )


__all__ = [
    "Loss",
    "SparseCategoricalCrossentropy",
    "CategoricalCrossentropy",
    "BinaryCrossentropy",
    "MeanSquaredError",
]
