"""fit on a `keras.utils.PyDataset` (or a legacy `Sequence`, such as the iterator that
`ImageDataGenerator.flow` returns): batches made in Python each epoch, trained on the engine.

Keras asks the dataset for each batch, `dataset[i]`, every epoch (in a shuffled order when fit's
`shuffle` is true, as its PyDatasetAdapter does with Python's `random`), and calls its
`on_epoch_begin`/`on_epoch_end` around the epoch. crossover does the same, gathers the epoch's
batches into arrays, and trains one epoch of the engine's own fit on them in that order (no
shuffle of its own, the batch size the dataset's). A partial batch (the dataset's last) goes last,
so that the engine's batches are the dataset's batches. Callbacks see one training run: one
`on_train_begin`, the epochs, one `on_train_end`, one History."""

import random
from typing import Any, Optional

import numpy as np

from .callbacks import CallbackList, History


def is_py_dataset(x: Any) -> bool:
    """Whether fit's x is a PyDataset: a Keras PyDataset/Sequence, or an object with the same
    protocol (batches by index, a length, and on_epoch_end), but not an array, list or dict."""
    if isinstance(x, (np.ndarray, list, tuple, dict, str, bytes)) or x is None:
        return False
    return all(hasattr(x, name) for name in ("__getitem__", "__len__", "on_epoch_end"))


class _OneRunOfEpochs(CallbackList):
    """The callbacks of fit on a PyDataset, handed to one engine fit per epoch: on_train_begin
    only the first time, on_train_end when the run ends (`finish`), and after each epoch the
    engine asked to stop (so that it trains that epoch only), remembering whether a callback
    asked for it (EarlyStopping), which ends the run."""

    def __init__(self, callbacks: Any, model: Any, params: dict[str, Any]) -> None:
        super().__init__(callbacks, model, params)
        self._began = False
        self.stopped_by_callback = False

    def on_train_begin(self) -> None:
        if not self._began:
            self._began = True
            super().on_train_begin()

    def on_epoch_end(self, epoch: int, library_logs: dict[str, float]) -> None:
        super().on_epoch_end(epoch, library_logs)
        self.stopped_by_callback = bool(self.model.stop_training)
        self.model.stop_training = True
        self._pass_on_stop()

    def on_train_end(self) -> None:
        pass  # the run's end is finish()

    def finish(self) -> None:
        super().on_train_end()


def _batch_parts(batch: Any, index: int) -> tuple[Any, Any, Any]:
    """(x, y, sample_weight) of one batch as a PyDataset gives it: (x, y) or (x, y, w)."""
    if isinstance(batch, tuple) and len(batch) in (2, 3):
        return batch[0], batch[1], batch[2] if len(batch) == 3 else None
    raise ValueError(
        f"fit: batch {index} of the PyDataset is {type(batch).__name__}"
        f"{'' if not isinstance(batch, tuple) else f' of {len(batch)} items'}; fit needs "
        f"(x, y) or (x, y, sample_weight) tuples (a dataset of x alone has no targets to fit)"
    )


def _epoch_arrays(dataset: Any, steps: int, shuffle: bool) -> tuple[Any, Any, Any, int]:
    """The epoch's batches, in Keras's order, as (x, y, sample_weight or None, batch size)."""
    order = list(range(steps))
    if shuffle:
        random.shuffle(order)
    parts = [(i, _batch_parts(dataset[i], i)) for i in order]
    size = max(len(p[0]) for _, p in parts)
    full = [p for _, p in parts if len(p[0]) == size]
    short = [(i, p) for i, p in parts if len(p[0]) != size]
    if len(short) > 1:
        sizes = sorted({len(p[0]) for _, p in parts})
        raise ValueError(
            f"fit: the PyDataset's batches have sizes {sizes}; crossover trains batches of one "
            f"size with at most one smaller batch (the last), as a dataset of numpy arrays cut "
            f"into batches has them"
        )
    ordered = full + [p for _, p in short]
    weighted = [p[2] is not None for p in ordered]
    if any(weighted) and not all(weighted):
        raise ValueError("fit: some of the PyDataset's batches have sample weights, others not")
    xs = np.concatenate([np.asarray(p[0]) for p in ordered])
    ys = np.concatenate([np.asarray(p[1]) for p in ordered])
    ws = np.concatenate([np.asarray(p[2]) for p in ordered]) if all(weighted) else None
    return xs, ys, ws, size


def fit_py_dataset(
    model: Any,
    dataset: Any,
    y: Any,
    sample_weight: Any,
    validation_split: float,
    steps_per_epoch: Optional[int],
    epochs: int,
    initial_epoch: int,
    shuffle: bool,
    verbose: Any,
    level: int,
    callbacks: Any,
    **engine_fit: Any,
) -> History:
    """Model.fit(dataset, ...) for a PyDataset (see the module's docstring); level: verbose as a
    number; engine_fit: the rest of fit's arguments, passed to each epoch's fit
    (validation_data, class_weight, ...)."""
    for name, value in (("y", y), ("sample_weight", sample_weight)):
        if value is not None:
            raise ValueError(
                f"fit: the `{name}` argument is not supported when x is a PyDataset (the "
                f"dataset's batches carry the targets and sample weights)"
            )
    if validation_split:
        raise ValueError(
            "fit: validation_split is only supported for numpy arrays, not for a PyDataset "
            "(give validation_data)"
        )
    steps = len(dataset) if steps_per_epoch is None else min(int(steps_per_epoch), len(dataset))
    if steps < 1:
        raise ValueError("fit: the PyDataset has no batches (its len() is 0)")
    params = {"verbose": level, "epochs": epochs, "steps": steps}
    run = _OneRunOfEpochs(callbacks, model, params)
    try:
        for epoch in range(initial_epoch, epochs):
            if hasattr(dataset, "on_epoch_begin"):
                dataset.on_epoch_begin()
            xs, ys, ws, batch = _epoch_arrays(dataset, steps, bool(shuffle))
            model.fit(
                xs,
                ys,
                batch_size=batch,
                epochs=epochs,
                initial_epoch=epoch,
                shuffle=False,
                verbose=verbose,
                callbacks=run,
                sample_weight=ws,
                **engine_fit,
            )
            dataset.on_epoch_end()
            if run.stopped_by_callback:
                break
    finally:
        model.stop_training = run.stopped_by_callback
    run.finish()
    model.history = run.history
    return run.history
