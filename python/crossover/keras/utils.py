"""keras.utils: set_random_seed."""

import random
from typing import Any

import numpy as np

from .. import _seed
from ._args import unsupported_attribute


def set_random_seed(seed: int) -> None:
    """Keras's set_random_seed: Python's `random`, numpy's global generator and crossover's seed
    (initial weights, shuffle order and dropout of models compiled afterwards)."""
    value = _seed.check(seed, "set_random_seed")
    random.seed(value)
    np.random.seed(value % 2**32)
    _seed.set_seed(value)


def __getattr__(name: str) -> Any:
    raise unsupported_attribute("keras.utils", name, "set_random_seed")


__all__ = ["set_random_seed"]
