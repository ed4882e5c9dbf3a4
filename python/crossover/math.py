"""tf.math: the element-wise and reduction ops scripts apply to predictions, on numpy."""

from typing import Any

from ._tensor import (
    abs,
    add,
    argmax,
    argmin,
    divide,
    equal,
    exp,
    greater,
    less,
    log,
    maximum,
    minimum,
    multiply,
    not_equal,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_sum,
    sigmoid,
    softmax,
    sqrt,
    square,
    subtract,
    tanh,
)
from .keras._args import unsupported_attribute

__all__ = [
    "abs",
    "add",
    "argmax",
    "argmin",
    "divide",
    "equal",
    "exp",
    "greater",
    "less",
    "log",
    "maximum",
    "minimum",
    "multiply",
    "not_equal",
    "reduce_max",
    "reduce_mean",
    "reduce_min",
    "reduce_sum",
    "sigmoid",
    "softmax",
    "sqrt",
    "square",
    "subtract",
    "tanh",
]


def __getattr__(name: str) -> Any:
    raise unsupported_attribute("math", name, ", ".join(__all__))
