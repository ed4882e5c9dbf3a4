"""The versions: crossover's own (the package's), and the TensorFlow and Keras APIs it implements,
which `tf.__version__`, `tf.version.VERSION` and `keras.__version__` answer, so that scripts that
check them (`version.parse(tf.__version__) >= "2.8.0"`) run."""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version

TENSORFLOW_VERSION = "2.21.0"
KERAS_VERSION = "3.15.1"

try:
    CROSSOVER_VERSION = _distribution_version("crossover")
except PackageNotFoundError:  # imported from a source tree
    CROSSOVER_VERSION = "unknown"
