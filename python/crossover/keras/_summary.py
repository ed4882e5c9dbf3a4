"""Sequential.summary() as Keras 3 prints it for a Sequential model (keras/src/utils/
summary_utils.py, through rich): a heavy-headed box table of the layers (no InputLayer row), each
with its output shape and parameter count (thousands separated), then the totals with their
float32 sizes, and the optimizer's variables once it has trained. The layout is Keras's: a line
of min(88, terminal columns - 4) (76 when the output is not a terminal), cut at 45% and 80%,
then narrowed as rich narrows a table of fixed columns wider than its line (ratio_reduce): 33,
24 and 15 columns (padding included) at 76, 38, 29 and 17 at 88; a cell too long is wrapped."""

import math
import shutil
from typing import Any, Optional, Sequence

from . import layers as L
from ._trace import output_shape


def column_widths(
    line_length: Optional[int],
    positions: Optional[Sequence[float]],
    default_length: int = 88,
    default_positions: Sequence[float] = (0.45, 0.80, 1.0),
) -> list[int]:
    """Each column's width, its one space of padding either side included."""
    length = line_length or min(default_length, shutil.get_terminal_size().columns - 4)
    widths, current = [], 0
    for pos in positions or default_positions:
        width = int(pos * length) - current
        if width < 4:
            raise ValueError("Insufficient console width to print summary.")
        widths.append(width + 2)  # rich adds the cell's padding
        current += width
    excess = sum(widths) - (length - (len(widths) + 1))  # the line holds the borders too
    if excess > 0:  # rich's ratio_reduce, equal ratios
        remaining, ratio, out = excess, len(widths), []
        for w in widths:
            cut = min(w, round(remaining / ratio))
            out.append(w - cut)
            remaining, ratio = remaining - cut, ratio - 1
        widths = out
    return widths


def weight_counts(layer: Any, *shapes: tuple[int, ...]) -> tuple[int, int]:
    """(trainable, non-trainable) parameter counts of a layer for its per-sample input shapes
    (one per input): a frozen layer's (trainable False) are all non-trainable, as Keras counts
    them."""
    trainable, fixed = _own_weight_counts(layer, list(shapes))
    return (trainable, fixed) if layer.trainable else (0, trainable + fixed)


def _own_weight_counts(layer: Any, shapes: list[tuple[int, ...]]) -> tuple[int, int]:
    if "_custom_weights" in vars(layer):  # a custom layer's add_weight (built by its trace)
        sizes = [(math.prod(w.shape), w.trainable) for w in layer._custom_weights]
        return sum(n for n, t in sizes if t), sum(n for n, t in sizes if not t)

    if isinstance(layer, L._ModelBase):
        shape = shapes[0]
        trainable = fixed = 0
        for inner in layer._leaves():
            if isinstance(inner, L.InputLayer):
                continue
            t, f = weight_counts(inner, shape)
            trainable, fixed = trainable + t, fixed + f
            shape = output_shape(inner, shape)
        return trainable, fixed
    if L._is_custom(layer):  # no weights of its own (add_weight's are above)
        return 0, 0
    trainable = fixed = 0
    for _, weight_shape, is_trainable in L._built(layer, shapes)[1]:
        if is_trainable:
            trainable += math.prod(weight_shape)
        else:
            fixed += math.prod(weight_shape)
    return trainable, fixed


def _memory(count: int, extra_bytes: int = 0) -> str:
    """Keras's readable_memory_size of float32 weights (and `extra_bytes` more)."""
    size = float(count * 4 + extra_bytes)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size / 1024 < 1:
            return f"{size:.2f} {unit}"
        size /= 1024
    return f"{size:.2f} PB"


def _wrap(text: str, width: int) -> list[str]:
    """A cell's lines as rich wraps them (overflow "ellipsis", a Column's default): words
    greedily to the width, a word longer than the width alone on its line, cut to it with "…"."""
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return [l if len(l) <= width else l[: width - 1] + "…" for l in lines] or [""]


def _row(cells: list[str], widths: list[int], bar: str) -> list[str]:
    """A row's lines: each cell wrapped to its column, the last column right-aligned."""
    wrapped = [_wrap(c, w - 2) for c, w in zip(cells, widths)]
    lines = []
    for k in range(max(len(w) for w in wrapped)):
        out = []
        for i, (parts, width) in enumerate(zip(wrapped, widths)):
            text = parts[k] if k < len(parts) else ""
            out.append(" " + (text.rjust(width - 2) if i == 2 else text.ljust(width - 2)) + " ")
        lines.append(bar + bar.join(out) + bar)
    return lines


def _rule(widths: list[int], left: str, fill: str, middle: str, right: str) -> str:
    return left + middle.join(fill * w for w in widths) + right


def _table(name: str, widths: list[int], header: list[str], rows: list[list[str]]) -> list[str]:
    """Keras's box table: the model's name, the heavy header, the rows between light rules."""
    lines = [f'Model: "{name}"', _rule(widths, "┏", "━", "┳", "┓")]
    lines += _row(header, widths, "┃")
    lines.append(_rule(widths, "┡", "━", "╇", "┩"))
    for i, row in enumerate(rows):
        if i:
            lines.append(_rule(widths, "├", "─", "┼", "┤"))
        lines += _row(row, widths, "│")
    lines.append(_rule(widths, "└", "─", "┴", "┘"))
    return lines


def summary_text(
    model: Any,
    optimizer_params: Optional[int],
    line_length: Optional[int] = None,
    positions: Optional[Sequence[float]] = None,
) -> str:
    """The text Keras 3 prints for model.summary()."""
    if model._subclassed and not getattr(model, "_functional", False):
        return subclassed_summary_text(model, optimizer_params, line_length, positions)
    if hasattr(model, "_graph"):
        return functional_summary_text(model, optimizer_params, line_length, positions)
    widths = column_widths(line_length, positions)
    shape: Optional[tuple[int, ...]] = None
    known = model._known_input_shape()  # given, or learnt from the data fit took (Keras builds)
    if known is not None:
        shape = tuple(known)
    trainable = fixed = 0
    rows = []
    for layer in model.layers:
        name = f"{layer.name} ({type(layer).__name__})"
        if shape is None:
            rows.append([name, "?", "0 (unbuilt)"])
            continue
        t, f = weight_counts(layer, shape)
        shape = output_shape(layer, shape)
        trainable, fixed = trainable + t, fixed + f
        rows.append([name, "(" + ", ".join(["None", *map(str, shape)]) + ")", f"{t + f:,}"])
    lines = _table(model.name, widths, ["Layer (type)", "Output Shape", "Param #"], rows)
    return "\n".join(lines + _totals(trainable, fixed, optimizer_params))


def functional_summary_text(
    model: Any,
    optimizer_params: Optional[int],
    line_length: Optional[int] = None,
    positions: Optional[Sequence[float]] = None,
) -> str:
    """What Keras 3 prints for a functional model: a row per layer, its InputLayer's first, with
    a "Connected to" column (line of 108, cut at 30%, 56% and 74%) unless the graph is a chain."""
    chain = model._is_chain()
    if chain:
        widths = column_widths(line_length, positions)
        header = ["Layer (type)", "Output Shape", "Param #"]
    else:
        widths = column_widths(line_length, positions, 108, (0.3, 0.56, 0.74, 1.0))
        header = ["Layer (type)", "Output Shape", "Param #", "Connected to"]
    trainable = fixed = 0
    rows = []
    tensors = getattr(model, "_tensors", [])
    for layer in model.layers:
        # Its calls in the model (a shared layer's several): Keras shows the last call's output
        # shape and what every call reads, as layer[call][0].
        calls = sorted((t for t in tensors if t._layer is layer), key=lambda t: t._node)
        calls = calls or [layer._output_tensor]
        parents = calls[0]._inputs
        t, f = weight_counts(layer, *(tuple(p.shape[1:]) for p in parents)) if parents else (0, 0)
        trainable, fixed = trainable + t, fixed + f
        row = [
            f"{layer.name} ({type(layer).__name__})",
            "(" + ", ".join(str(d) for d in calls[-1].shape) + ")",
            f"{t + f:,}",
        ]
        if not chain:
            reads = [p for call in calls for p in call._inputs]
            row.append(", ".join(f"{p._layer.name}[{p._node}][0]" for p in reads) or "-")
        rows.append(row)
    lines = _table(model.name, widths, header, rows)
    return "\n".join(lines + _totals(trainable, fixed, optimizer_params))


# Keras's layers without a build() of their own: built when made, their shape not recorded by a
# build, so a subclassed model's summary shows "?" for their output and 0 (not "unbuilt") params.
_BUILT_WHEN_MADE = (
    "Dropout", "GaussianNoise", "GaussianDropout", "SpatialDropout2D", "Activation",
    "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D", "GlobalMaxPooling2D",
    "Reshape", "Softmax", "ReLU", "LeakyReLU", "ELU",
)  # fmt: skip


def _built_when_made(layer: Any) -> bool:
    if L._is_custom(layer):  # a custom layer without a build() of its own
        return not any("build" in vars(c) for c in L._user_classes(layer))
    return any(
        getattr(L, name, None) is not None and isinstance(layer, getattr(L, name))
        for name in _BUILT_WHEN_MADE
    )


def _shape_text(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ")"


def subclassed_summary_text(
    model: Any,
    optimizer_params: Optional[int],
    line_length: Optional[int] = None,
    positions: Optional[Sequence[float]] = None,
) -> str:
    """What Keras 3 prints for a subclassed model: a row per layer it holds (its model.layers:
    the attributes' layers in the order set, a model among them one row), built or not. A
    layer's output shape is the one its build recorded (its first call's in the traced
    graph), "?" for a layer Keras builds when made (Dropout, pooling, activations: no build of
    their own) and for one not built; its parameter count "0 (unbuilt)" when not built."""
    widths = column_widths(line_length, positions)
    calls: dict[int, Any] = {}  # layer -> the first call's tensor in the traced graph
    for t in getattr(model, "_tensors", []):
        calls.setdefault(id(t._layer), t)
    trainable = fixed = 0
    rows = []
    for layer in model._tracked_layers():
        name = f"{layer.name} ({type(layer).__name__})"
        shapes: Optional[list[tuple[int, ...]]] = None  # its build's input shapes, once built
        out: Optional[tuple[Any, ...]] = None
        if isinstance(layer, L._ModelBase):
            leaves = [l for l in layer._leaves() if id(l) in calls]
            if leaves:
                first, last = calls[id(leaves[0])], calls[id(leaves[-1])]
                shapes = [tuple(p.shape[1:]) for p in first._inputs]
                out = tuple(last.shape)
            elif layer.built and layer._input_shape:
                shapes = [tuple(layer._input_shape)]
                out = tuple(layer.output_shape or ())
        elif id(layer) in calls:
            call = calls[id(layer)]
            shapes = [tuple(p.shape[1:]) for p in call._inputs]
            out = tuple(call.shape)
        elif getattr(layer, "_traced_shapes", None) is not None and any(
            getattr(t._layer, "_owner", None) is layer for t in getattr(model, "_tensors", [])
        ):
            shapes = [tuple(layer._traced_shapes[0])]
            out = (None, *layer._traced_shapes[1])
        made = _built_when_made(layer)
        if shapes is None and not made:
            rows.append([name, "?", "0 (unbuilt)"])
            continue
        t, f = weight_counts(layer, *shapes) if shapes is not None else (0, 0)
        trainable, fixed = trainable + t, fixed + f
        shown = "?" if made or out is None else _shape_text(out)
        rows.append([name, shown, f"{t + f:,}"])
    lines = _table(model.name, widths, ["Layer (type)", "Output Shape", "Param #"], rows)
    return "\n".join(lines + _totals(trainable, fixed, optimizer_params))


def _totals(trainable: int, fixed: int, optimizer_params: Optional[int]) -> list[str]:
    """The totals' lines. The optimizer's iteration count is an int64: 4 bytes more than the
    float32 the count of numbers gives (Keras sums each variable's own size)."""
    total = trainable + fixed + (optimizer_params or 0)
    extra = 4 if optimizer_params is not None else 0
    lines = [f" Total params: {total:,} ({_memory(total, extra)})"]
    lines.append(f" Trainable params: {trainable:,} ({_memory(trainable)})")
    lines.append(f" Non-trainable params: {fixed:,} ({_memory(fixed)})")
    if optimizer_params is not None:
        lines.append(
            f" Optimizer params: {optimizer_params:,} ({_memory(optimizer_params, extra)})"
        )
    return lines


def optimizer_variable_count(optimizer: Any, trainable: int) -> int:
    """How many numbers Keras's optimizer keeps once built, as the engine's optimizer (a
    _core.Optimizer) says: its slots per trainable weight, plus its iteration count and
    learning rate, and the value it carries between steps (Nadam's u_product)."""
    return optimizer.slot_count * trainable + 2 + (1 if optimizer.carries_value else 0)
