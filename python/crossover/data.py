"""tf.data for in-memory arrays: Dataset.from_tensor_slices((x, y)), .batch, .shuffle,
.prefetch, .cache, .map, .take, .skip, iteration; fit, evaluate and predict take such a dataset
(its arrays, its batch size, and whether it is shuffled).

A Dataset here is a description over numpy arrays, not a pipeline: `map(f)` calls f on each
element (or each batch, after `batch`) when the dataset is first used, and keeps the results.
In fit, a shuffled dataset is shuffled anew each epoch by the engine (a full shuffle, whatever
the buffer size), an unshuffled one is taken in order."""

from typing import Any, Callable, Iterator, Optional

import numpy as np

from . import _tensor
from ._args import unsupported_attribute

AUTOTUNE = -1


class _Experimental:
    AUTOTUNE = AUTOTUNE


experimental = _Experimental()


def _as_tuple(element: Any) -> tuple[Any, ...]:
    return element if isinstance(element, tuple) else (element,)


class Dataset:
    """A finite dataset over numpy arrays (the first axis of each is the element axis)."""

    def __init__(
        self,
        arrays: tuple[np.ndarray, ...],
        single: bool,
        batch_size: Optional[int] = None,
        drop_remainder: bool = False,
        shuffled: bool = False,
        seed: Optional[int] = None,
    ) -> None:
        self._arrays = arrays
        self._single = single  # elements are arrays, not tuples
        self._batch_size = batch_size
        self._drop_remainder = drop_remainder
        self._shuffled = shuffled
        self._seed = seed
        self._infinite = False  # repeat() without a count: passes without end

    @staticmethod
    def from_tensor_slices(tensors: Any, name: Any = None) -> "Dataset":
        if isinstance(tensors, dict):
            raise ValueError(
                "Dataset.from_tensor_slices: a dict of features is not supported (yet); give "
                "an array or a tuple (x, y)"
            )
        single = not isinstance(tensors, tuple)  # TensorFlow's: a list is one tensor
        arrays = tuple(np.asarray(_tensor._plain(t)) for t in _as_tuple(tensors))
        if any(a.ndim == 0 for a in arrays):
            raise ValueError("Dataset.from_tensor_slices: each component needs a first axis")
        sizes = {len(a) for a in arrays}
        if len(sizes) != 1:
            raise ValueError(
                "Dataset.from_tensor_slices: all components must have the same size on their "
                f"first axis, got {[len(a) for a in arrays]}"
            )
        return Dataset(arrays, single)

    @staticmethod
    def from_tensors(tensors: Any, name: Any = None) -> "Dataset":
        single = not isinstance(tensors, tuple)
        arrays = tuple(np.asarray(_tensor._plain(t))[None] for t in _as_tuple(tensors))
        return Dataset(arrays, single)

    def _copy(self, **changes: Any) -> "Dataset":
        d = Dataset(
            self._arrays,
            self._single,
            self._batch_size,
            self._drop_remainder,
            self._shuffled,
            self._seed,
        )
        d._infinite = self._infinite
        d.__dict__.update({f"_{k}": v for k, v in changes.items()})
        return d

    # --- transformations ------------------------------------------------------------------
    def batch(
        self,
        batch_size: int,
        drop_remainder: bool = False,
        num_parallel_calls: Any = None,
        deterministic: Any = None,
        name: Any = None,
    ) -> "Dataset":
        if self._batch_size is not None:
            raise ValueError("Dataset.batch: batching a batched dataset is not supported (yet)")
        if int(batch_size) < 1:
            raise ValueError(f"Dataset.batch: batch_size must be positive, got {batch_size}")
        return self._copy(batch_size=int(batch_size), drop_remainder=bool(drop_remainder))

    def shuffle(
        self,
        buffer_size: int,
        seed: Optional[int] = None,
        reshuffle_each_iteration: bool = True,
        name: Any = None,
    ) -> "Dataset":
        if self._batch_size is not None:
            raise ValueError(
                "Dataset.shuffle after batch (shuffling whole batches) is not supported (yet): "
                "shuffle, then batch"
            )
        return self._copy(shuffled=True, seed=seed)

    def prefetch(self, buffer_size: Any = None, name: Any = None) -> "Dataset":
        return self

    def cache(self, filename: str = "", name: Any = None) -> "Dataset":
        return self

    def repeat(self, count: Optional[int] = None, name: Any = None) -> "Dataset":
        if count is None or count == -1:
            # Passes without end when iterated (take(n) reads as many as it needs); fit runs its
            # epochs over one pass of the data itself.
            return self._copy(infinite=True)
        idx = np.tile(np.arange(self._size()), int(count))
        return self._copy(arrays=tuple(a[idx] for a in self._arrays))

    def take(self, count: int, name: Any = None) -> "Dataset":
        if self._infinite and count >= 0:
            # The first `count` elements (batches) of the endless stream: the data's elements
            # in turn, pass after pass, batched across the passes' ends as TensorFlow's
            # repeat().batch() batches them.
            need, n = count * (self._batch_size or 1), self._size()
            idx = np.resize(np.arange(n), need) if n else np.arange(0)
            return self._copy(arrays=tuple(a[idx] for a in self._arrays), infinite=False)
        return self._slice(0, count)

    def skip(self, count: int, name: Any = None) -> "Dataset":
        return self._slice(count, None)

    def _slice(self, start: int, count: Optional[int]) -> "Dataset":
        unit = self._batch_size or 1
        first = start * unit
        end = None if count is None or count < 0 else first + count * unit
        return self._copy(arrays=tuple(a[first:end] for a in self._arrays))

    def map(
        self,
        map_func: Callable[..., Any],
        num_parallel_calls: Any = None,
        deterministic: Any = None,
        name: Any = None,
    ) -> "Dataset":
        """Calls map_func on each element (each batch, once batched) now, and keeps the results
        as the dataset's arrays."""
        parts: list[tuple[np.ndarray, ...]] = []
        single_out = None
        for element in self._elements(shuffle=False):
            out = map_func(*element) if not self._single else map_func(element[0])
            single_out = not isinstance(out, tuple)
            parts.append(tuple(np.asarray(_tensor._plain(o)) for o in _as_tuple(out)))
        if not parts:
            return self
        if self._batch_size is None:
            arrays = tuple(np.stack([p[i] for p in parts]) for i in range(len(parts[0])))
        else:
            arrays = tuple(np.concatenate([p[i] for p in parts]) for i in range(len(parts[0])))
        return self._copy(arrays=arrays, single=bool(single_out))

    # --- reading --------------------------------------------------------------------------
    def _size(self) -> int:
        return len(self._arrays[0])

    def _elements(self, shuffle: bool = True) -> Iterator[tuple[np.ndarray, ...]]:
        n = self._size()
        order = np.arange(n)
        if shuffle and self._shuffled:
            order = np.random.default_rng(self._seed).permutation(n)
        if self._batch_size is None:
            for i in order:
                yield tuple(a[i] for a in self._arrays)
            return
        b = self._batch_size
        stop = n - n % b if self._drop_remainder else n
        for start in range(0, stop, b):
            idx = order[start : start + b]
            yield tuple(a[idx] for a in self._arrays)

    def _stream(self) -> Iterator[tuple[np.ndarray, ...]]:
        """One pass of the elements; pass after pass for repeat() without a count."""
        while True:
            yield from self._elements()
            if not self._infinite or self._size() == 0:
                return

    def __iter__(self) -> Iterator[Any]:
        for element in self._stream():
            values = tuple(_tensor.tensor(v) for v in element)
            yield values[0] if self._single else values

    def as_numpy_iterator(self) -> Iterator[Any]:
        for element in self._stream():
            yield element[0] if self._single else element

    def __len__(self) -> int:
        n = self._size()
        if self._batch_size is None:
            return n
        return n // self._batch_size if self._drop_remainder else -(-n // self._batch_size)

    def cardinality(self) -> _tensor.Tensor:
        return _tensor.tensor(np.int64(len(self)))

    @property
    def element_spec(self) -> Any:
        batch = (None,) if self._batch_size else ()
        return tuple((*batch, *a.shape[1:]) for a in self._arrays)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise unsupported_attribute(
            "data.Dataset",
            name,
            "from_tensor_slices, batch, shuffle, prefetch, cache, map, repeat, take, skip and "
            "iteration over in-memory arrays",
        )

    # --- for fit / evaluate / predict ---------------------------------------------------
    def _for_fit(self, who: str) -> tuple[np.ndarray, Optional[np.ndarray], int, bool]:
        """(x, y or None, batch size, shuffled) for fit/evaluate/predict."""
        if self._batch_size is None:
            raise ValueError(
                f"{who}: the dataset is not batched: call .batch(batch_size) on it first (a "
                "Keras model takes batches)"
            )
        if len(self._arrays) > 3:
            raise ValueError(
                f"{who}: dataset elements of {len(self._arrays)} arrays: a Keras model takes "
                "x, (x, y) or (x, y, sample_weight)"
            )
        n = self._rows_for_fit()
        x = self._arrays[0][:n]
        y = self._arrays[1][:n] if len(self._arrays) > 1 else None
        return x, y, self._batch_size, self._shuffled

    def _rows_for_fit(self) -> int:
        n = self._size()
        if self._batch_size and self._drop_remainder and n % self._batch_size:
            n -= n % self._batch_size
        return n

    def _sample_weight_for_fit(self) -> Optional[np.ndarray]:
        """The third array of (x, y, sample_weight) elements (Keras's sample weights), or None."""
        if len(self._arrays) < 3:
            return None
        return self._arrays[2][: self._rows_for_fit()]


def __getattr__(name: str) -> Any:
    raise unsupported_attribute("data", name, "Dataset (in-memory arrays) and AUTOTUNE")


__all__ = ["Dataset", "AUTOTUNE", "experimental"]
