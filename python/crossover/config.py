"""crossover.config: tf.config's device listing (see crossover.device)."""

from typing import Any

from . import _precision, _threads
from ._args import Namespace, unsupported_attribute
from ._device import PhysicalDevice, list_physical_devices


def _set_memory_growth(device: PhysicalDevice, enable: bool) -> None:
    """tf.config.experimental.set_memory_growth: accepted, with no effect (crossover allocates
    what the model needs on the device, not the whole memory up front)."""
    if not isinstance(device, PhysicalDevice) or device.device_type != "GPU":
        raise ValueError(
            f"set_memory_growth: expected a GPU from list_physical_devices('GPU'), got {device!r}"
        )


def _enable_op_determinism() -> None:
    """tf.config.experimental.enable_op_determinism: accepted; crossover's runs are already
    deterministic for a given seed and thread count (see crossover.random.set_seed)."""


# tf.config.experimental: what GPU-checking scripts call before training, and TF32 on a GPU.
experimental = Namespace(
    "config.experimental",
    enable_op_determinism=_enable_op_determinism,
    list_physical_devices=list_physical_devices,
    set_memory_growth=_set_memory_growth,
    enable_tensor_float_32_execution=_precision.enable_tensor_float_32_execution,
    tensor_float_32_execution_enabled=_precision.tensor_float_32_execution_enabled,
)


def _set_inter_op_parallelism_threads(num_threads: int) -> None:
    """tf.config.threading's: accepted, with no effect (crossover runs one op at a time, each on
    the intra-op threads)."""
    _threads._count(num_threads, "set_inter_op_parallelism_threads")


# tf.config.threading: the CPU thread count (see crossover/_threads.py).
threading = Namespace(
    "config.threading",
    set_intra_op_parallelism_threads=_threads.set_intra_op_parallelism_threads,
    get_intra_op_parallelism_threads=_threads.get_intra_op_parallelism_threads,
    set_inter_op_parallelism_threads=_set_inter_op_parallelism_threads,
    get_inter_op_parallelism_threads=lambda: 0,
)


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "config",
        name,
        "list_physical_devices, experimental.set_memory_growth (no effect), "
        "experimental.enable_tensor_float_32_execution and threading",
    )


__all__ = ["list_physical_devices", "PhysicalDevice", "experimental", "threading"]
