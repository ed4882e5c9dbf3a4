"""crossover.keras: the tf.keras / Keras 3 names crossover runs (see docs/PYTHON.md).

from crossover import keras        # in place of: import keras
"""

from . import callbacks, layers, models, optimizers
from .layers import Input
from .models import History, Sequential

__all__ = ["callbacks", "layers", "models", "optimizers", "Input", "Sequential", "History"]
