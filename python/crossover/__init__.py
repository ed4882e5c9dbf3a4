"""crossover: Keras's Sequential API on crossover's C++ training engine.

    import crossover as tf            # in place of: import tensorflow as tf
    model = tf.keras.Sequential([...])

See docs/PYTHON.md for what is supported.
"""

import os
from importlib.metadata import PackageNotFoundError, version
from typing import Any

# OpenMP's idle threads: a short spin, as the command sets from its preinit array
# (src/cli/openmp_env.cpp says why: libgomp's default spin takes a busy machine's cores from the
# thread doing the work; a SMALL epoch ran 100x slower). libgomp reads this when it is loaded,
# which is when crossover._core is first imported below, so it is set first. A value the user set
# is kept; where another package loaded libgomp earlier, its setting stays.
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = "2000"

from . import keras  # noqa: E402
from . import config, random  # noqa: E402  (api block: tf.config, tf.random)
from ._device import DeviceNotFoundError, device  # noqa: E402
from .keras._args import unsupported_attribute  # noqa: E402

try:
    __version__ = version("crossover")
except PackageNotFoundError:  # imported from a source tree
    __version__ = "unknown"

__all__ = ["keras", "__version__"]
__all__ += ["config", "random", "device", "DeviceNotFoundError"]

# TensorFlow names a Keras script reaches for next, and what crossover has instead (api block).
_NOT_TENSORFLOW = {
    "data": "tf.data pipelines: pass numpy arrays to fit",
    "function": "tf.function: the training step is compiled C++ already",
    "GradientTape": "custom training loops: use fit",
    "Variable": "tensors: crossover takes and returns numpy arrays",
    "constant": "tensors: crossover takes and returns numpy arrays",
    "convert_to_tensor": "tensors: crossover takes and returns numpy arrays",
    "nn": "tf.nn: name activations as strings ('relu')",
    "saved_model": "SavedModel: use model.save_weights",
}


def __getattr__(name: str) -> Any:
    what = "keras, device, config.list_physical_devices and random.set_seed"
    if name in _NOT_TENSORFLOW:
        what += f"; not {_NOT_TENSORFLOW[name]}"
    raise unsupported_attribute("", name, what)
