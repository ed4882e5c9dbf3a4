"""tf.distribute, as far as a script that trains Keras models needs it on one machine: a strategy
whose scope the model is made and compiled in. crossover trains a model on one device per
process (its ranks, `mpirun -n N`, are its data parallelism: docs/DISTRIBUTED.md), so a
MirroredStrategy here has one replica, the device its scope names (the first of `devices`, else
the one crossover.device or the default picks), and says so in `num_replicas_in_sync`; asking it
for several devices is refused rather than silently training on one. Custom training loops
(`strategy.run`, distributed datasets) are not supported."""

import contextlib
from typing import Any, Iterator, Optional, Sequence

from . import _device
from ._args import SEE_SUPPORTED, unsupported_attribute


class Strategy:
    """One replica on one device (None: the device crossover would pick anyway)."""

    def __init__(self, device: Optional[str] = None) -> None:
        self._device = device
        self.extended = None

    @property
    def num_replicas_in_sync(self) -> int:
        return 1

    @contextlib.contextmanager
    def scope(self) -> Iterator["Strategy"]:
        """Models made and compiled inside train on the strategy's device."""
        if self._device is None:
            yield self
            return
        with _device.device(self._device):
            yield self

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(
            f"{type(self).__name__}.{name} is not supported (yet): crossover's strategies open a "
            f"scope for Keras's compile and fit (custom training loops with strategy.run and "
            f"distributed datasets are not supported); {SEE_SUPPORTED}"
        )


class MirroredStrategy(Strategy):
    """tf.distribute.MirroredStrategy on one device (see the module's text)."""

    def __init__(self, devices: Optional[Sequence[str]] = None, cross_device_ops: Any = None):
        devices = list(devices) if devices is not None else []
        if len(devices) > 1:
            raise NotImplementedError(
                f"MirroredStrategy(devices={devices}): several devices in one process are not "
                "supported (yet): crossover trains on one device per process; run ranks with "
                f"`mpirun -n N` for data parallelism (docs/DISTRIBUTED.md); {SEE_SUPPORTED}"
            )
        super().__init__(devices[0] if devices else None)


class OneDeviceStrategy(Strategy):
    """tf.distribute.OneDeviceStrategy(device)."""

    def __init__(self, device: str) -> None:
        super().__init__(device)


_default = Strategy()


def get_strategy() -> Strategy:
    """The default strategy (one replica), as outside any strategy's scope in TensorFlow."""
    return _default


def has_strategy() -> bool:
    return False


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "distribute",
        name,
        "MirroredStrategy and OneDeviceStrategy (one replica), get_strategy and has_strategy",
    )


__all__ = ["MirroredStrategy", "OneDeviceStrategy", "Strategy", "get_strategy", "has_strategy"]
