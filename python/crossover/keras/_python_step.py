"""Keras's default train_step and test_step, in Python, for a loss the engine has no op for.

fit's own step runs in C++ with the engine's loss ops (sparse/categorical/binary cross-entropy,
mean squared error). A model compiled with another loss, as Keras allows, trains here one batch
at a time, as Keras's Trainer does:
- a Python function `def loss(y_true, y_pred)` returning per-sample values (its mean over the
  batch is the loss, as Keras's LossFunctionWrapper takes it), or a keras.losses.Loss subclass
  with its own call(), or a keras.losses object the engine does not compute (MeanAbsoluteError);
- the step: the engine's training pass (`model(x, training=True)`), the loss in TensorFlow's
  eager ops recorded by a GradientTape, its gradient with respect to the outputs taken back
  through the engine's backward pass (Sequential::training_backward_outputs), the optimizer's
  update (apply_gradients): the update fit's own step makes, with this loss;
- compile's metrics are Keras's objects updated with (y, y_pred) each batch; "accuracy" is
  chosen by the shapes, as Keras 3 chooses it (compile_utils.get_metric).

The model's own train_step (a subclass's) calls the same through super().train_step(data) and
self.compute_loss."""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from .. import _tensor
from . import losses as losses_module
from . import metrics as metrics_module


def eager_loss(loss: Any) -> Optional[Callable[..., Any]]:
    """compile's loss as a callable (y_true, y_pred, sample_weight) -> the batch's loss, computed
    with eager ops; None for what is not a loss (compile's error stands)."""
    if isinstance(loss, losses_module.Loss):
        return loss
    if isinstance(loss, str):
        try:
            found = losses_module.get(loss)
        except (ValueError, TypeError, AttributeError):
            return None
        return None if found is None else eager_loss(found)
    if isinstance(loss, type) and issubclass(loss, losses_module.Loss):
        return loss()
    if callable(loss):
        return _FunctionLoss(loss)
    return None


class _FunctionLoss:
    """Keras's LossFunctionWrapper: fn(y_true, y_pred) per sample, y_true and y_pred as float32
    tensors of one rank (Keras's squeeze_or_expand_to_same_rank: targets (N,) against outputs
    (N, 1) are expanded), reduced to the mean over the batch (weighted by sample_weight)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.name = getattr(fn, "__name__", type(fn).__name__)

    def __call__(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Any:
        y_true = _tensor.cast(_tensor.convert_to_tensor(y_true), np.float32)
        # (Indexing a tensor is recorded: y_pred's gradient goes through it.)
        y_true, y_pred = losses_module._same_rank(y_true, _tensor.convert_to_tensor(y_pred))
        values = self.fn(y_true, y_pred)
        values = _tensor.convert_to_tensor(values) if not _tensor._is_tf(values) else values
        return losses_module._eager_reduce(values, "sum_over_batch_size", sample_weight)


def unpack(data: Any) -> tuple[Any, Any, Any]:
    """keras.utils.unpack_x_y_sample_weight: (x,), (x, y) or (x, y, sample_weight)."""
    if isinstance(data, (list, tuple)):
        if len(data) == 1:
            return data[0], None, None
        if len(data) == 2:
            return data[0], data[1], None
        if len(data) == 3:
            return data[0], data[1], data[2]
        raise ValueError(
            f"Data is expected to be in format `x`, `(x,)`, `(x, y)`, or `(x, y, sample_weight)`, "
            f"found: {data}"
        )
    return data, None, None


def train_step(model: Any, data: Any) -> dict[str, Any]:
    """Keras's Trainer.train_step: one batch's update, then the metrics' results."""
    from .. import _tape

    x, y, sample_weight = unpack(data)
    with _tape.GradientTape() as tape:
        y_pred = model(x, training=True)
        loss = model.compute_loss(x, y, y_pred, sample_weight)
    variables = model.trainable_variables
    model.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
    return update_metrics(model, loss, y, y_pred, sample_weight)


def test_step(model: Any, data: Any) -> dict[str, Any]:
    """Keras's Trainer.test_step: the loss and metrics of one batch in inference."""
    x, y, sample_weight = unpack(data)
    y_pred = model(x, training=False)
    loss = model.compute_loss(x, y, y_pred, sample_weight)
    return update_metrics(model, loss, y, y_pred, sample_weight)


def update_metrics(model: Any, loss: Any, y: Any, y_pred: Any, sample_weight: Any) -> dict:
    """Keras's compute_metrics: the loss tracker with the batch's loss (weighted by its rows),
    compile's metrics with (y, y_pred); each one's result."""
    logs: dict[str, Any] = {}
    for metric in model.metrics:
        if metric.name == "loss":
            metric.update_state(float(np.asarray(_tensor._plain(loss))), len(np.asarray(y)))
        else:
            metric.update_state(y, y_pred, sample_weight)
        result = metric.result()
        logs.update(result if isinstance(result, dict) else {metric.name: result})
    return logs


def accuracy_for(name: str, y_true: Any, y_pred: Any) -> Any:
    """Keras 3's "accuracy" of compile's metrics, chosen by the shapes of the first batch:
    binary for one output column, sparse categorical for labels of lower rank (or one column),
    categorical otherwise."""
    true_shape = np.shape(_tensor._plain(y_true))
    pred_shape = np.shape(_tensor._plain(y_pred))
    if pred_shape and pred_shape[-1] == 1:
        return metrics_module.BinaryAccuracy(name=name)
    sparse = len(true_shape) < len(pred_shape) or (
        len(true_shape) == len(pred_shape) and true_shape and true_shape[-1] == 1
    )
    if sparse:
        return metrics_module.SparseCategoricalAccuracy(name=name)
    return metrics_module.CategoricalAccuracy(name=name)
