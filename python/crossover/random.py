"""crossover.random: tf.random.set_seed (the seed of models compiled afterwards)."""

from typing import Any

from . import _seed
from .keras._args import unsupported_attribute


def set_seed(seed: int) -> None:
    """tf.random.set_seed: models compiled from now on draw their initial weights, shuffle order
    and dropout masks from `seed`, so the same script gives bit-identical results."""
    _seed.set_seed(_seed.check(seed, "set_seed"))


def __getattr__(name: str) -> Any:
    raise unsupported_attribute("random", name, "set_seed (crossover draws no tensors in Python)")


__all__ = ["set_seed"]
