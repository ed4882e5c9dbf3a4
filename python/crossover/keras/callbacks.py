"""Keras's callbacks on crossover: Callback, History, EarlyStopping, ModelCheckpoint (weights, or
the whole model as a `.keras` archive), LearningRateScheduler and ReduceLROnPlateau.

fit's loop runs in the library (C++); it calls one CallbackList (below), which calls each
callback's hooks in order with Keras's `logs` dict, as Keras's CallbackList does.
EarlyStopping, ModelCheckpoint, LearningRateScheduler and ReduceLROnPlateau are the library's
callbacks (nn/callbacks.h): these classes only take Keras's arguments and call the library's hooks.
Batch-level hooks (on_train_batch_*, on_batch_*, on_test_batch_*, on_predict_batch_*) are called
for a phase only when a callback overrides one of that phase's (or, for the library's, asks for
them): then each batch reads its running loss and metrics back from the engine; otherwise the
engine's steps run as if there were no callback."""

import collections.abc
import csv
import functools
import os
import shutil
import sys
import tempfile
import weakref
from typing import Any, Callable, Optional

import numpy as np

from .. import _core
from .._args import reject_unknown, reject_unsupported
from . import optimizers

# The batch hooks of each phase: the engine calls a phase's only for a callback overriding one.
_BATCH_HOOKS = {
    "train": ("on_batch_begin", "on_batch_end", "on_train_batch_begin", "on_train_batch_end"),
    "test": ("on_test_batch_begin", "on_test_batch_end"),
    "predict": ("on_predict_batch_begin", "on_predict_batch_end"),
}


def _overrides(cls: type, base: type, phase: str) -> bool:
    return any(getattr(cls, name) is not getattr(base, name) for name in _BATCH_HOOKS[phase])


class Callback:
    """keras.callbacks.Callback: subclass it and override on_train_begin/end(logs) and
    on_epoch_begin/end(epoch, logs). `self.model` is the model being trained (set
    `self.model.stop_training = True` to stop after this epoch), `self.params` fit's parameters
    (verbose, epochs, steps)."""

    def __init__(self) -> None:
        self.params: Optional[dict[str, Any]] = None
        self._model: Any = None

    def set_params(self, params: dict[str, Any]) -> None:
        self.params = params

    def set_model(self, model: Any) -> None:
        self._model = model

    @property
    def model(self) -> Any:
        return self._model

    def on_train_begin(self, logs: Optional[dict[str, float]] = None) -> None:
        pass

    def on_train_end(self, logs: Optional[dict[str, float]] = None) -> None:
        pass

    def on_epoch_begin(self, epoch: int, logs: Optional[dict[str, float]] = None) -> None:
        pass

    def on_epoch_end(self, epoch: int, logs: Optional[dict[str, float]] = None) -> None:
        pass

    def _wants_batches(self, phase: str) -> bool:
        """Whether the engine is to call this callback's batch hooks of `phase` ('train',
        'test', 'predict'): when it overrides one of them."""
        return _overrides(type(self), Callback, phase)

    # Keras's aliases: on_train_batch_begin/end call on_batch_begin/end.
    def on_batch_begin(self, batch: int, logs: Optional[dict[str, float]] = None) -> None:
        pass

    def on_batch_end(self, batch: int, logs: Optional[dict[str, float]] = None) -> None:
        pass

    def on_train_batch_begin(self, batch: int, logs: Optional[dict[str, float]] = None) -> None:
        self.on_batch_begin(batch, logs=logs)

    def on_train_batch_end(self, batch: int, logs: Optional[dict[str, float]] = None) -> None:
        self.on_batch_end(batch, logs=logs)

    def on_test_begin(self, logs: Optional[dict[str, float]] = None) -> None:
        pass

    def on_test_end(self, logs: Optional[dict[str, float]] = None) -> None:
        pass

    def on_test_batch_begin(self, batch: int, logs: Optional[dict[str, float]] = None) -> None:
        pass

    def on_test_batch_end(self, batch: int, logs: Optional[dict[str, float]] = None) -> None:
        pass

    def on_predict_begin(self, logs: Optional[dict[str, float]] = None) -> None:
        pass

    def on_predict_end(self, logs: Optional[dict[str, float]] = None) -> None:
        pass

    def on_predict_batch_begin(self, batch: int, logs: Optional[dict[str, float]] = None) -> None:
        pass

    def on_predict_batch_end(self, batch: int, logs: Optional[dict[str, float]] = None) -> None:
        pass


class History(Callback):
    """Keras's History: `.history` (metric name -> per-epoch values) and `.epoch` (0-based), as
    the epochs' `logs` held them after every other callback ran. fit returns one."""

    def __init__(self) -> None:
        super().__init__()
        self.history: dict[str, list[float]] = {}
        self.epoch: list[int] = []

    def on_train_begin(self, logs: Optional[dict[str, float]] = None) -> None:
        self.epoch = []

    def on_epoch_end(self, epoch: int, logs: Optional[dict[str, float]] = None) -> None:
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)
        self.model.history = self

    def __repr__(self) -> str:
        return f"<History epochs={self.epoch} keys={list(self.history)}>"


class CallbackList:
    """What the library's fit, evaluate and predict call (through crossover._core): each callback
    in order, with one `logs` dict per hook shared by all of them, History last in fit (Keras's
    order). After each hook, `model.stop_training = True` is passed on to the library."""

    def __init__(
        self, callbacks: Any, model: Any, params: dict[str, Any], add_history: bool = True
    ) -> None:
        if isinstance(callbacks, Callback):
            callbacks = [callbacks]
        self.callbacks = list(callbacks or [])
        for cb in self.callbacks:
            _check_callback(cb)
        self.history = next((cb for cb in self.callbacks if isinstance(cb, History)), None)
        if self.history is None and add_history:
            self.history = History()
            self.callbacks.append(self.history)
        self.model = model
        for cb in self.callbacks:
            cb.set_model(model)
            cb.set_params(params)
        self._last_logs: dict[str, float] = {}

    def _pass_on_stop(self) -> None:
        if self.model.stop_training:
            self.model._model().stop_training()

    def on_train_begin(self) -> None:
        logs: dict[str, float] = {}
        for cb in self.callbacks:
            cb.on_train_begin(logs)
        self._pass_on_stop()

    def on_epoch_begin(self, epoch: int) -> None:
        logs: dict[str, float] = {}
        for cb in self.callbacks:
            cb.on_epoch_begin(epoch, logs)
        self._pass_on_stop()

    def on_epoch_end(self, epoch: int, library_logs: dict[str, float]) -> None:
        # The library's "lr" is Keras's "learning_rate", which only the learning-rate callbacks add.
        # The accuracy is named as the user named the metric ('acc', ...), as in Keras's logs.
        logs = self._keras_logs(library_logs)
        for cb in self.callbacks:
            cb.on_epoch_end(epoch, logs)
        self._last_logs = logs
        self._pass_on_stop()

    def on_train_end(self) -> None:
        for cb in self.callbacks:
            cb.on_train_end(self._last_logs)

    def wants_batches(self, phase: str) -> bool:
        """Asked by the library once per loop: whether to call the batch hooks of `phase`."""
        return any(cb._wants_batches(phase) for cb in self.callbacks)

    def _keras_logs(self, library_logs: dict[str, float]) -> dict[str, float]:
        # Keras 3 (TensorFlow) hands the logs over sorted by name, as its History keys are.
        key = getattr(self.model, "_keras_key", lambda k: k)
        return dict(sorted((key(k), v) for k, v in library_logs.items() if k != "lr"))

    def _each(self, hook: str, *args: Any) -> None:
        for cb in self.callbacks:
            getattr(cb, hook)(*args)
        self._pass_on_stop()

    def on_train_batch_begin(self, batch: int) -> None:
        self._each("on_train_batch_begin", batch, {})

    def on_train_batch_end(self, batch: int, library_logs: dict[str, float]) -> None:
        self._each("on_train_batch_end", batch, self._keras_logs(library_logs))

    def on_test_begin(self) -> None:
        self._each("on_test_begin", {})

    def on_test_end(self, library_logs: dict[str, float]) -> None:
        self._each("on_test_end", self._keras_logs(library_logs))

    def on_test_batch_begin(self, batch: int) -> None:
        self._each("on_test_batch_begin", batch, {})

    def on_test_batch_end(self, batch: int, library_logs: dict[str, float]) -> None:
        self._each("on_test_batch_end", batch, self._keras_logs(library_logs))

    def on_predict_begin(self) -> None:
        self._each("on_predict_begin", {})

    def on_predict_end(self) -> None:
        self._each("on_predict_end", {})

    def on_predict_batch_begin(self, batch: int) -> None:
        self._each("on_predict_batch_begin", batch, {})

    def on_predict_batch_end(self, batch: int, logs: dict[str, Any]) -> None:
        self._each("on_predict_batch_end", batch, logs)


def _check_callback(cb: Any) -> None:
    if not isinstance(cb, Callback):
        raise TypeError(
            f"callbacks must be crossover.keras.callbacks.Callback instances, got {cb!r} "
            f"(of type {type(cb).__name__})"
        )


def _numbers(logs: Optional[dict[str, Any]]) -> dict[str, float]:
    """The logs the library's callbacks read: the numeric entries."""
    out = {}
    for k, v in (logs or {}).items():
        try:
            out[str(k)] = float(v)
        except (TypeError, ValueError):
            pass
    return out


class _LibraryCallback(Callback):
    """A Keras callback whose logic is the library's: each hook calls the library's hook."""

    _core: Any

    def on_train_begin(self, logs: Optional[dict[str, float]] = None) -> None:
        self._core.on_train_begin(self.model._model())

    def on_epoch_begin(self, epoch: int, logs: Optional[dict[str, float]] = None) -> None:
        self._core.on_epoch_begin(self.model._model(), epoch)

    def on_epoch_end(self, epoch: int, logs: Optional[dict[str, float]] = None) -> None:
        self._core.on_epoch_end(self.model._model(), epoch, _numbers(logs))

    def on_train_end(self, logs: Optional[dict[str, float]] = None) -> None:
        self._core.on_train_end(self.model._model())

    def on_train_batch_end(self, batch: int, logs: Optional[dict[str, float]] = None) -> None:
        self._core.on_train_batch_end(self.model._model(), batch, _numbers(logs))

    def _wants_batches(self, phase: str) -> bool:
        # The library's answer, or a user's subclass overriding a hook of its own.
        library = next(c for c in type(self).__mro__ if c.__module__ == __name__)
        return bool(self._core.wants_batches(phase)) or _overrides(type(self), library, phase)


def _mode(mode: str, owner: str) -> str:
    if mode not in ("auto", "min", "max"):
        raise ValueError(f"{owner}: mode must be 'auto', 'min' or 'max', got {mode!r}")
    return mode


class EarlyStopping(_LibraryCallback):
    """keras.callbacks.EarlyStopping: stops when `monitor` has not improved for `patience`
    epochs (the library's EarlyStopping)."""

    def __init__(
        self,
        monitor: str = "val_loss",
        min_delta: float = 0,
        patience: int = 0,
        verbose: int = 0,
        mode: str = "auto",
        baseline: Optional[float] = None,
        restore_best_weights: bool = False,
        start_from_epoch: int = 0,
    ) -> None:
        super().__init__()
        self.monitor = monitor
        self.min_delta = abs(min_delta)
        self.patience = patience
        self.verbose = verbose
        self.mode = _mode(mode, "EarlyStopping")
        self.baseline = baseline
        self.restore_best_weights = restore_best_weights
        self.start_from_epoch = start_from_epoch
        self.stopped_epoch = 0
        self._last_epoch = -1
        self._core = _core.EarlyStopping(
            monitor,
            float(min_delta),
            int(patience),
            mode,
            None if baseline is None else float(baseline),
            bool(restore_best_weights),
            int(start_from_epoch),
            verbose > 0,
        )

    # stopped_epoch (Keras's: the 0-based epoch at whose end it stopped training, 0 if it did
    # not): the library decides; training that ended before its last epoch without a Python
    # callback asking was stopped by the library's EarlyStopping, the one callback there that
    # stops (with two EarlyStopping callbacks, both report it).
    def on_train_begin(self, logs: Optional[dict[str, float]] = None) -> None:
        self.stopped_epoch, self._last_epoch = 0, -1
        super().on_train_begin(logs)

    def on_epoch_end(self, epoch: int, logs: Optional[dict[str, float]] = None) -> None:
        self._last_epoch = epoch
        super().on_epoch_end(epoch, logs)

    def on_train_end(self, logs: Optional[dict[str, float]] = None) -> None:
        epochs = (self.params or {}).get("epochs", 0)
        if 0 <= self._last_epoch < epochs - 1 and not getattr(self.model, "stop_training", False):
            self.stopped_epoch = self._last_epoch
        super().on_train_end(logs)


class CSVLogger(Callback):
    """keras.callbacks.CSVLogger: one row per epoch (`epoch` and the logs' values, keys sorted;
    the `val_` columns added when the first epoch has none), written and flushed at each epoch's
    end, as Keras 3 writes it; append=True adds to an existing file (a header only if empty)."""

    def __init__(self, filename: Any, separator: str = ",", append: bool = False) -> None:
        super().__init__()
        self.sep = separator
        self.filename = os.fspath(filename)
        self.append = append
        self.writer: Any = None
        self.keys: Optional[list[str]] = None
        self.append_header = True
        self.csv_file: Any = None

    def on_train_begin(self, logs: Optional[dict[str, float]] = None) -> None:
        if self.append:
            if os.path.exists(self.filename):
                with open(self.filename) as f:
                    self.append_header = not bool(len(f.readline()))
            mode = "a"
        else:
            mode = "w"
        if self.csv_file and not self.csv_file.closed:
            self.csv_file.close()
        self.csv_file = open(self.filename, mode, newline="")
        self.writer, self.keys = None, None

    def on_epoch_end(self, epoch: int, logs: Optional[dict[str, float]] = None) -> None:
        logs = logs or {}

        def handle_value(k: Any) -> Any:
            zero_dim = isinstance(k, np.ndarray) and k.ndim == 0
            if isinstance(k, str):
                return k
            if isinstance(k, collections.abc.Iterable) and not zero_dim:
                return f'"[{", ".join(map(str, k))}]"'
            return k

        if self.keys is None:
            self.keys = sorted(logs.keys())
            if not any(k.startswith("val_") for k in self.keys) and self.keys:
                self.keys.extend([f"val_{k}" for k in self.keys])
        if not self.writer:
            sep = self.sep

            class Dialect(csv.excel):
                delimiter = sep

            self.writer = csv.DictWriter(
                self.csv_file, fieldnames=["epoch"] + (self.keys or []), dialect=Dialect
            )
            if self.append_header:
                self.writer.writeheader()
        row: dict[str, Any] = collections.OrderedDict({"epoch": epoch})
        row.update((key, handle_value(logs.get(key, "NA"))) for key in self.keys)
        self.writer.writerow(row)
        self.csv_file.flush()

    def on_train_end(self, logs: Optional[dict[str, float]] = None) -> None:
        if self.csv_file and not self.csv_file.closed:
            self.csv_file.close()
        self.writer = None


class _Renaming:
    """sys.stdout while the library's ModelCheckpoint runs for a `.keras` path: its messages name
    the weights file it wrote; the user's path is what Keras prints."""

    def __init__(self, out: Any, old: str, new: str) -> None:
        self._out, self._old, self._new = out, old, new

    def write(self, text: str) -> Any:
        return self._out.write(text.replace(self._old, self._new))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._out, name)


class ModelCheckpoint(_LibraryCallback):
    """keras.callbacks.ModelCheckpoint: the model at the end of each epoch (or only the best,
    with save_best_only) to `filepath`, which may hold `{epoch:02d}` and the logs' values
    (`{val_loss:.2f}`) as in Keras. A `.keras` path (save_weights_only=False, Keras's default)
    is Keras 3's whole-model archive, as model.save writes it; save_freq=N saves every N training
    batches instead of at epochs' ends (the path may name `{batch}` too, from 1 in its epoch, as
    Keras fills it), with the batch's running logs; with save_weights_only=True the
    suffix names the weight format: the ones the library writes (_core.checkpoint_suffixes():
    .weights.h5, .safetensors). Deciding, the messages and the weights file are the library's
    callback in both cases; for `.keras` it writes the weights to a private folder and this class
    puts them in the archive (_archive.write_archive) at the path Keras's rule formats."""

    def __init__(
        self,
        filepath: Any,
        monitor: str = "val_loss",
        verbose: int = 0,
        save_best_only: bool = False,
        save_weights_only: bool = False,
        mode: str = "auto",
        save_freq: Any = "epoch",
        initial_value_threshold: Optional[float] = None,
    ) -> None:
        from . import _archive

        super().__init__()
        reject_unsupported(
            "ModelCheckpoint", initial_value_threshold=(initial_value_threshold, None)
        )
        if save_freq != "epoch" and (not isinstance(save_freq, int) or isinstance(save_freq, bool)):
            raise ValueError(  # Keras's message
                f"Unrecognized save_freq: {save_freq}. "
                "Expected save_freq are 'epoch' or integer values"
            )
        if save_freq != "epoch" and save_freq < 1:
            raise ValueError(f"ModelCheckpoint: save_freq must be at least 1, got {save_freq}")
        self.save_freq = save_freq
        self._current_epoch = 0
        self.filepath = os.fspath(filepath)
        suffixes = list(_core.checkpoint_suffixes())
        if save_weights_only:
            if not any(self.filepath.endswith(s) for s in suffixes):
                raise ValueError(
                    f"ModelCheckpoint: with save_weights_only=True the filepath must end in "
                    f"{' or '.join(suffixes)} (the weight formats crossover writes), got "
                    f"filepath={self.filepath!r}"
                )
        else:
            _archive._refuse_legacy_h5(self.filepath, "ModelCheckpoint")
            if not self.filepath.endswith(".keras"):
                raise ValueError(
                    "ModelCheckpoint: the filepath provided must end in `.keras` (Keras model "
                    f"format), or give save_weights_only=True for {' or '.join(suffixes)}. "
                    f"Received: filepath={self.filepath}"
                )
        self.monitor = monitor
        self.verbose = verbose
        self.save_best_only = save_best_only
        self.save_weights_only = save_weights_only
        self.mode = _mode(mode, "ModelCheckpoint")
        self._staged: Optional[str] = None  # where the library writes a .keras path's weights
        library_path = self.filepath
        if not save_weights_only:
            staging = tempfile.mkdtemp(prefix="crossover-checkpoint-")
            weakref.finalize(self, shutil.rmtree, staging, True)
            self._staged = library_path = os.path.join(staging, _archive.WEIGHTS_MEMBER)
        self._core = _core.ModelCheckpoint(
            library_path,
            monitor,
            bool(save_best_only),
            mode,
            verbose > 0,
            0 if save_freq == "epoch" else int(save_freq),
        )

    def on_train_begin(self, logs: Optional[dict[str, float]] = None) -> None:
        folder = os.path.dirname(self.filepath)
        if folder and "{" not in folder:
            os.makedirs(folder, exist_ok=True)  # as Keras makes it
        super().on_train_begin(logs)

    def on_epoch_begin(self, epoch: int, logs: Optional[dict[str, float]] = None) -> None:
        self._current_epoch = epoch
        super().on_epoch_begin(epoch, logs)

    def _file_path(
        self, epoch: int, logs: Optional[dict[str, float]], batch: Optional[int] = None
    ) -> str:
        """Keras 3's _get_file_path: the filepath formatted with the epoch (from 1), the batch
        (from 1, for a save inside an epoch, unless the logs hold a 'batch') and the logs."""
        logs = logs or {}
        try:
            if batch is None or "batch" in logs:
                return self.filepath.format(epoch=epoch + 1, **logs)
            return self.filepath.format(epoch=epoch + 1, batch=batch + 1, **logs)
        except KeyError as e:
            raise KeyError(
                f'Failed to format this callback filepath: "{self.filepath}". Reason: {e}'
            ) from None

    def on_epoch_end(self, epoch: int, logs: Optional[dict[str, float]] = None) -> None:
        if self._staged is None:
            super().on_epoch_end(epoch, logs)
            return
        path = self._file_path(epoch, logs) if self.save_freq == "epoch" else ""
        self._into_archive(path, lambda: super(ModelCheckpoint, self).on_epoch_end(epoch, logs))

    def on_train_batch_end(self, batch: int, logs: Optional[dict[str, float]] = None) -> None:
        if self._staged is None:
            super().on_train_batch_end(batch, logs)
            return
        path = self._file_path(self._current_epoch, logs, batch)
        self._into_archive(
            path, lambda: super(ModelCheckpoint, self).on_train_batch_end(batch, logs)
        )

    def _into_archive(self, path: str, library_hook: Callable[[], None]) -> None:
        """Runs the library's hook, which may write the weights to the staging file, and puts
        them in a `.keras` archive at `path` when it did."""
        from . import _archive

        staged = self._staged
        assert staged is not None
        out = sys.stdout
        if out is not None:
            sys.stdout = _Renaming(out, staged, path)  # type: ignore[assignment]
        try:
            library_hook()
            if os.path.exists(staged):  # the library decided to save
                folder = os.path.dirname(path)
                if folder:
                    os.makedirs(folder, exist_ok=True)
                _archive.write_archive(
                    self.model, path, lambda p: shutil.move(staged, p), "ModelCheckpoint"
                )
        finally:
            if out is not None:
                sys.stdout = out
            if os.path.exists(staged):
                os.unlink(staged)


def _next_learning_rate(
    schedule: Callable[..., float], verbose: int, epoch: int, lr: float
) -> float:
    try:
        value = schedule(epoch, lr)
    except TypeError:  # Keras's old API: schedule(epoch)
        value = schedule(epoch)
    if not isinstance(value, (float, np.float32, np.float64)):  # as Keras: an int is refused too
        raise ValueError(f"The output of the `schedule` function should be a float. Got: {value}")
    if verbose > 0:  # Keras 3's line (io_utils.print_msg), the value as the schedule gave it
        sys.stdout.write(
            f"\nEpoch {epoch + 1}: LearningRateScheduler setting learning rate to {value}.\n"
        )
        sys.stdout.flush()
    return float(value)


def _refuse_a_schedule(model: Any) -> None:
    """Keras's TypeError where a callback would set the rate of an optimizer with a schedule (the
    library refuses it too, with a ValueError)."""
    if getattr(model.optimizer, "_schedule", None) is not None:
        raise TypeError(optimizers.NOT_SETTABLE)


class LearningRateScheduler(_LibraryCallback):
    """keras.callbacks.LearningRateScheduler: at each epoch's start the learning rate becomes
    schedule(epoch, lr) (or schedule(epoch), Keras's old form); logs get `learning_rate`."""

    def __init__(self, schedule: Callable[..., float], verbose: int = 0) -> None:
        super().__init__()
        self.schedule = schedule
        self.verbose = verbose
        # Not a bound method: the library's callback holding `self` would be a cycle through C++
        # that Python's collector cannot see.
        self._core = _core.LearningRateScheduler(
            functools.partial(_next_learning_rate, schedule, verbose)
        )

    def on_epoch_begin(self, epoch: int, logs: Optional[dict[str, float]] = None) -> None:
        _refuse_a_schedule(self.model)  # Keras sets the rate at every epoch's start
        super().on_epoch_begin(epoch, logs)

    def on_epoch_end(self, epoch: int, logs: Optional[dict[str, float]] = None) -> None:
        super().on_epoch_end(epoch, logs)
        if logs is not None:
            logs["learning_rate"] = float(self.model._model().learning_rate)


class ReduceLROnPlateau(_LibraryCallback):
    """keras.callbacks.ReduceLROnPlateau (the library's): multiplies the learning rate by `factor`
    after `patience` epochs without improvement of `monitor`; logs get `learning_rate` (the rate
    the epoch ran with, as Keras logs it)."""

    def __init__(
        self,
        monitor: str = "val_loss",
        factor: float = 0.1,
        patience: int = 10,
        verbose: int = 0,
        mode: str = "auto",
        min_delta: float = 1e-4,
        cooldown: int = 0,
        min_lr: float = 0.0,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        reject_unknown("ReduceLROnPlateau", kwargs, like="signature")
        if factor >= 1.0:
            raise ValueError(
                f"ReduceLROnPlateau does not support a factor >= 1.0. Received factor={factor}"
            )
        self.monitor = monitor
        self.factor = factor
        self.patience = patience
        self.verbose = verbose
        self.mode = _mode(mode, "ReduceLROnPlateau")
        self.min_delta = min_delta
        self.cooldown = cooldown
        self.min_lr = min_lr
        self._core = _core.ReduceLROnPlateau(
            monitor,
            float(factor),
            int(patience),
            float(min_delta),
            int(cooldown),
            float(min_lr),
            mode,
            verbose > 0,
        )

    def on_epoch_end(self, epoch: int, logs: Optional[dict[str, float]] = None) -> None:
        if logs is not None:
            logs["learning_rate"] = float(self.model._model().learning_rate)
        try:
            super().on_epoch_end(epoch, logs)
        except ValueError:  # the library refuses to set a schedule's rate, when it would reduce it
            _refuse_a_schedule(self.model)
            raise


class TensorBoard(Callback):
    """keras.callbacks.TensorBoard: the epoch's logs as scalars in TensorBoard event files, as Keras
    3 writes them: `log_dir/train` gets `epoch_<name>` for the training logs and
    `epoch_learning_rate`, `log_dir/validation` `epoch_<name>` for the `val_` logs (prefix
    dropped) and `evaluation_<name>_vs_iterations` after each evaluation, at the optimizer's step;
    `update_freq=N` (or 'batch') adds `batch_<name>` every N training batches, `histogram_freq=N`
    each weight's histogram (`<layer>/<weight>/histogram`) every N epochs,
    `write_steps_per_second` the steps per second. Written with tensorboardX (PyPI), flushed at
    each epoch's end. What TensorFlow alone has is refused: the profiler (`profile_batch`),
    embeddings and weight images; `write_graph` writes nothing (there is no TensorFlow graph)."""

    def __init__(
        self,
        log_dir: Any = "logs",
        histogram_freq: int = 0,
        write_graph: bool = True,
        write_images: bool = False,
        write_steps_per_second: bool = False,
        update_freq: Any = "epoch",
        profile_batch: Any = 0,
        embeddings_freq: int = 0,
        embeddings_metadata: Any = None,
    ) -> None:
        super().__init__()
        # TensorFlow's profiler, embeddings and weight images are not in crossover.
        reject_unsupported(
            "TensorBoard",
            profile_batch=(profile_batch, 0),
            embeddings_freq=(embeddings_freq, 0),
            embeddings_metadata=(embeddings_metadata, None),
            write_images=(write_images, False),
        )
        if update_freq != "epoch" and update_freq != "batch":
            if not isinstance(update_freq, int) or isinstance(update_freq, bool) or update_freq < 1:
                raise ValueError(
                    f"TensorBoard: update_freq must be 'epoch', 'batch' or a positive integer, "
                    f"got {update_freq!r}"
                )
        if not isinstance(histogram_freq, int) or histogram_freq < 0:
            raise ValueError(
                "TensorBoard: histogram_freq must be a non-negative integer, "
                f"got {histogram_freq!r}"
            )
        self.log_dir = os.fspath(log_dir)
        self.histogram_freq = histogram_freq
        self.write_graph = write_graph
        self.write_images = write_images
        self.write_steps_per_second = write_steps_per_second
        self.update_freq = 1 if update_freq == "batch" else update_freq
        self._writers: dict[str, Any] = {}
        self._global_train_batch = 0
        self._epoch_start = 0.0
        self._epoch_start_step = 0
        self._batch_start = 0.0

    def _writer(self, which: str) -> Any:
        if which not in self._writers:
            try:
                from tensorboardX import SummaryWriter
            except ImportError:
                raise ImportError(
                    "TensorBoard needs the tensorboardX package, which crossover installs with "
                    "itself: pip install tensorboardX"
                ) from None
            folder = os.path.join(self.log_dir, "train" if which == "train" else "validation")
            self._writers[which] = SummaryWriter(logdir=folder)
        return self._writers[which]

    def _step(self) -> int:
        optimizer = getattr(self.model, "optimizer", None)
        return int(getattr(optimizer, "iterations", 0)) if optimizer is not None else 0

    def on_train_begin(self, logs: Optional[dict[str, float]] = None) -> None:
        self._global_train_batch = 0

    def on_epoch_begin(self, epoch: int, logs: Optional[dict[str, float]] = None) -> None:
        if self.write_steps_per_second:
            import time

            self._epoch_start = time.time()
            self._epoch_start_step = self._step()

    def on_train_batch_begin(self, batch: int, logs: Optional[dict[str, float]] = None) -> None:
        self._global_train_batch += 1
        if self.write_steps_per_second:
            import time

            self._batch_start = time.time()

    def on_train_batch_end(self, batch: int, logs: Optional[dict[str, float]] = None) -> None:
        if self.update_freq == "epoch" or self._global_train_batch % self.update_freq:
            return
        w = self._writer("train")
        if self.write_steps_per_second:
            import time

            took = max(time.time() - self._batch_start, 1e-9)
            w.add_scalar("batch_steps_per_second", 1.0 / took, self._global_train_batch)
        for name, value in (logs or {}).items():
            w.add_scalar(f"batch_{name}", float(value), self._global_train_batch)

    def on_test_end(self, logs: Optional[dict[str, float]] = None) -> None:
        if getattr(self.model, "optimizer", None) is None or not logs:
            return
        w = self._writer("val")
        for name, value in logs.items():
            w.add_scalar(f"evaluation_{name}_vs_iterations", float(value), self._step())

    def on_epoch_end(self, epoch: int, logs: Optional[dict[str, float]] = None) -> None:
        logs = logs or {}
        train = {k: v for k, v in logs.items() if not k.startswith("val_")}
        val = {k[4:]: v for k, v in logs.items() if k.startswith("val_")}
        optimizer = getattr(self.model, "optimizer", None)
        if logs and optimizer is not None and hasattr(optimizer, "learning_rate"):
            train["learning_rate"] = float(np.asarray(optimizer.learning_rate))
        if logs and self.write_steps_per_second:
            import time

            took = max(time.time() - self._epoch_start, 1e-9)
            train["steps_per_second"] = (self._step() - self._epoch_start_step) / took
        if train:
            w = self._writer("train")
            for name, value in train.items():
                w.add_scalar(f"epoch_{name}", float(value), epoch)
        if val:
            w = self._writer("val")
            for name, value in val.items():
                w.add_scalar(f"epoch_{name}", float(value), epoch)
        if self.histogram_freq and epoch % self.histogram_freq == 0:
            w = self._writer("train")
            for layer in self.model.layers:
                kinds = layer._weight_kinds() if hasattr(layer, "_weight_kinds") else []
                for (name, _), value in zip(kinds, layer.get_weights()):
                    w.add_histogram(f"{layer.name}/{name}/histogram", np.asarray(value), epoch)
        for w in self._writers.values():
            w.flush()

    def on_train_end(self, logs: Optional[dict[str, float]] = None) -> None:
        for w in self._writers.values():
            w.close()
        self._writers = {}


__all__ = [
    "Callback",
    "CallbackList",
    "History",
    "EarlyStopping",
    "ModelCheckpoint",
    "CSVLogger",
    "TensorBoard",
    "LearningRateScheduler",
    "ReduceLROnPlateau",
]


def __getattr__(name: str) -> Any:
    from .._args import unsupported_attribute

    raise unsupported_attribute(
        "keras.callbacks",
        name,
        ", ".join(n for n in __all__ if n != "CallbackList")
        + " (and Callback subclasses)",
    )
