"""Sequential.summary() as Keras 3 prints it for a Sequential model (keras/src/utils/
summary_utils.py, through rich): a heavy-headed box table of the layers (no InputLayer row), each
with its output shape and parameter count (thousands separated), then the totals with their
float32 sizes, and the optimizer's variables once it has trained. The layout is the one Keras
prints when the output is not a terminal (76 columns: rich's table of 33, 24 and 15)."""

import math
from typing import Any, Optional

from . import layers as L

_WIDTHS = (33, 24, 15)  # each column with its one space of padding either side


def _conv_size(size: int, window: int, stride: int, padding: str) -> int:
    if padding == "same":
        return -(-size // stride)
    return (size - window) // stride + 1


def output_shape(layer: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    """A layer's per-sample output shape for a per-sample input shape."""
    from .models import Sequential

    if isinstance(layer, Sequential):
        for inner in layer._leaves():
            if not isinstance(inner, L.InputLayer):
                shape = output_shape(inner, shape)
        return shape
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
    if isinstance(layer, L._Pooling2D):
        (ph, pw), (sh, sw) = layer.pool_size, layer.strides
        return (
            _conv_size(shape[0], ph, sh, layer.padding),
            _conv_size(shape[1], pw, sw, layer.padding),
            shape[2],
        )
    if isinstance(layer, L.GlobalAveragePooling2D):
        return (shape[-1],)
    if isinstance(layer, L.Reshape):
        target = list(layer.target_shape)
        if -1 in target:
            known = math.prod(d for d in target if d != -1)
            target[target.index(-1)] = math.prod(shape) // known
        return tuple(target)
    return shape  # Dropout, Activation, Softmax, ReLU, BatchNormalization


def weight_counts(layer: Any, shape: tuple[int, ...]) -> tuple[int, int]:
    """(trainable, non-trainable) parameter counts of a layer for its per-sample input shape."""
    from .models import Sequential

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
    if isinstance(layer, L.BatchNormalization):
        c = shape[-1]
        return c * (int(layer.scale) + int(layer.center)), 2 * c
    return 0, 0


def _memory(count: int) -> str:
    """Keras's readable_memory_size of float32 weights."""
    size = float(count * 4)
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size / 1024 < 1:
            return f"{size:.2f} {unit}"
        size /= 1024
    return f"{size:.2f} PB"


def _row(cells: list[str], left: str, middle: str, right: str) -> str:
    out = []
    for i, (cell, width) in enumerate(zip(cells, _WIDTHS)):
        inner = width - 2
        text = cell.rjust(inner) if i == 2 else cell.ljust(inner)
        out.append(f" {text} ")
    return left + middle.join(out) + right


def _rule(left: str, fill: str, middle: str, right: str) -> str:
    return left + middle.join(fill * w for w in _WIDTHS) + right


def summary_text(model: Any, optimizer_params: Optional[int]) -> str:
    """The text Keras 3 prints for model.summary()."""
    shape: Optional[tuple[int, ...]] = None
    if model._input_shape is not None:
        shape = tuple(model._input_shape)
    lines = [f'Model: "{model.name}"']
    lines.append(_rule("┏", "━", "┳", "┓"))
    lines.append(_row(["Layer (type)", "Output Shape", "Param #"], "┃", "┃", "┃"))
    lines.append(_rule("┡", "━", "╇", "┩"))
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
    for i, row in enumerate(rows):
        if i:
            lines.append(_rule("├", "─", "┼", "┤"))
        lines.append(_row(row, "│", "│", "│"))
    lines.append(_rule("└", "─", "┴", "┘"))
    extra = optimizer_params or 0
    total = trainable + fixed + extra
    lines.append(f" Total params: {total:,} ({_memory(total)})")
    lines.append(f" Trainable params: {trainable:,} ({_memory(trainable)})")
    lines.append(f" Non-trainable params: {fixed:,} ({_memory(fixed)})")
    if optimizer_params is not None:
        lines.append(f" Optimizer params: {optimizer_params:,} ({_memory(optimizer_params)})")
    return "\n".join(lines)


def optimizer_variable_count(optimizer_name: str, trainable: int, config: dict[str, Any]) -> int:
    """How many numbers Keras's optimizer keeps once built: its slots per trainable weight, plus
    its iteration count and learning rate."""
    slots = {"adam": 2, "adamw": 2, "rmsprop": 1, "sgd": 0}.get(optimizer_name, 0)
    if optimizer_name == "sgd" and config.get("momentum", 0.0):
        slots = 1
    if optimizer_name == "rmsprop" and config.get("momentum", 0.0):
        slots = 2
    if optimizer_name == "rmsprop" and config.get("centered", False):
        slots += 1
    return slots * trainable + 2
