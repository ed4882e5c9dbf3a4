"""keras.callbacks on crossover: a user's Callback, History, EarlyStopping, ModelCheckpoint,
LearningRateScheduler and ReduceLROnPlateau, as a Keras script uses them."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import callbacks, layers

MNIST_10K = Path(__file__).resolve().parents[2] / "data" / "mnist-10k" / "mnist-10k.npz"


@pytest.fixture(scope="module")
def data():
    with np.load(MNIST_10K) as d:
        return d["x_train"][:320] / 255.0, d["y_train"][:320]


def compiled(optimizer="adam") -> keras.Sequential:
    model = keras.Sequential(
        [
            layers.Flatten(input_shape=(28, 28)),
            layers.Dense(32, activation="relu"),
            layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer=optimizer, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


class Recorder(callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.calls = []
        self.logs = []

    def on_train_begin(self, logs=None):
        self.calls.append(("train_begin", dict(logs)))

    def on_epoch_begin(self, epoch, logs=None):
        self.calls.append(("epoch_begin", epoch))

    def on_epoch_end(self, epoch, logs=None):
        self.calls.append(("epoch_end", epoch))
        self.logs.append(dict(logs))

    def on_train_end(self, logs=None):
        self.calls.append(("train_end", dict(logs)))


def test_a_user_callback_stops_training_with_stop_training(data):
    x, y = data

    class StopAfterTwo(callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                self.model.stop_training = True

    model = compiled()
    history = model.fit(x, y, epochs=10, verbose=0, callbacks=[StopAfterTwo()])
    assert history.epoch == [0, 1]
    assert len(history.history["loss"]) == 2
    assert model.stop_training


def test_hooks_are_called_in_keras_order_with_keras_logs_equal_to_history(data):
    x, y = data
    recorder = Recorder()
    model = compiled()
    history = model.fit(x, y, epochs=2, validation_split=0.25, verbose=0, callbacks=[recorder])
    assert [c[0] for c in recorder.calls] == [
        "train_begin",
        "epoch_begin",
        "epoch_end",
        "epoch_begin",
        "epoch_end",
        "train_end",
    ]
    assert recorder.calls[0][1] == {}
    assert all(set(l) == {"loss", "accuracy", "val_loss", "val_accuracy"} for l in recorder.logs)
    for key, values in history.history.items():
        assert values == [l[key] for l in recorder.logs]
    assert recorder.calls[-1][1] == recorder.logs[-1]  # on_train_end gets the last epoch's logs
    assert recorder.model is model
    assert recorder.params == {"verbose": 0, "epochs": 2, "steps": 8}
    assert model.history is history


def test_keys_a_callback_adds_to_logs_reach_history(data):
    x, y = data

    class AddKey(callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            logs["twice_loss"] = 2 * logs["loss"]

    history = compiled().fit(x, y, epochs=2, verbose=0, callbacks=[AddKey()])
    assert history.history["twice_loss"] == [2 * v for v in history.history["loss"]]


def test_a_callback_may_predict_and_evaluate_but_not_compile_during_fit(data):
    x, y = data
    seen = []

    class Peek(callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.append(self.model.evaluate(x[:64], y[:64], verbose=0))
            seen.append(self.model.predict(x[:4], verbose=0).shape)

    compiled().fit(x, y, epochs=1, verbose=0, callbacks=[Peek()])
    assert seen[1] == (4, 10) and np.isfinite(seen[0]).all()

    class Recompile(callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            self.model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")

    with pytest.raises(ValueError, match="during fit"):
        compiled().fit(x, y, epochs=1, verbose=0, callbacks=[Recompile()])


def test_an_exception_in_a_callback_leaves_fit_as_that_exception_with_the_model_intact(data):
    x, y = data

    class Boom(Exception):
        pass

    raised = Boom("from on_epoch_end")

    class Raise(callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 1:
                raise raised

    model = compiled()
    with pytest.raises(Boom) as info:
        model.fit(x, y, epochs=5, verbose=0, callbacks=[Raise()])
    assert info.value is raised
    assert all(np.isfinite(w).all() for w in model.get_weights())
    history = model.fit(x, y, epochs=1, verbose=0)  # the model trains on
    assert np.isfinite(history.history["loss"][0])


def test_a_callback_that_is_not_a_callback_is_refused(data):
    x, y = data
    with pytest.raises(TypeError, match="Callback"):
        compiled().fit(x, y, epochs=1, verbose=0, callbacks=[lambda: None])


def test_early_stopping_on_val_loss_stops_after_patience_epochs_without_improvement(data):
    x, y = data
    # A learning rate so small that val_loss never improves by min_delta after the first epoch.
    model = compiled(keras.optimizers.SGD(learning_rate=1e-9))
    stop = callbacks.EarlyStopping(monitor="val_loss", min_delta=0.01, patience=2)
    history = model.fit(x, y, epochs=20, validation_split=0.25, verbose=0, callbacks=[stop])
    assert history.epoch == [0, 1, 2]  # as Keras: the best, then 2 without improvement
    assert model.stop_training


def test_early_stopping_takes_keras_arguments_and_refuses_what_it_does_not_run():
    assert callbacks.EarlyStopping(baseline=0.5, start_from_epoch=2).patience == 0
    assert callbacks.EarlyStopping(verbose=1).verbose == 1
    with pytest.raises(ValueError, match="mode"):
        callbacks.EarlyStopping(mode="largest")


def test_learning_rate_scheduler_sets_the_rate_each_epoch_and_logs_it(data):
    x, y = data
    seen = []

    def schedule(epoch, lr):
        seen.append(lr)
        return 0.1 * 0.5**epoch

    model = compiled(keras.optimizers.SGD(learning_rate=0.01))
    history = model.fit(
        x, y, epochs=3, verbose=0, callbacks=[callbacks.LearningRateScheduler(schedule)]
    )
    assert history.history["learning_rate"] == pytest.approx([0.1, 0.05, 0.025])
    assert seen == pytest.approx([0.01, 0.1, 0.05])
    assert model._model().learning_rate == pytest.approx(0.025)


def test_a_schedule_that_fails_or_returns_no_float_is_an_error(data):
    x, y = data

    def broken(epoch, lr):
        raise ZeroDivisionError("in the schedule")

    with pytest.raises(ZeroDivisionError, match="in the schedule"):
        compiled().fit(x, y, verbose=0, callbacks=[callbacks.LearningRateScheduler(broken)])
    with pytest.raises(ValueError, match="should be a float"):
        compiled().fit(
            x, y, verbose=0, callbacks=[callbacks.LearningRateScheduler(lambda e, lr: "fast")]
        )


def test_reduce_lr_on_plateau_halves_the_rate_when_the_loss_stalls(data):
    x, y = data
    model = compiled(keras.optimizers.SGD(learning_rate=1e-9))
    reduce = callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=1, min_delta=0.01)
    history = model.fit(x, y, epochs=3, verbose=0, callbacks=[reduce])
    # Keras logs the rate each epoch ran with, before reducing it.
    assert history.history["learning_rate"] == pytest.approx([1e-9, 1e-9, 5e-10])
    assert model._model().learning_rate == pytest.approx(2.5e-10)
    with pytest.raises(ValueError, match="factor"):
        callbacks.ReduceLROnPlateau(factor=1.0)


def test_model_checkpoint_writes_a_file_per_epoch_named_from_the_logs(data, tmp_path):
    x, y = data
    pattern = str(tmp_path / "ckpt" / "w-{epoch:02d}-{loss:.2f}.safetensors")
    check = callbacks.ModelCheckpoint(pattern, monitor="loss", save_weights_only=True)
    history = compiled().fit(x, y, epochs=2, verbose=0, callbacks=[check])
    expected = sorted(
        f"w-{e + 1:02d}-{loss:.2f}.safetensors" for e, loss in enumerate(history.history["loss"])
    )
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == expected


def test_model_checkpoint_with_save_best_only_writes_only_improvements(data, tmp_path):
    x, y = data
    model = compiled(keras.optimizers.SGD(learning_rate=0.1))
    # mode="max" on a falling val_loss: only the first epoch is an improvement.
    check = callbacks.ModelCheckpoint(
        str(tmp_path / "best-{epoch}.safetensors"),
        monitor="val_loss",
        mode="max",
        save_best_only=True,
        save_weights_only=True,
    )
    history = model.fit(x, y, epochs=3, validation_split=0.25, verbose=0, callbacks=[check])
    assert history.history["val_loss"][2] < history.history["val_loss"][0]
    assert [p.name for p in tmp_path.iterdir()] == ["best-1.safetensors"]


def test_model_checkpoint_refuses_what_crossover_cannot_write(tmp_path):
    with pytest.raises(ValueError, match=r"\.safetensors"):
        callbacks.ModelCheckpoint(str(tmp_path / "m.keras"), save_weights_only=True)
    with pytest.raises(ValueError, match="save_weights_only=True"):
        callbacks.ModelCheckpoint(str(tmp_path / "m.safetensors"))
    with pytest.raises(ValueError, match="Unrecognized save_freq: batch"):
        callbacks.ModelCheckpoint(
            str(tmp_path / "m.safetensors"), save_weights_only=True, save_freq="batch"
        )
