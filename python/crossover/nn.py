"""tf.nn: the activations scripts apply to a model's output (softmax of logits), on numpy."""

from typing import Any

from ._tensor import log_softmax, relu, sigmoid, softmax, tanh
from .keras._args import unsupported_attribute


def __getattr__(name: str) -> Any:
    raise unsupported_attribute("nn", name, "softmax, log_softmax, relu, sigmoid and tanh")


__all__ = ["softmax", "log_softmax", "relu", "sigmoid", "tanh"]
