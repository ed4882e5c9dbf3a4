"""keras.utils: set_random_seed, to_categorical, normalize, plot_model and PyDataset (Sequence)."""

import itertools
import os
import random
import sys
import warnings
from typing import Any, Iterator, Optional

import numpy as np

from .. import _seed
from .._args import unsupported_attribute


def set_random_seed(seed: int) -> None:
    """Keras's set_random_seed: Python's `random`, numpy's global generator and crossover's seed
    (initial weights, shuffle order and dropout of models compiled afterwards)."""
    value = _seed.check(seed, "set_random_seed")
    random.seed(value)
    np.random.seed(value % 2**32)
    _seed.set_seed(value)


def to_categorical(x: Any, num_classes: Optional[int] = None) -> Any:
    """Keras's to_categorical: class indices (..., or (..., 1)) to one-hot rows of `num_classes`
    (max + 1 when not given) along a new last axis: float64 numpy from an array or list (Keras's
    numpy branch), float32 from a tensor (Keras's one_hot branch)."""
    from .. import _tensor

    if isinstance(x, _tensor.Tensor):
        if x.ndim > 1 and x.shape[-1] == 1:
            x = x.reshape(x.shape[:-1])
        if num_classes is None:
            raise ValueError("to_categorical: give num_classes for a tensor")
        return _tensor.one_hot(np.asarray(x).astype(np.int64), num_classes)
    a = np.array(x, dtype="int64")
    input_shape = a.shape
    if input_shape and input_shape[-1] == 1 and len(input_shape) > 1:
        input_shape = tuple(input_shape[:-1])
    a = a.reshape(-1)
    if not num_classes:
        num_classes = int(np.max(a)) + 1
    categorical = np.zeros((a.shape[0], num_classes))
    categorical[np.arange(a.shape[0]), a] = 1
    return np.reshape(categorical, input_shape + (num_classes,))


def normalize(x: Any, axis: int = -1, order: int = 2) -> Any:
    """Keras's normalize: x divided by its `order`-norm along `axis` (a zero norm left as 1)."""
    a = np.asarray(x)
    norm = np.atleast_1d(np.linalg.norm(a, order, axis))
    norm[norm == 0] = 1
    return a / np.expand_dims(norm, axis or -1)


def plot_model(
    model: Any,
    to_file: str = "model.png",
    show_shapes: bool = False,
    show_dtype: bool = False,
    show_layer_names: bool = False,
    rankdir: str = "TB",
    expand_nested: bool = False,
    dpi: int = 200,
    show_layer_activations: bool = False,
    show_trainable: bool = False,
    **kwargs: Any,
) -> Any:
    """Keras's plot_model through pydot and Graphviz: one box per layer, top to bottom, written
    to `to_file` (its suffix is the format). Without pydot or Graphviz's `dot`, one line on
    stderr says so and nothing is written (Keras raises ImportError there; a script goes on)."""
    try:
        import pydot  # type: ignore[import-not-found]
    except ImportError:
        pydot = None
    if pydot is None:
        print(
            "plot_model: nothing drawn: you must install pydot (`pip install pydot`) and "
            "graphviz (https://graphviz.gitlab.io/download/) for `plot_model` to work.",
            file=sys.stderr,
        )
        return None
    dot = pydot.Dot()
    dot.set("rankdir", rankdir)
    dot.set("concentrate", True)
    dot.set("dpi", dpi)
    dot.set_node_defaults(shape="record")
    previous = None
    for i, layer in enumerate(model.layers):
        label = type(layer).__name__
        if show_layer_names:
            label = f"{layer.name} ({label})"
        if show_layer_activations and getattr(layer, "activation", None):
            label += f"\\nactivation: {layer.activation}"
        if show_shapes and getattr(layer, "output_shape", None) is not None:
            label += f"\\noutput shape: {layer.output_shape}"
        node = pydot.Node(str(i), label=label)
        dot.add_node(node)
        if previous is not None:
            dot.add_edge(pydot.Edge(previous, str(i)))
        previous = str(i)
    extension = os.path.splitext(to_file)[1][1:] or "png"
    try:
        dot.write(to_file, format=extension)
    except Exception as e:  # noqa: BLE001  (pydot raises plain exceptions when dot is missing)
        print(
            f"plot_model: nothing drawn: graphviz's `dot` failed ({e}); install graphviz "
            "(https://graphviz.gitlab.io/download/) for `plot_model` to work.",
            file=sys.stderr,
        )
        return None
    return None


def _setting(name: str) -> property:
    """One of PyDataset's constructor settings as Keras exposes it: read (Keras's warning first
    where a subclass skipped PyDataset's __init__) and set."""
    attr = "_" + name

    def get(self: Any) -> Any:
        self._warn_if_super_not_called()
        return getattr(self, attr)

    def put(self: Any, value: Any) -> None:
        setattr(self, attr, value)

    return property(get, put)


class PyDataset:
    """Keras 3's base class for a dataset written in Python: a subclass gives `__getitem__(i)`
    (batch i, whole) and `__len__` (the number of batches), and may give `on_epoch_begin` /
    `on_epoch_end` (called around each epoch, to reshuffle say) or a `num_batches` property
    (None: endless).

    crossover makes every batch on the calling thread, in order: `workers`,
    `use_multiprocessing` and `max_queue_size` are kept, as Keras keeps them for fit, and
    otherwise ignored (no worker threads or processes are started)."""

    def __init__(
        self, workers: int = 1, use_multiprocessing: bool = False, max_queue_size: int = 10
    ) -> None:
        self._workers = workers
        self._use_multiprocessing = use_multiprocessing
        self._max_queue_size = max_queue_size

    def _warn_if_super_not_called(self) -> None:
        """Keras's warning for a subclass whose __init__ skipped PyDataset's (defaults filled)."""
        missing = False
        for name, default in (
            ("_workers", 1),
            ("_use_multiprocessing", False),
            ("_max_queue_size", 10),
        ):
            if not hasattr(self, name):
                setattr(self, name, default)
                missing = True
        if missing:
            warnings.warn(
                "Your `PyDataset` class should call `super().__init__(**kwargs)` in its "
                "constructor. `**kwargs` can include `workers`, `use_multiprocessing`, "
                "`max_queue_size`. Do not pass these arguments to `fit()`, as they will be "
                "ignored.",
                stacklevel=3,
            )

    workers = _setting("workers")
    use_multiprocessing = _setting("use_multiprocessing")
    max_queue_size = _setting("max_queue_size")

    def __getitem__(self, index: int) -> Any:
        """Batch `index` (a subclass gives it)."""
        raise NotImplementedError

    def __iter__(self) -> Iterator[Any]:
        """Batches 0, 1, ... num_batches - 1 (endless when num_batches is None or not given)."""
        try:
            count = self.num_batches
        except NotImplementedError:
            count = None
        for index in itertools.count() if count is None else range(count):
            yield self[index]

    @property
    def num_batches(self) -> Optional[int]:
        """The number of batches: len(self) where the subclass gives __len__ (None: endless)."""
        if hasattr(self, "__len__"):
            return len(self)
        raise NotImplementedError(
            "You need to implement the `num_batches` property:\n\n"
            "@property\ndef num_batches(self):\n  return ..."
        )

    def on_epoch_begin(self) -> None:
        """Called at the beginning of every epoch (nothing here)."""

    def on_epoch_end(self) -> None:
        """Called at the end of every epoch (nothing here)."""


# Keras 3 keeps the name of Keras 2's base class for the same thing.
Sequence = PyDataset


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "keras.utils",
        name,
        "set_random_seed, to_categorical, normalize, plot_model, PyDataset and Sequence",
    )


__all__ = ["set_random_seed", "to_categorical", "normalize", "plot_model", "PyDataset", "Sequence"]
