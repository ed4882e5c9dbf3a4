"""The seed that models compiled from now on draw from (initial weights, shuffle, dropout).

Set by keras.utils.set_random_seed and crossover.random.set_seed (tf.random.set_seed); 0 until
then, so an unseeded script is reproducible too (Keras's is not). Process-wide, as TensorFlow's
global seed."""

import operator

_seed = 0


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


def set_seed(seed: int) -> None:
    global _seed
    _seed = seed


def get() -> int:
    return _seed
