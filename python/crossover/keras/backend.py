"""tf.keras.backend's get_value and set_value (Keras 3 keeps them for tf.keras scripts), for
what crossover gives as a variable: optimizer.learning_rate."""

from typing import Any

import numpy as np


def get_value(x: Any) -> Any:
    """The value as numpy (a float32 scalar for optimizer.learning_rate)."""
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)


def set_value(x: Any, value: Any) -> None:
    """x.assign(value): optimizer.learning_rate takes the new rate (also during fit, from a
    callback: the next epoch runs with it)."""
    if not hasattr(x, "assign"):
        raise TypeError(f"set_value: {x!r} is not a variable (optimizer.learning_rate is)")
    x.assign(value)


__all__ = ["get_value", "set_value"]
