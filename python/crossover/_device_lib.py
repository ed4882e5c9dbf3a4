"""tensorflow.python.client.device_lib, TensorFlow's private module whose list_local_devices()
scripts call to see whether TensorFlow found a GPU. Served from tf.config.list_physical_devices
(the public API for it): the CPU and each CUDA device crossover can train on."""

from typing import Any

from ._device import list_physical_devices


class DeviceAttributes:
    """The fields of TensorFlow's DeviceAttributes that scripts print or test."""

    def __init__(self, index: int, device_type: str) -> None:
        self.name = f"/device:{device_type}:{index}"
        self.device_type = device_type
        # TensorFlow's figure for the CPU (256 MiB); crossover reserves no GPU memory up front.
        self.memory_limit = 268435456 if device_type == "CPU" else 0
        self.incarnation = 0
        self.physical_device_desc = "" if device_type == "CPU" else f"device: {index}"

    def __repr__(self) -> str:
        return (
            f'name: "{self.name}"\ndevice_type: "{self.device_type}"\n'
            f"memory_limit: {self.memory_limit}\nincarnation: {self.incarnation}\n"
            f'physical_device_desc: "{self.physical_device_desc}"\n'
        )


def list_local_devices(session_config: Any = None) -> list[DeviceAttributes]:
    """device_lib.list_local_devices: one entry per device crossover can train on."""
    return [
        DeviceAttributes(int(d.name.rsplit(":", 1)[1]), d.device_type)
        for d in list_physical_devices()
    ]


__all__ = ["list_local_devices"]


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    raise AttributeError(
        f"tensorflow.python.client.device_lib.{name} is not supported by crossover, which serves "
        f"this private module's list_local_devices; use the public tf.config"
    )
