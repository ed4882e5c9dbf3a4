"""crossover.keras: the tf.keras / Keras 3 names crossover runs (see help(crossover), or
`python -m crossover --supported`).

from crossover import keras        # in place of: import keras
"""

from typing import Any

from .._args import unsupported_attribute
from . import activations, backend, callbacks, initializers, layers, models, optimizers
from . import regularizers  # L1, L2, L1L2: a layer's kernel_regularizer, bias_regularizer
from . import datasets, losses, metrics, ops, utils  # api block
from . import random  # SeedGenerator, dropout (custom layers: keras/_trace.py)
from . import config, mixed_precision  # dtype policies
from . import saving  # .keras archives: saving.load_model, saving.save_model
from . import preprocessing  # preprocessing.image: ImageDataGenerator (legacy augmentation)
from . import mixed_precision as dtype_policies  # keras.dtype_policies: DTypePolicy, get
from .layers import Input, Variable
from .mixed_precision import DTypePolicy
from .models import History, Model, Sequential
from .._versions import KERAS_VERSION as __version__


def version() -> str:
    """keras.version(): the Keras version whose API crossover implements."""
    return __version__


__all__ = ["__version__", "version"]
__all__ += [
    "activations",
    "backend",
    "callbacks",
    "initializers",
    "regularizers",
    "layers",
    "models",
    "optimizers",
    "Input",
    "Sequential",
    "Model",
]
__all__ += ["History", "Variable"]
__all__ += ["datasets", "losses", "metrics", "ops", "utils"]
__all__ += ["config", "mixed_precision", "dtype_policies", "DTypePolicy"]
__all__ += ["saving", "random", "preprocessing"]


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "keras",
        name,
        "Sequential and functional models (layers, models, optimizers, callbacks, initializers, "
        "losses, metrics, datasets, utils, mixed_precision, config, saving, preprocessing)",
    )
