"""How many CPU threads models compiled from now on train with.

By default (0) a model's first fit (or evaluate) measures the count that trains it fastest on
this machine, as `crossover train --threads 0` does, reusing the CLI's saved choice
(perf::cpu_threads_for_model). tf.config.threading.set_intra_op_parallelism_threads(n) or the
environment variable CROSSOVER_THREADS=n pins a count (the function wins; 0 measures)."""

import operator
import os
from typing import Optional

_set: Optional[int] = None  # set_intra_op_parallelism_threads's value, None until called


def _count(value: object, who: str) -> int:
    try:
        n = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"{who}: expected a whole number of threads, got {value!r}") from None
    if n < 0:
        raise ValueError(f"{who}: the number of threads must be 0 (measured) or positive, got {n}")
    return n


def set_intra_op_parallelism_threads(num_threads: int) -> None:
    """tf.config.threading's: the CPU thread count for models compiled from now on; 0 lets
    crossover measure the fastest count at the first fit (the default)."""
    global _set
    _set = _count(num_threads, "set_intra_op_parallelism_threads")


def get_intra_op_parallelism_threads() -> int:
    """The count set (0: measured at the first fit)."""
    return requested()


def requested() -> int:
    """The count a model compiled now asks for: the function's, else $CROSSOVER_THREADS, else 0."""
    if _set is not None:
        return _set
    env = os.environ.get("CROSSOVER_THREADS", "").strip()
    if not env:
        return 0
    try:
        return _count(int(env), "CROSSOVER_THREADS")
    except ValueError as e:
        raise ValueError(
            f"CROSSOVER_THREADS={env!r}: expected 0 (measure the fastest count) or a positive "
            f"number of threads ({e})"
        ) from None
