"""keras.config's dtype policy (keras.mixed_precision's, under Keras 3's current names)."""

from typing import Any

from .._args import unsupported_attribute
from .backend import backend, epsilon, image_data_format, set_floatx, set_image_data_format
from .mixed_precision import dtype_policy, set_dtype_policy


def floatx() -> str:
    """The default float type: float32 (crossover's inputs, weights and activations)."""
    return "float32"


# Keras's traceback filtering hides its own frames from errors; crossover's errors come from its
# own code, shown as Python shows them. The switch is kept (Keras's default: on) and changes
# nothing else.
_traceback_filtering = True


def enable_traceback_filtering() -> None:
    global _traceback_filtering
    _traceback_filtering = True


def disable_traceback_filtering() -> None:
    global _traceback_filtering
    _traceback_filtering = False


def is_traceback_filtering_enabled() -> bool:
    return _traceback_filtering


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "keras.config", name, "set_dtype_policy, dtype_policy, floatx, epsilon, image_data_format"
    )


__all__ = ["set_dtype_policy", "dtype_policy", "floatx", "set_floatx", "epsilon", "backend"]
__all__ += ["image_data_format", "set_image_data_format"]
__all__ += [
    "enable_traceback_filtering",
    "disable_traceback_filtering",
    "is_traceback_filtering_enabled",
]
