"""Batch-level callback hooks in fit, evaluate and predict, on_test/predict_begin/end,
ModelCheckpoint(save_freq=N), fit(steps_per_epoch=, validation_steps=, validation_freq=) and the
progress line's metric names, as Keras 3 has them."""

import io
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import callbacks, layers

MNIST_10K = Path(__file__).resolve().parents[2] / "data" / "mnist-10k" / "mnist-10k.npz"
HOOKS = [
    "on_train_begin",
    "on_train_end",
    "on_epoch_begin",
    "on_epoch_end",
    "on_train_batch_begin",
    "on_train_batch_end",
    "on_test_begin",
    "on_test_end",
    "on_test_batch_begin",
    "on_test_batch_end",
    "on_predict_begin",
    "on_predict_end",
    "on_predict_batch_begin",
    "on_predict_batch_end",
]


@pytest.fixture(scope="module")
def data():
    with np.load(MNIST_10K) as d:
        return d["x_train"][:320] / 255.0, d["y_train"][:320]


def compiled(metrics=("accuracy",)) -> keras.Sequential:
    model = keras.Sequential(
        [
            layers.Flatten(input_shape=(28, 28)),
            layers.Dense(16, activation="relu"),
            layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=list(metrics))
    return model


def recorder() -> callbacks.Callback:
    """A callback overriding every hook: records (hook, batch or epoch, logs)."""

    def hook(name):
        def f(self, *args, logs=None):
            index = args[0] if args and isinstance(args[0], int) else None
            if logs is None and args and isinstance(args[-1], dict):
                logs = args[-1]
            self.calls.append((name, index, dict(logs or {})))

        return f

    cls = type("Recorder", (callbacks.Callback,), {name: hook(name) for name in HOOKS})
    cb = cls()
    cb.calls = []
    return cb


def test_fit_evaluate_and_predict_call_every_hook_in_keras_order(data):
    x, y = data
    model = compiled(["acc"])
    rec = recorder()
    # 64 rows in batches of 32: 2 train steps; 40 validation rows: 2 test batches.
    history = model.fit(
        x[:64], y[:64], batch_size=32, epochs=2, validation_data=(x[64:104], y[64:104]),
        verbose=0, callbacks=[rec],
    )
    per_epoch = ["on_epoch_begin"] + ["on_train_batch_begin", "on_train_batch_end"] * 2
    per_epoch += ["on_test_begin"] + ["on_test_batch_begin", "on_test_batch_end"] * 2
    per_epoch += ["on_test_end", "on_epoch_end"]
    names = [c[0] for c in rec.calls]
    assert names == ["on_train_begin"] + per_epoch * 2 + ["on_train_end"]
    train_ends = [c for c in rec.calls if c[0] == "on_train_batch_end"]
    assert [c[1] for c in train_ends] == [0, 1, 0, 1]
    assert all(sorted(c[2]) == ["acc", "loss"] for c in train_ends)
    # After an epoch's last batch, the running means are the epoch's numbers.
    for epoch in range(2):
        last = train_ends[2 * epoch + 1][2]
        assert last["loss"] == pytest.approx(history.history["loss"][epoch], rel=1e-12)
        assert last["acc"] == pytest.approx(history.history["acc"][epoch], rel=1e-12)
    test_ends = [c for c in rec.calls if c[0] == "on_test_end"]
    assert test_ends[1][2]["loss"] == pytest.approx(history.history["val_loss"][1], rel=1e-12)

    rec.calls.clear()
    loss, acc = model.evaluate(x[:70], y[:70], verbose=0, callbacks=[rec])
    names = [c[0] for c in rec.calls]
    assert names == ["on_test_begin"] + ["on_test_batch_begin", "on_test_batch_end"] * 3 + [
        "on_test_end"
    ]
    assert rec.calls[-1][2] == {"acc": pytest.approx(acc), "loss": pytest.approx(loss)}

    rec.calls.clear()
    predictions = model.predict(x[:70], verbose=0, callbacks=[rec])
    names = [c[0] for c in rec.calls]
    assert names == ["on_predict_begin"] + [
        "on_predict_batch_begin",
        "on_predict_batch_end",
    ] * 3 + ["on_predict_end"]
    outputs = [c[2]["outputs"] for c in rec.calls if c[0] == "on_predict_batch_end"]
    assert [o.shape for o in outputs] == [(32, 10), (32, 10), (6, 10)]
    np.testing.assert_array_equal(np.concatenate(outputs), predictions)


def test_only_the_phases_a_callback_overrides_are_asked_for(data):
    x, y = data
    model = compiled()

    class EpochsOnly(callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            pass

    class OldStyle(callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.batches = []

        def on_batch_end(self, batch, logs=None):  # Keras's alias of on_train_batch_end
            self.batches.append(batch)

    params = {"verbose": 0, "epochs": 1, "steps": 1}
    quiet = callbacks.CallbackList([EpochsOnly()], model, params)
    assert not any(quiet.wants_batches(p) for p in ("train", "test", "predict"))
    old = OldStyle()
    listed = callbacks.CallbackList([old], model, params)
    assert listed.wants_batches("train") and not listed.wants_batches("test")
    model.fit(x[:100], y[:100], epochs=2, verbose=0, callbacks=[old])
    assert old.batches == [0, 1, 2, 3, 0, 1, 2, 3]


def test_stop_training_in_a_batch_hook_ends_training_after_that_batch(data):
    x, y = data
    model = compiled()

    class StopAtOne(callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 1:
                self.model.stop_training = True

    history = model.fit(x, y, epochs=3, verbose=0, callbacks=[StopAtOne()])
    assert history.epoch == [0]
    assert model.optimizer.iterations == 2


def test_model_checkpoint_save_freq_writes_at_keras_batches(data, tmp_path):
    x, y = data
    model = compiled()
    pattern = str(tmp_path / "w{epoch:02d}-{batch:03d}.weights.h5")
    ckpt = callbacks.ModelCheckpoint(pattern, save_weights_only=True, save_freq=4)
    model.fit(x, y, epochs=2, verbose=0, callbacks=[ckpt])  # 10 batches an epoch
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "w01-004.weights.h5",
        "w01-008.weights.h5",
        "w02-002.weights.h5",
        "w02-006.weights.h5",
        "w02-010.weights.h5",
    ]
    # The last one holds the final weights.
    other = compiled()
    other.load_weights(str(tmp_path / "w02-010.weights.h5"))
    for a, b in zip(model.get_weights(), other.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_model_checkpoint_save_freq_writes_whole_keras_archives(data, tmp_path):
    x, y = data
    model = compiled()
    ckpt = callbacks.ModelCheckpoint(str(tmp_path / "m-{epoch}-{batch}.keras"), save_freq=5)
    out = io.StringIO()
    with redirect_stdout(out):
        model.fit(x, y, epochs=1, verbose=0, callbacks=[ckpt])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m-1-10.keras", "m-1-5.keras"]
    loaded = keras.models.load_model(str(tmp_path / "m-1-10.keras"))
    np.testing.assert_array_equal(loaded.predict(x[:5], verbose=0), model.predict(x[:5], verbose=0))


def test_model_checkpoint_save_freq_verbose_says_keras_lines(data, tmp_path):
    x, y = data
    path = str(tmp_path / "m.weights.h5")
    ckpt = callbacks.ModelCheckpoint(path, save_weights_only=True, save_freq=10, verbose=1)
    out = io.StringIO()
    with redirect_stdout(out):
        compiled().fit(x, y, epochs=1, verbose=0, callbacks=[ckpt])
    assert out.getvalue() == (
        f"\nEpoch 1: saving model to {path}\n\nEpoch 1: finished saving model to {path}\n"
    )


def test_steps_per_epoch_without_a_batch_size_sets_it_as_keras(data):
    x, y = data
    model = compiled()
    # Keras's ArrayDataAdapter: batch ceil(100 / 7) = 15, so 7 batches a pass.
    history = model.fit(x[:100], y[:100], epochs=2, steps_per_epoch=7, verbose=0)
    assert model.optimizer.iterations == 14
    assert history.params["steps"] == 7


def test_validation_freq_and_steps(data):
    x, y = data
    model = compiled()
    rec = recorder()
    history = model.fit(
        x[:64], y[:64], epochs=4, validation_data=(x[64:], y[64:]), validation_freq=2,
        validation_steps=1, verbose=0, callbacks=[rec],
    )
    assert len(history.history["val_loss"]) == 2
    assert sum(1 for c in rec.calls if c[0] == "on_test_batch_end") == 2
    with pytest.raises(ValueError, match="validation_freq"):
        model.fit(x, y, epochs=2, validation_split=0.25, validation_freq=[1, 2], verbose=0)


@pytest.mark.parametrize("name", ["acc", "sparse_categorical_accuracy", "accuracy"])
def test_the_progress_line_names_the_metric_as_it_was_given(data, name):
    x, y = data
    model = compiled([name])
    out = io.StringIO()
    with redirect_stdout(out):
        model.fit(x[:64], y[:64], epochs=1, verbose=2, validation_split=0.5)
        model.evaluate(x[:64], y[:64], verbose=1)
    text = out.getvalue()
    assert f" - {name}: " in text and f" - val_{name}: " in text
    assert text.count(f" - {name}: ") == 2  # the epoch's line and evaluate's
    if name != "accuracy":
        assert " - accuracy: " not in text


def test_a_batch_hook_costs_nothing_when_no_callback_has_one(data):
    """Without a batch hook the engine's CallbackList is asked once per loop and not per batch:
    fit with an epoch-only callback makes exactly its epoch calls."""
    x, y = data
    asked = []

    class Counting(callbacks.CallbackList):
        def wants_batches(self, phase):
            asked.append(phase)
            return super().wants_batches(phase)

        def on_train_batch_end(self, batch, logs):  # never reached
            raise AssertionError("a batch hook was called")

    model = compiled()
    lst = Counting([], model, {"verbose": 0, "epochs": 2, "steps": 10})
    model._model().fit(
        x.astype(np.float32), y.astype(np.float32), 2, 32, True, 0.25, None, None, 0, 0, lst,
        False,
    )
    assert asked == ["train", "test"]
