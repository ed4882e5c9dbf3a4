"""The global seed state that models draw their seed from (initial weights, shuffle, dropout).

Set by keras.utils.set_random_seed and crossover.random.set_seed (tf.random.set_seed); 0 until
then, so an unseeded script is reproducible too (Keras's is not). Process-wide, as TensorFlow's
global seed. Each model compiled draws the next seed of the sequence the global seed starts
(draw): the first is the global seed itself (so `set_random_seed(5)` then one model trains as
`crossover train --seed=5`), the next ones mix it with a counter, so that models made one after
another start from different weights, as Keras's do, and the whole script is reproducible."""

import operator

_seed = 0
_drawn = 0
_weights_drawn = 0  # weights drawn in Python (a custom layer's add_weight used on data)
_MASK = 2**64 - 1


def check(seed: object, who: str) -> int:
    """The seed as an int in [0, 2**64), or Keras's ValueError."""
    try:
        value = operator.index(seed)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(
            f"{who}: expected the seed to be an integer, received: seed={seed!r}"
        ) from None
    if not 0 <= value < 2**64:
        raise ValueError(f"{who}: the seed must be in [0, 2**64), received: seed={seed!r}")
    return value


_generation = 0  # set_seed calls so far: tf.random's draws restart at each (random.py)


def set_seed(seed: int) -> None:
    global _seed, _drawn, _weights_drawn, _generation
    _seed = seed
    _drawn = 0
    _weights_drawn = 0
    _generation += 1


def generation() -> int:
    return _generation


def get() -> int:
    return _seed


def _splitmix64(x: int) -> int:
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def draw() -> int:
    """The next model's seed: the global seed, then splitmix64 of (seed + n) for the n-th next."""
    global _drawn
    n = _drawn
    _drawn += 1
    return _seed if n == 0 else _splitmix64((_seed + n * 0x9E3779B97F4A7C15) & _MASK)


def draw_for_weight() -> int:
    """The seed of the next weight a custom layer draws in Python (add_weight's initializer, its
    layer called on data): a sequence of its own from the global seed, so that eager calls leave
    the models' seeds (draw) as they were."""
    global _weights_drawn
    _weights_drawn += 1
    return _splitmix64(((_seed ^ 0x5EED5EED5EED5EED) + _weights_drawn * 0x9E3779B97F4A7C15) & _MASK)
