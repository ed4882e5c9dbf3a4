"""The CPU floor the engine was compiled for, checked before its code is loaded; and what a CUDA
build says when NVIDIA's libraries it links are nowhere to be found.

crossover's C++ code is compiled for x86-64-v3 (AVX2, FMA, BMI1/2, F16C, MOVBE: Intel since
Haswell, 2013; AMD since Excavator, 2015; wider paths are chosen at run time). On an older CPU the
first such instruction would kill the process with SIGILL, and nothing would say why; this module
says it first, as an ImportError (the package) or one line and exit status 2 (the command)."""

import platform
import re
from typing import Iterable, List, Optional

# /proc/cpuinfo's names for x86-64-v3's features.
X86_64_V3 = ("avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "movbe")


def missing_features(cpuinfo: Optional[str] = None, machine: Optional[str] = None) -> List[str]:
    """The x86-64-v3 features this CPU lacks ([] where it has them all, or where it cannot tell:
    another OS with no /proc/cpuinfo, or another architecture, where the loader's own error comes
    first)."""
    machine = machine if machine is not None else platform.machine()
    if machine not in ("x86_64", "AMD64"):
        return []
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
                cpuinfo = f.read()
        except OSError:
            return []
    flags: Iterable[str] = ()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            flags = value.split()
            break
    else:
        return []
    have = set(flags)
    return [f for f in X86_64_V3 if f not in have]


def floor_message(missing: List[str]) -> str:
    return (
        f"crossover needs an x86-64-v3 CPU (AVX2 and FMA: Intel Haswell or AMD Excavator and "
        f"newer); this one lacks {', '.join(missing)} (/proc/cpuinfo), so its compiled engine "
        "cannot run here"
    )


def require_floor() -> None:
    """Raises ImportError, naming what is missing, on a CPU below the engine's floor."""
    missing = missing_features()
    if missing:
        raise ImportError(floor_message(missing))


_NVIDIA = re.compile(r"(lib(?:cublasLt|cublas|cudnn|cudart|nccl)\.so[.0-9]*)")


def nvidia_library_message(error: str) -> Optional[str]:
    """The ImportError's text for an engine built with CUDA (the crossover-cu13 wheel) that cannot
    load NVIDIA's cuBLAS or cuDNN, naming the library and where it was looked for; None when the
    loader's error is about something else."""
    found = _NVIDIA.search(error)
    if not found:
        return None
    return (
        f"crossover's CUDA build needs NVIDIA's {found.group(1)}, found neither in the "
        "site-packages/nvidia folders of the nvidia-cublas and nvidia-cudnn-cu13 packages nor on "
        "the system (the loader said: " + error.strip() + "). Install them with `pip install "
        "nvidia-cublas nvidia-cudnn-cu13` (this wheel's own dependencies, skipped by --no-deps), "
        "or CUDA 13's libraries on the system; the CPU build is `pip install crossover`"
    )
