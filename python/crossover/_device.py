"""crossover.device (tf.device) and crossover.config.list_physical_devices (tf.config).

A scope names the device that models compiled inside it train on. Names as TensorFlow and
PyTorch write them ('/cpu:0', '/GPU:0', '/device:GPU:1', 'gpu', 'cuda:0', 'cpu') become the
library's ('cpu', 'cuda:N'). Unlike TensorFlow there is no soft placement: a GPU scope on a
machine without that GPU raises DeviceNotFoundError when it is entered, since a script that asks
for the GPU is timing the GPU."""

import contextlib
import os
import re
import sys
import threading
from typing import Iterator, Optional

from . import _core

_NAME = re.compile(
    r"^(?:/?(?:device:)?(?P<tf>cpu|gpu)(?::(?P<tf_n>\d+))?|(?P<torch>cuda)(?::(?P<torch_n>\d+))?)$",
    re.IGNORECASE,
)


class DeviceNotFoundError(RuntimeError):
    """The named device is not on this machine (or this build has no CUDA backend)."""


def library_device(name: str) -> str:
    """'cpu' or 'cuda:N' for a TensorFlow / PyTorch device name; ValueError for anything else."""
    if not isinstance(name, str):
        raise TypeError(f"device: the name must be a string such as '/gpu:0', got {name!r}")
    m = _NAME.match(name.strip())
    if m is None:
        raise ValueError(
            f"device: unknown device name {name!r}: expected '/cpu:0', '/gpu:N', "
            f"'/device:GPU:N', 'cpu', 'gpu', 'cuda' or 'cuda:N'"
        )
    kind = (m.group("tf") or m.group("torch")).lower()
    ordinal = int(m.group("tf_n") or m.group("torch_n") or 0)
    if kind == "cpu":
        if ordinal != 0:
            raise ValueError(f"device: {name!r}: crossover's CPU device is /cpu:0 (all cores)")
        return "cpu"
    return f"cuda:{ordinal}"


def check_available(name: str, device: str) -> None:
    """DeviceNotFoundError when `device` ('cuda:N') cannot train here, with the library's reason."""
    if device == "cpu":
        return
    ordinal = int(device.split(":")[1])
    gpus = _core.cuda_devices()
    if ordinal < len(gpus):
        return
    reason = _core.cuda_unavailable_reason(ordinal) or f"{len(gpus)} CUDA devices found"
    raise DeviceNotFoundError(
        f"device {name!r} ({device}): {reason}. crossover does not fall back to the CPU "
        f"(no soft placement): use '/cpu:0', or see `crossover devices` for this machine's devices"
    )


_said_no_gpu = False  # the CPU-fallback line is said once per process


def default() -> str:
    """Where a model trains outside any device scope.

    As TensorFlow places it: the first GPU when this build has the CUDA backend and a GPU is
    usable here; else the CPU, and a build with the CUDA backend says so in one line on stderr
    (once per process) with the library's reason. CROSSOVER_DEVICE (any name tf.device takes)
    chooses instead, and is held to it as a scope is (DeviceNotFoundError where it is not here)."""
    global _said_no_gpu
    chosen = os.environ.get("CROSSOVER_DEVICE", "").strip()
    if chosen:
        try:
            resolved = library_device(chosen)
        except ValueError as e:
            raise ValueError(f"CROSSOVER_DEVICE: {e}") from None
        check_available(f"CROSSOVER_DEVICE={chosen}", resolved)
        return resolved
    if not _core.cuda_built():
        return "cpu"
    if _core.cuda_devices():
        return "cuda:0"
    if not _said_no_gpu:
        _said_no_gpu = True
        reason = _core.cuda_unavailable_reason(0) or "no CUDA device found"
        print(
            f"crossover: no usable GPU ({reason}); training on the CPU "
            f"(CROSSOVER_DEVICE=cpu chooses it without this line)",
            file=sys.stderr,
        )
    return "cpu"


_scopes = threading.local()  # per thread, as tf.device


def _stack() -> list[str]:
    if not hasattr(_scopes, "stack"):
        _scopes.stack = []
    return _scopes.stack


def current() -> Optional[str]:
    """The library's name of the innermost device scope of this thread, or None outside any."""
    stack = _stack()
    return stack[-1] if stack else None


@contextlib.contextmanager
def device(device_name: str) -> Iterator[None]:
    """tf.device: models compiled inside the block train on this device.

        with crossover.device('/gpu:0'):
            model.compile(...)
            model.fit(...)

    Nestable; restored on exit, also on an exception; per thread. Raises ValueError for a name it
    does not know and DeviceNotFoundError (when entered) for a device this machine lacks."""
    resolved = library_device(device_name)
    check_available(device_name, resolved)
    stack = _stack()
    stack.append(resolved)
    try:
        yield
    finally:
        stack.pop()


class PhysicalDevice:
    """tf.config.PhysicalDevice: `.name` ('/physical_device:GPU:0') and `.device_type` ('GPU')."""

    def __init__(self, name: str, device_type: str) -> None:
        self.name = name
        self.device_type = device_type

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PhysicalDevice) and (self.name, self.device_type) == (
            other.name,
            other.device_type,
        )

    def __hash__(self) -> int:
        return hash((self.name, self.device_type))

    def __repr__(self) -> str:
        return f"PhysicalDevice(name='{self.name}', device_type='{self.device_type}')"


def list_physical_devices(device_type: Optional[str] = None) -> list[PhysicalDevice]:
    """tf.config.list_physical_devices: the CPU and each CUDA device crossover can train on."""
    cpus = [PhysicalDevice("/physical_device:CPU:0", "CPU")]
    gpus = [
        PhysicalDevice(f"/physical_device:GPU:{i}", "GPU") for i in range(len(_core.cuda_devices()))
    ]
    if device_type is None:
        return cpus + gpus
    kind = str(device_type).upper()
    if kind == "CPU":
        return cpus
    if kind == "GPU":
        return gpus
    return []  # TensorFlow's answer for a type it has none of ('TPU')
