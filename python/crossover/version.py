"""tf.version: the TensorFlow version whose API crossover implements (crossover's own version is
crossover.__crossover_version__)."""

from ._versions import CROSSOVER_VERSION as _CROSSOVER_VERSION
from ._versions import TENSORFLOW_VERSION as _TENSORFLOW_VERSION

VERSION = _TENSORFLOW_VERSION
GIT_VERSION = f"crossover-{_CROSSOVER_VERSION}"
COMPILER_VERSION = "crossover"

__all__ = ["VERSION", "GIT_VERSION", "COMPILER_VERSION"]
