"""Sequential.summary() as Keras 3 prints it for a Sequential model (keras/src/utils/
summary_utils.py, through rich): a heavy-headed box table of the layers (no InputLayer row), each
with its output shape and parameter count (thousands separated), then the totals with their
float32 sizes, and the optimizer's variables once it has trained. The layout is Keras's: a line
of min(88, terminal columns - 4) (76 when the output is not a terminal), cut at 45% and 80%,
then narrowed as rich narrows a table of fixed columns wider than its line (ratio_reduce): 33,
24 and 15 columns (padding included) at 76, 38, 29 and 17 at 88; a cell too long is wrapped."""

import math
import shutil
import textwrap
from typing import Any, Optional, Sequence

from . import layers as L


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


def _conv_size(size: int, window: int, stride: int, padding: str) -> int:
    if padding == "same":
        return -(-size // stride)
    return (size - window) // stride + 1


def output_shape(layer: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A layer's per-sample output shape for a per-sample input shape."""
    from . import _trace
    from .models import Sequential

    if isinstance(layer, Sequential):
        for inner in layer._leaves():
            if not isinstance(inner, L.InputLayer):
                shape = output_shape(inner, shape)
        return shape
    if _trace.is_custom(layer):
        return _trace.output_shape(layer, shape)
    if isinstance(layer, L.Flatten):
        return (math.prod(shape),)
    if isinstance(layer, L.Dense):
        return (*shape[:-1], layer.units)
    if isinstance(layer, L.Conv2D):
        h, w = shape[0], shape[1]
        (kh, kw), (sh, sw) = layer.kernel_size, layer.strides
        return (
            _conv_size(h, kh, sh, layer.padding),
            _conv_size(w, kw, sw, layer.padding),
            layer.filters,
        )
    if isinstance(layer, L.Conv2DTranspose):  # Keras's sizes with output_padding None
        grow = 0 if layer.padding == "same" else 1
        return (
            *(
                n * s + grow * max(k - s, 0)
                for n, k, s in zip(shape[:2], layer.kernel_size, layer.strides)
            ),
            layer.filters,
        )
    if isinstance(layer, L._Pooling2D):
        (ph, pw), (sh, sw) = layer.pool_size, layer.strides
        return (
            _conv_size(shape[0], ph, sh, layer.padding),
            _conv_size(shape[1], pw, sw, layer.padding),
            shape[2],
        )
    if isinstance(layer, L._GlobalPooling2D):
        return (shape[-1],)
    if isinstance(layer, L.UpSampling2D):
        return (shape[0] * layer.size[0], shape[1] * layer.size[1], shape[2])
    if isinstance(layer, L.Reshape):
        target = list(layer.target_shape)
        if -1 in target:
            known = math.prod(d for d in target if d != -1)
            target[target.index(-1)] = math.prod(shape) // known
        return tuple(target)
    return shape  # Dropout, Activation, Softmax, ReLU, BatchNormalization, LayerNormalization


def weight_counts(layer: Any, shape: tuple[int, ...]) -> tuple[int, int]:
    """(trainable, non-trainable) parameter counts of a layer for its per-sample input shape: a
    frozen layer's (trainable False) are all non-trainable, as Keras counts them."""
    trainable, fixed = _own_weight_counts(layer, shape)
    return (trainable, fixed) if layer.trainable else (0, trainable + fixed)


def _own_weight_counts(layer: Any, shape: tuple[int, ...]) -> tuple[int, int]:
    from .models import Sequential

    if "_custom_weights" in vars(layer):  # a custom layer's add_weight (built by its trace)
        sizes = [(math.prod(w.shape), w.trainable) for w in layer._custom_weights]
        return sum(n for n, t in sizes if t), sum(n for n, t in sizes if not t)

    if isinstance(layer, Sequential):
        trainable = fixed = 0
        for inner in layer._leaves():
            if isinstance(inner, L.InputLayer):
                continue
            t, f = weight_counts(inner, shape)
            trainable, fixed = trainable + t, fixed + f
            shape = output_shape(inner, shape)
        return trainable, fixed
    if isinstance(layer, L.Dense):
        return shape[-1] * layer.units + (layer.units if layer.use_bias else 0), 0
    if isinstance(layer, L.Conv2D):
        kh, kw = layer.kernel_size
        return kh * kw * shape[-1] * layer.filters + (layer.filters if layer.use_bias else 0), 0
    if isinstance(layer, L.Conv2DTranspose):
        kh, kw = layer.kernel_size
        return kh * kw * shape[-1] * layer.filters + (layer.filters if layer.use_bias else 0), 0
    if isinstance(layer, L.BatchNormalization):
        c = shape[-1]
        return c * (int(layer.scale) + int(layer.center)), 2 * c
    if isinstance(layer, L.LayerNormalization):
        return shape[-1] * (int(layer.scale) + int(layer.center)), 0
    return 0, 0


def _memory(count: int, extra_bytes: int = 0) -> str:
    """Keras's readable_memory_size of float32 weights (and `extra_bytes` more)."""
    size = float(count * 4 + extra_bytes)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size / 1024 < 1:
            return f"{size:.2f} {unit}"
        size /= 1024
    return f"{size:.2f} PB"


def _row(cells: list[str], widths: list[int], bar: str) -> list[str]:
    """A row's lines: each cell wrapped to its column, the last column right-aligned."""
    wrapped = [
        textwrap.wrap(c, w - 2, break_on_hyphens=False) or [""] for c, w in zip(cells, widths)
    ]
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
    if hasattr(model, "_graph"):
        return functional_summary_text(model, optimizer_params, line_length, positions)
    widths = column_widths(line_length, positions)
    shape: Optional[tuple[int, ...]] = None
    if model._input_shape is not None:
        shape = tuple(model._input_shape)
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
    for layer in model.layers:
        out = layer._output_tensor
        parents = out._inputs
        t, f = weight_counts(layer, tuple(parents[0].shape[1:])) if parents else (0, 0)
        trainable, fixed = trainable + t, fixed + f
        row = [
            f"{layer.name} ({type(layer).__name__})",
            "(" + ", ".join(str(d) for d in out.shape) + ")",
            f"{t + f:,}",
        ]
        if not chain:
            row.append(", ".join(f"{p._layer.name}[0][0]" for p in parents) or "-")
        rows.append(row)
    lines = _table(model.name, widths, header, rows)
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


def optimizer_variable_count(optimizer_name: str, trainable: int, config: dict[str, Any]) -> int:
    """How many numbers Keras's optimizer keeps once built: its slots per trainable weight, plus
    its iteration count and learning rate."""
    slots = {
        "adam": 2, "adamw": 2, "rmsprop": 1, "sgd": 0, "adagrad": 1, "adadelta": 2, "nadam": 2,
        "adamax": 2,
    }.get(optimizer_name, 0)  # fmt: skip
    if optimizer_name == "sgd" and config.get("momentum", 0.0):
        slots = 1
    if optimizer_name == "rmsprop" and config.get("momentum", 0.0):
        slots = 2
    if optimizer_name == "rmsprop" and config.get("centered", False):
        slots += 1
    scalars = 3 if optimizer_name == "nadam" else 2  # + Nadam's u_product
    return slots * trainable + scalars
