"""tf.nn: activations and the losses of logits, TensorFlow's eager ops (_tensor.py: numpy, with
their gradients under a GradientTape)."""

from typing import Any

from ._tensor import (
    elu,
    l2_loss,
    leaky_relu,
    log_softmax,
    relu,
    sigmoid,
    sigmoid_cross_entropy_with_logits,
    softmax,
    softmax_cross_entropy_with_logits,
    softplus,
    sparse_softmax_cross_entropy_with_logits,
    tanh,
)
from ._args import unsupported_attribute

__all__ = [
    "elu",
    "l2_loss",
    "leaky_relu",
    "log_softmax",
    "relu",
    "sigmoid",
    "sigmoid_cross_entropy_with_logits",
    "softmax",
    "softmax_cross_entropy_with_logits",
    "softplus",
    "sparse_softmax_cross_entropy_with_logits",
    "tanh",
]


def __getattr__(name: str) -> Any:
    raise unsupported_attribute("nn", name, ", ".join(__all__))
