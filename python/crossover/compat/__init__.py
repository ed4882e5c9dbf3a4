"""tf.compat: `tf.compat.v1`, TensorFlow 1's names that TensorFlow 2 keeps (the TensorFlow 1
notebooks start with `import tensorflow.compat.v1 as tf`). Their Keras (tf.compat.v1.keras is
tf.keras) runs on crossover; graphs and sessions do not."""

from typing import Any

from .._args import unsupported_attribute
from . import v1

__all__ = ["v1"]


def __getattr__(name: str) -> Any:
    raise unsupported_attribute("compat", name, "compat.v1 (its Keras)")
