"""Symbolic tensors: keras.Input's, and the output of a layer called on them (in a functional
model, in a subclassed model's traced call(), in a custom layer's traced call()), with the order
of the calls between them (Keras's order of a model's layers). Below layers.py and _trace.py,
which make them: their ops (x + y, -x, x @ w) become graph nodes through keras/_trace.py, which
registers itself with crossover._tensor when imported (keras imports it)."""

import heapq
from typing import Any

from .. import _tensor
from . import _names


def _tracer() -> Any:
    """keras/_trace.py, which makes an op on a symbolic tensor a node of the model's graph."""
    return _tensor._tracer


class KerasTensor:
    """A symbolic tensor: the shape (None for the batch) and dtype of a layer's output before
    there is data, and the call that makes it (the layer and the tensors it was called on)."""

    def __init__(
        self, shape: tuple[Any, ...], layer: Any, inputs: list["KerasTensor"], node: int = 0
    ) -> None:
        self.shape = tuple(shape)
        self.dtype = "float32"
        self.sparse = False
        self.ragged = False
        self._layer = layer
        self._inputs = inputs
        self._node = node  # which call of the layer made it (Keras's node_index)
        self.name = _names.auto_name("KerasTensor")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def _keras_history(self) -> tuple[Any, int, int]:
        return (self._layer, self._node, 0)

    def __repr__(self) -> str:
        return (
            f"<KerasTensor shape={self.shape}, dtype={self.dtype}, sparse={self.sparse}, "
            f"ragged={self.ragged}, name={self.name}>"
        )

    def _refuse(self, *_: Any, **__: Any) -> Any:
        raise _tracer().not_supported("indexing a symbolic tensor (x[...])")

    # Ops on symbolic tensors become nodes of the graph (keras/_tracer().py): x + y of one shape
    # outside a custom layer is an Add layer, as Keras's graph adds them (`x += residual`).
    def __add__(self, other: Any) -> "KerasTensor":
        return _tracer().binary("add", self, other)

    def __radd__(self, other: Any) -> "KerasTensor":
        return _tracer().binary("add", other, self)

    def __sub__(self, other: Any) -> "KerasTensor":
        return _tracer().binary("subtract", self, other)

    def __rsub__(self, other: Any) -> "KerasTensor":
        return _tracer().binary("subtract", other, self)

    def __mul__(self, other: Any) -> "KerasTensor":
        return _tracer().binary("multiply", self, other)

    def __rmul__(self, other: Any) -> "KerasTensor":
        return _tracer().binary("multiply", other, self)

    def __truediv__(self, other: Any) -> "KerasTensor":
        return _tracer().binary("divide", self, other)

    def __rtruediv__(self, other: Any) -> "KerasTensor":
        return _tracer().binary("divide", other, self)

    def __neg__(self) -> "KerasTensor":
        return _tracer().negative(self)

    def __pos__(self) -> "KerasTensor":
        return self

    def __matmul__(self, other: Any) -> "KerasTensor":
        return _tracer().matmul(self, other)

    def __bool__(self) -> bool:
        raise _tracer().not_supported(
            "Python control flow on a symbolic tensor's value (if, and, or)"
        )

    def _compare(self, *_: Any) -> Any:
        raise _tracer().not_supported("comparing a symbolic tensor (<, >; Python control flow)")

    __getitem__ = _refuse
    __lt__ = __le__ = __gt__ = __ge__ = _compare

    def __array__(self, *_: Any, **__: Any) -> Any:
        raise TypeError(
            "a symbolic tensor (keras.Input or a layer's output in a functional model) has no "
            "values: build a keras.Model from it and call predict()"
        )


def input_tensor(layer: Any) -> KerasTensor:
    """keras.Input's result: the InputLayer's output."""
    tensor = KerasTensor((None, *layer._input_shape), layer, [])
    if layer._given_name:
        tensor.name = layer._given_name  # Keras: keras.Input(name=...) names the tensor
    layer._output_tensor = tensor
    return tensor


def is_symbolic(value: Any) -> bool:
    if isinstance(value, KerasTensor):
        return True
    return isinstance(value, (list, tuple)) and any(isinstance(v, KerasTensor) for v in value)


def _ordered(outputs: list[KerasTensor]) -> list[KerasTensor]:
    """The tensors the outputs depend on, in Keras's order of its layers (Functional's
    _operations: by decreasing depth from the outputs, ties in depth-first order), with the
    add_loss terms their calls made (keras/_trace.py: the tensors that ride on a call's output,
    read by no layer), each before the output it rides on."""
    post: list[KerasTensor] = []
    seen: set[int] = set()

    def visit(t: KerasTensor) -> None:
        if id(t) in seen:
            return
        seen.add(id(t))
        for parent in t._inputs:
            visit(parent)
        for rider in getattr(t, "_riders", ()):
            visit(rider)
        post.append(t)

    for output in outputs:
        visit(output)
    if any(getattr(t._layer, "_owner", None) is not None for t in post):
        # A custom layer's ops (keras/_trace.py) in call order, each layer's together: its
        # weights then come in Keras's order (layer by layer) among the model's.
        return post
    index = {id(t): i for i, t in enumerate(post)}
    depth: dict[int, int] = {}
    for t in reversed(post):
        d = depth.setdefault(id(t), 0)
        for parent in t._inputs:
            depth[id(parent)] = max(depth.get(id(parent), 0), d + 1)
    order = sorted(post, key=lambda t: (-depth[id(t)], index[id(t)]))
    return _calls_in_node_order(order)


def _calls_in_node_order(order: list[KerasTensor]) -> list[KerasTensor]:
    """`order` (a topological order) with each shared layer's calls in the order they were made
    (Keras's node indices, which the engine numbers its calls by): Kahn's algorithm, the earliest
    ready tensor of `order` first, a layer's call after its previous one. `order` itself where no
    layer is called twice."""
    calls: dict[int, list[KerasTensor]] = {}
    for t in order:
        calls.setdefault(id(t._layer), []).append(t)
    if all(len(c) == 1 for c in calls.values()):
        return order
    rank = {id(t): i for i, t in enumerate(order)}
    waits: dict[int, int] = {}
    wakes: dict[int, list[KerasTensor]] = {id(t): [] for t in order}
    for t in order:
        parents = {id(p): p for p in t._inputs}
        waits[id(t)] = len(parents)
        for p in parents.values():
            wakes[id(p)].append(t)
    for same in calls.values():
        same.sort(key=lambda t: t._node)
        for before, after in zip(same, same[1:]):
            waits[id(after)] += 1
            wakes[id(before)].append(after)
    ready = [(rank[id(t)], t) for t in order if waits[id(t)] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, t = heapq.heappop(ready)
        out.append(t)
        for w in wakes[id(t)]:
            waits[id(w)] -= 1
            if waits[id(w)] == 0:
                heapq.heappush(ready, (rank[id(w)], w))
    return out
