"""keras.regularizers: Keras 3's regularizers that the engine runs, L1, L2 and L1L2 (and their
names 'l1', 'l2', 'l1_l2'), given as a Dense's or a convolution's kernel_regularizer or
bias_regularizer, a normalization layer's gamma_regularizer or beta_regularizer, or any layer's
activity_regularizer. The engine adds each one's penalty to the step's loss, in fit and in
evaluate (an activity regularizer's divided by the batch's size, as Keras 3 divides it), and its
gradient to the weight's before the optimizer, or to the layer output's in the backward pass
(src/nn/regularizers.h, the backends' `regularize`); the classes here carry the factors, compute
the penalty of an array (a model's `losses`) and serialize as Keras does. Another regularizer
(OrthogonalRegularizer, a function of one's own) is refused by the engine, naming the
argument."""

import math
from typing import Any, Optional

import numpy as np

from .. import _tensor
from .._args import unsupported_attribute


def _factor(value: Any, name: str) -> float:
    """Keras's validate_float_arg: a number >= 0."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float, np.number))
        or not (math.isfinite(float(value)) and float(value) >= 0)
    ):
        raise ValueError(
            f"Invalid value for argument {name}: expected a non-negative float."
            f"Received: {name}={value}"
        )
    return float(value)


class Regularizer:
    """The base class: __call__(x) is the penalty of a weight; get_config, from_config."""

    def __call__(self, x: Any) -> _tensor.Tensor:
        raise NotImplementedError

    def get_config(self) -> dict[str, Any]:
        raise NotImplementedError(f"{self} does not implement get_config()")

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Regularizer":
        return cls(**config)

    def _penalty(self, x: Any, l1: float, l2: float) -> _tensor.Tensor:
        """l1 sum(|x|) + l2 sum(x^2) in float32, as Keras's (and the engine's) arithmetic, with
        TensorFlow's ops: a GradientTape records them on a model's trainable variable (a Python
        step's compute_loss differentiates the penalties so)."""
        if not isinstance(x, _tensor.Tensor):
            x = np.asarray(x, dtype=np.float32)
        total = _tensor.convert_to_tensor(np.float32(0.0))
        if l1 != 0.0:
            term = _tensor.multiply(_tensor.reduce_sum(_tensor.abs(x)), np.float32(l1))
            total = _tensor.add(total, term)
        if l2 != 0.0:
            term = _tensor.multiply(_tensor.reduce_sum(_tensor.square(x)), np.float32(l2))
            total = _tensor.add(total, term)
        return total


class L1L2(Regularizer):
    """l1 sum(|x|) + l2 sum(x^2); both 0 by default (Keras's, so that L1L2(l2=0.1) has no l1)."""

    def __init__(self, l1: Any = 0.0, l2: Any = 0.0) -> None:
        self.l1 = _factor(0.0 if l1 is None else l1, "l1")
        self.l2 = _factor(0.0 if l2 is None else l2, "l2")

    def __call__(self, x: Any) -> _tensor.Tensor:
        return self._penalty(x, self.l1, self.l2)

    def get_config(self) -> dict[str, Any]:
        return {"l1": self.l1, "l2": self.l2}


class L1(Regularizer):
    """l1 sum(|x|), l1 0.01 by default."""

    def __init__(self, l1: Any = 0.01) -> None:
        self.l1 = _factor(0.01 if l1 is None else l1, "l1")

    def __call__(self, x: Any) -> _tensor.Tensor:
        return self._penalty(x, self.l1, 0.0)

    def get_config(self) -> dict[str, Any]:
        return {"l1": float(np.float32(self.l1))}  # Keras keeps it as a float32 tensor


class L2(Regularizer):
    """l2 sum(x^2), l2 0.01 by default."""

    def __init__(self, l2: Any = 0.01) -> None:
        self.l2 = _factor(0.01 if l2 is None else l2, "l2")

    def __call__(self, x: Any) -> _tensor.Tensor:
        return self._penalty(x, 0.0, self.l2)

    def get_config(self) -> dict[str, Any]:
        return {"l2": self.l2}


def _factors(regularizer: Regularizer) -> tuple[float, float]:
    """(l1, l2) of an L1, L2 or L1L2."""
    return float(getattr(regularizer, "l1", 0.0)), float(getattr(regularizer, "l2", 0.0))


l1 = L1
l2 = L2
l1_l2 = L1L2
_CLASSES = {"L1": L1, "L2": L2, "L1L2": L1L2, "l1": L1, "l2": L2, "l1_l2": L1L2}


def serialize(regularizer: Regularizer) -> dict[str, Any]:
    return {
        "module": "keras.regularizers",
        "class_name": type(regularizer).__name__,
        "config": regularizer.get_config(),
        "registered_name": None,
    }


def deserialize(config: Any, custom_objects: Any = None) -> Regularizer:
    if isinstance(config, str):
        return get(config)
    name = config.get("class_name") if isinstance(config, dict) else None
    cls = _CLASSES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise ValueError(
            f"keras.regularizers: cannot read {config!r}: crossover runs L1, L2 and L1L2"
        )
    return cls.from_config(dict(config.get("config") or {}))


def get(identifier: Any) -> Optional[Any]:
    """Keras's regularizers.get: None, a regularizer (or any callable, which a layer's engine
    then refuses by name), a name ('l2'), or a serialized one."""
    if identifier is None or isinstance(identifier, Regularizer):
        return identifier
    if isinstance(identifier, str):
        cls = _CLASSES.get(identifier)
        if cls is None:
            raise ValueError(
                f"Could not interpret regularizer identifier: {identifier} (crossover runs "
                "'l1', 'l2', 'l1_l2', L1, L2 and L1L2)"
            )
        return cls()
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if callable(identifier):
        return identifier
    raise ValueError(f"Could not interpret regularizer identifier: {identifier}")


__all__ = ["Regularizer", "L1", "L2", "L1L2", "l1", "l2", "l1_l2", "get", "serialize",
           "deserialize"]  # fmt: skip


def __getattr__(name: str) -> Any:
    what = "Regularizer, L1, L2, L1L2 (l1, l2, l1_l2), get, serialize, deserialize"
    if name in ("OrthogonalRegularizer", "orthogonal_regularizer"):
        what += "; OrthogonalRegularizer is not in the engine"
    raise unsupported_attribute("keras.regularizers", name, what)
