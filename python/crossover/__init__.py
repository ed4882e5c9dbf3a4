"""crossover: Keras's Sequential API on crossover's C++ training engine.

    import crossover as tf            # in place of: import tensorflow as tf
    model = tf.keras.Sequential([...])

See docs/PYTHON.md for what is supported.
"""

from importlib.metadata import PackageNotFoundError, version

from . import keras

try:
    __version__ = version("crossover")
except PackageNotFoundError:  # imported from a source tree
    __version__ = "unknown"

__all__ = ["keras", "__version__"]
