"""tf.random: set_seed (the seed of models compiled afterwards, and of the draws below), and
normal, uniform and truncated_normal tensors, drawn with numpy's generator: TensorFlow's
distributions and seeding rules, not TensorFlow's numbers.

As TensorFlow's: after set_seed(s), the draws of a script repeat from run to run; an op's own
`seed` gives a sequence of its own (the same op seed twice: two sequences that start alike);
without any seed (crossover's global seed is 0 until set) the draws still repeat, as
crossover's models do."""

from typing import Any, Optional

import numpy as np

from . import _seed, _tensor
from ._args import unsupported_attribute

_generators: dict[Any, np.random.Generator] = {}
_generation = [-1]


def set_seed(seed: int) -> None:
    """tf.random.set_seed: models compiled from now on draw their initial weights, shuffle order
    and dropout masks from `seed`, and the draws below restart from it, so the same script
    gives the same results."""
    _seed.set_seed(_seed.check(seed, "set_seed"))


def _generator(seed: Optional[int]) -> np.random.Generator:
    if _generation[0] != _seed.generation():
        _generators.clear()
        _generation[0] = _seed.generation()
    key = None if seed is None else int(seed)
    rng = _generators.get(key)
    if rng is None:
        entropy = [_seed.get()] if key is None else [_seed.get(), key & (2**64 - 1), 1]
        rng = _generators[key] = np.random.default_rng(entropy)
    return rng


def _float_dtype(dtype: Any, op: str) -> np.dtype:
    d = _tensor.as_dtype(dtype)
    if d.kind != "f":
        raise TypeError(f"random.{op}: dtype must be a floating-point type, got {d.name}")
    return d


def normal(
    shape: Any,
    mean: Any = 0.0,
    stddev: Any = 1.0,
    dtype: Any = _tensor.float32,
    seed: Optional[int] = None,
    name: Any = None,
) -> _tensor.Tensor:
    """tf.random.normal: values from a normal distribution of that mean and stddev."""
    d = _float_dtype(dtype, "normal")
    rng = _generator(seed)
    values = rng.standard_normal(_tensor._dims(shape))
    return _tensor.tensor((values * np.asarray(stddev) + np.asarray(mean)).astype(d))


def truncated_normal(
    shape: Any,
    mean: Any = 0.0,
    stddev: Any = 1.0,
    dtype: Any = _tensor.float32,
    seed: Optional[int] = None,
    name: Any = None,
) -> _tensor.Tensor:
    """tf.random.truncated_normal: a normal distribution's values within two standard
    deviations of the mean (those beyond are drawn again), as TensorFlow's."""
    d = _float_dtype(dtype, "truncated_normal")
    rng = _generator(seed)
    values = rng.standard_normal(_tensor._dims(shape))
    while True:
        outside = np.abs(values) > 2.0
        count = int(outside.sum())
        if not count:
            break
        values[outside] = rng.standard_normal(count)
    return _tensor.tensor((values * np.asarray(stddev) + np.asarray(mean)).astype(d))


def uniform(
    shape: Any,
    minval: Any = 0,
    maxval: Any = None,
    dtype: Any = _tensor.float32,
    seed: Optional[int] = None,
    name: Any = None,
) -> _tensor.Tensor:
    """tf.random.uniform: floats in [minval, maxval) (maxval 1 by default), or integers in
    [minval, maxval) for an integer dtype (which needs maxval, as TensorFlow's)."""
    d = _tensor.as_dtype(dtype)
    rng = _generator(seed)
    dims = _tensor._dims(shape)
    if d.kind in "iu":
        if maxval is None:
            raise ValueError(f"Must specify maxval for integer dtype {d.name}")
        return _tensor.tensor(rng.integers(int(minval), int(maxval), dims).astype(d))
    if d.kind != "f":
        raise TypeError(f"random.uniform: dtype {d.name} is not a float or integer type")
    high = 1.0 if maxval is None else maxval
    values = rng.random(dims)
    return _tensor.tensor((values * (np.asarray(high) - minval) + np.asarray(minval)).astype(d))


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "random", name, "set_seed, normal, uniform and truncated_normal (numpy's numbers)"
    )


__all__ = ["set_seed", "normal", "truncated_normal", "uniform"]
