"""keras.config's dtype policy (keras.mixed_precision's, under Keras 3's current names)."""

from typing import Any

from ._args import unsupported_attribute
from .backend import backend, epsilon, image_data_format, set_floatx, set_image_data_format
from .mixed_precision import dtype_policy, set_dtype_policy


def floatx() -> str:
    """The default float type: float32 (crossover's inputs, weights and activations)."""
    return "float32"


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "keras.config", name, "set_dtype_policy, dtype_policy, floatx, epsilon, image_data_format"
    )


__all__ = ["set_dtype_policy", "dtype_policy", "floatx", "set_floatx", "epsilon", "backend"]
__all__ += ["image_data_format", "set_image_data_format"]
