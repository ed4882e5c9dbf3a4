"""keras.random: SeedGenerator, dropout, normal and uniform (the last two on data only). On a
symbolic tensor (a custom layer's call(), traced: keras/_trace.py) dropout is the engine's
Dropout layer, drawn from the model's seed in fit and the identity in evaluate and predict, as
Keras's layers are; on data, numpy's."""

from typing import Any, Optional

import numpy as np

from .. import _tensor
from .._args import unsupported_attribute
from . import _trace


class SeedGenerator:
    """keras.random.SeedGenerator(seed): the seed of the draws made with it. In a traced model
    the engine draws from the model's seed (compile) instead."""

    def __init__(
        self, seed: Optional[int] = None, name: Optional[str] = None, **kwargs: Any
    ) -> None:
        self.seed = seed
        self.name = name
        self._rng = np.random.default_rng(seed)

    def next(self, ordered: bool = True) -> Any:
        return self._rng.integers(0, 2**31 - 1, size=2)


def dropout(inputs: Any, rate: float, noise_shape: Any = None, seed: Any = None) -> Any:
    """Keras's: each value zeroed with probability rate, the rest scaled by 1 / (1 - rate)."""
    if noise_shape is not None:
        raise _trace.not_supported("keras.random.dropout with noise_shape")
    if _trace.symbolic(inputs):
        return _trace.dropout(inputs, rate)
    x = np.asarray(_tensor._plain(inputs), dtype=np.float32)
    rng = seed._rng if isinstance(seed, SeedGenerator) else np.random.default_rng(seed)
    keep = rng.random(x.shape) >= rate
    return _tensor.tensor(np.where(keep, x / (1.0 - rate), 0.0).astype(np.float32))


def _rng(seed: Any) -> np.random.Generator:
    return seed._rng if isinstance(seed, SeedGenerator) else np.random.default_rng(seed)


def _values(draw: Any, shape: Any, dtype: Any, what: str) -> Any:
    if _trace.symbolic(shape) or (isinstance(shape, (list, tuple)) and _trace.symbolic(*shape)):
        raise _trace.not_supported(f"keras.random.{what} of a symbolic shape")
    dims = tuple(int(d) for d in np.reshape(np.asarray(_tensor._plain(shape)), -1))
    dtype = _tensor.as_dtype(dtype or "float32")
    return _tensor.tensor(np.asarray(draw(dims), dtype=np.float64).astype(dtype))


def normal(shape: Any, mean: float = 0.0, stddev: float = 1.0, dtype: Any = None,
           seed: Any = None) -> Any:  # fmt: skip
    """Keras's: values from a normal distribution, on data (numpy's generator: Keras's own
    random numbers cannot be reproduced; a SeedGenerator or an int seed makes them repeatable)."""
    return _values(lambda d: _rng(seed).normal(mean, stddev, d), shape, dtype, "normal")


def uniform(shape: Any, minval: float = 0.0, maxval: float = 1.0, dtype: Any = None,
            seed: Any = None) -> Any:  # fmt: skip
    """Keras's: values from a uniform distribution in [minval, maxval), on data (as normal)."""
    return _values(lambda d: _rng(seed).uniform(minval, maxval, d), shape, dtype, "uniform")


def __getattr__(name: str) -> Any:
    raise unsupported_attribute("keras.random", name, "SeedGenerator, dropout, normal, uniform")


__all__ = ["SeedGenerator", "dropout", "normal", "uniform"]
