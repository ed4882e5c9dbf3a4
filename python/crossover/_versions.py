"""The versions: crossover's own (the package's), and the TensorFlow and Keras APIs it implements,
which `tf.__version__`, `tf.version.VERSION` and `keras.__version__` answer, so that scripts that
check them (`version.parse(tf.__version__) >= "2.8.0"`) run."""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version

TENSORFLOW_VERSION = "2.21.0"
KERAS_VERSION = "3.15.1"

try:  # the build tree (build/python): python/CMakeLists.txt writes project()'s VERSION there
    from ._build_version import VERSION as CROSSOVER_VERSION
except ImportError:
    try:  # an installed package: its metadata
        CROSSOVER_VERSION = _distribution_version("crossover")
    except PackageNotFoundError:  # imported from the source tree itself
        CROSSOVER_VERSION = "unknown"
