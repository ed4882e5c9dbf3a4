"""crossover.config: tf.config's device listing (see crossover.device)."""

from typing import Any

from ._device import PhysicalDevice, list_physical_devices
from .keras._args import unsupported_attribute


def __getattr__(name: str) -> Any:
    raise unsupported_attribute("config", name, "list_physical_devices")


__all__ = ["list_physical_devices", "PhysicalDevice"]
