"""The learning-rate callbacks and the callbacks' verbose messages against Keras 3 itself.

Each test drives a callback as Keras's fit does (set_model, on_train_begin, on_epoch_end with the
epoch's logs) on a scripted sequence of monitored values, and expects what Keras 3.15.1 (with
TensorFlow 2.21, numpy 2.4) did on the same script: the learning rates (float32, as Keras's
variable holds them), the `learning_rate` each epoch's logs got, and the text printed to
sys.stdout. The expected values were produced by running the same script on real Keras
(keras.callbacks.* on a keras.Sequential compiled with SGD); keras/src/callbacks/*.py has the
rules and the text."""

import numpy as np
import pytest

from crossover import _core, keras
from crossover.keras import callbacks, layers


def model(learning_rate: float = 0.1) -> keras.Sequential:
    m = keras.Sequential([layers.Input((3,)), layers.Dense(2)])
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=learning_rate), loss="mse")
    return m


def f32(v: float) -> float:
    return float(np.float32(v))


def test_reduce_lr_on_plateau_follows_keras_through_cooldown_and_min_lr(capsys):
    m = model(0.1)
    cb = callbacks.ReduceLROnPlateau(
        monitor="val_loss", factor=0.5, patience=1, cooldown=2, min_lr=0.02, verbose=1, mode="min"
    )
    cb.set_model(m)
    cb.on_train_begin()
    script = [1.0, 1.0, 1.0, 1.0, 0.5, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, "raise", 0.6, 0.6, 0.6, 0.6]
    rates, logged, epoch = [], [], 0
    for v in script:
        if v == "raise":  # a user raising the rate between epochs (Keras: immediately reduced)
            m.optimizer.learning_rate = 0.08
            continue
        logs = {"val_loss": v}
        cb.on_epoch_end(epoch, logs)
        rates.append(float(m.optimizer.learning_rate))
        logged.append(logs["learning_rate"])
        epoch += 1
    # Keras 3: at min_lr during the wait nothing is reduced, so no cooldown starts and the wait
    # keeps counting; the raised rate is then reduced at the next epoch.
    assert rates[:11] == [f32(r) for r in [0.1, 0.05, 0.05, 0.025, 0.025] + [0.02] * 6]
    assert rates[11:] == [f32(0.04), f32(0.04), f32(0.02), f32(0.02)] and len(rates) == 15
    assert logged == [f32(r) for r in [0.1, 0.1, 0.05, 0.05, 0.025, 0.025] + [0.02] * 5] + [
        f32(0.08),
        f32(0.04),
        f32(0.04),
        f32(0.02),
    ]
    assert capsys.readouterr().out == (
        "\nEpoch 2: ReduceLROnPlateau reducing learning rate to 0.05000000074505806.\n"
        "\nEpoch 4: ReduceLROnPlateau reducing learning rate to 0.02500000037252903.\n"
        "\nEpoch 6: ReduceLROnPlateau reducing learning rate to 0.02.\n"
        "\nEpoch 12: ReduceLROnPlateau reducing learning rate to 0.03999999910593033.\n"
        "\nEpoch 14: ReduceLROnPlateau reducing learning rate to 0.02.\n"
    )


def test_reduce_lr_on_plateau_compares_the_monitor_in_float32_as_keras(capsys):
    m = model(0.1)
    cb = callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=1, min_delta=0)
    cb.set_model(m)
    cb.on_train_begin()
    rates = []
    for epoch, v in enumerate([0.3, 0.3 - 1e-12, 0.3 - 1e-12, 0.25]):
        cb.on_epoch_end(epoch, {"loss": v})
        rates.append(float(m.optimizer.learning_rate))
    # 0.3 - 1e-12 is below 0.3 as a double, equal as float32: no improvement in Keras.
    assert rates == [f32(0.1), f32(0.05), f32(0.025), f32(0.025)]
    assert capsys.readouterr().out == ""  # verbose=0


def test_early_stopping_prints_keras_lines_and_restores_the_best_epoch(capsys):
    m = model()
    best_weights = None
    cb = callbacks.EarlyStopping(
        monitor="loss", patience=2, verbose=1, restore_best_weights=True, mode="min"
    )
    cb.set_model(m)
    cb.on_train_begin()
    for epoch, v in enumerate([0.5, 0.4, 0.45, 0.41, 0.42]):
        m.set_weights([w + 1.0 for w in m.get_weights()])  # "training" changes the weights
        if epoch == 1:
            best_weights = m.get_weights()
        cb.on_epoch_end(epoch, {"loss": v})
        if epoch == 3:  # Keras stops here: the library's stop request is read by fit
            break
    cb.on_train_end()
    assert capsys.readouterr().out == (
        "Epoch 4: early stopping\nRestoring model weights from the end of the best epoch: 2.\n"
    )
    for got, want in zip(m.get_weights(), best_weights):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("best_only", [False, True])
def test_model_checkpoint_prints_keras_lines(best_only, tmp_path, capsys):
    m = model()
    cb = callbacks.ModelCheckpoint(
        str(tmp_path / "w-{epoch:02d}-{loss:.3f}.weights.h5"),
        monitor="loss",
        verbose=1,
        save_best_only=best_only,
        save_weights_only=True,
        mode="min",
    )
    cb.set_model(m)
    cb.on_train_begin()
    for epoch, v in enumerate([0.5, 0.4, 0.45]):
        cb.on_epoch_begin(epoch)
        cb.on_epoch_end(epoch, {"loss": v})
    one, two = tmp_path / "w-01-0.500.weights.h5", tmp_path / "w-02-0.400.weights.h5"
    if best_only:
        want = (
            f"\nEpoch 1: loss improved from None to 0.50000, saving model to {one}\n"
            f"\nEpoch 1: finished saving model to {one}\n"
            f"\nEpoch 2: loss improved from 0.50000 to 0.40000, saving model to {two}\n"
            f"\nEpoch 2: finished saving model to {two}\n"
            f"\nEpoch 3: loss did not improve from 0.40000\n"
        )
    else:
        want = "".join(
            f"\nEpoch {e}: saving model to {tmp_path}/w-0{e}-{v}.weights.h5\n"
            f"\nEpoch {e}: finished saving model to {tmp_path}/w-0{e}-{v}.weights.h5\n"
            for e, v in ((1, "0.500"), (2, "0.400"), (3, "0.450"))
        )
    assert capsys.readouterr().out == want


def test_learning_rate_scheduler_prints_the_value_as_keras_does(capsys):
    m = model()
    values = [0.05, np.float32(0.05), 1.0, 1e-5]
    cb = callbacks.LearningRateScheduler(lambda epoch, lr: values[epoch], verbose=1)
    cb.set_model(m)
    for epoch in range(4):
        cb.on_epoch_begin(epoch)
    assert capsys.readouterr().out == (
        "\nEpoch 1: LearningRateScheduler setting learning rate to 0.05.\n"
        "\nEpoch 2: LearningRateScheduler setting learning rate to 0.05000000074505806.\n"
        "\nEpoch 3: LearningRateScheduler setting learning rate to 1.0.\n"
        "\nEpoch 4: LearningRateScheduler setting learning rate to 1e-05.\n"
    )
    assert float(m.optimizer.learning_rate) == f32(1e-5)


def test_the_library_prints_a_float_as_python_repr_does():
    rng = np.random.default_rng(0)
    values = [0.0, 1.0, 2.0, -3.0, 0.1, 0.02, 1e-4, 1e-5, 9.99e-5, 1e15, 1e16, 1234567890123456.0]
    values += [float("inf"), float("-inf"), 123.0, 1e22, 2.5e-308]
    values += [float(v) for v in rng.uniform(-1, 1, 200) * 10.0 ** rng.integers(-12, 20, 200)]
    values += [float(np.float32(v)) for v in rng.uniform(0, 1, 200)]
    for v in values:
        assert _core.python_float_repr(v) == repr(v)


def test_the_learning_rate_reads_the_engine_after_the_callbacks_change_it():
    x = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
    y = np.zeros((64, 2), np.float32)
    m = model(0.1)
    sched = callbacks.LearningRateScheduler(lambda epoch, lr: lr / 2)
    m.fit(x, y, epochs=3, verbose=0, callbacks=[sched])
    lr = m.optimizer.learning_rate
    assert float(lr) == f32(0.1 / 8) and lr.numpy() == np.float32(0.1 / 8)
    assert lr.numpy().dtype == np.float32 and np.asarray(lr) == np.float32(0.1 / 8)
    assert keras.backend.get_value(lr) == np.float32(0.1 / 8)
    assert lr is m.optimizer.learning_rate and lr * 8 == np.float32(0.1)
    assert repr(lr) == (
        f"<Variable path=sgd/learning_rate, shape=(), dtype=float32, value={f32(0.0125)}>"
    )


def test_setting_the_learning_rate_between_fits_takes_effect():
    x = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
    y = np.zeros((64, 2), np.float32)
    m = model(0.1)
    m.fit(x, y, epochs=1, verbose=0)
    m.optimizer.learning_rate = 0.05
    keep = callbacks.LearningRateScheduler(lambda epoch, lr: lr)  # logs the rate the epoch ran at
    history = m.fit(x, y, epochs=1, verbose=0, callbacks=[keep]).history
    assert history["learning_rate"] == [f32(0.05)]
    m.optimizer.learning_rate.assign(0.025)
    history = m.fit(x, y, epochs=1, verbose=0, callbacks=[keep]).history
    assert history["learning_rate"] == [f32(0.025)]
    keras.backend.set_value(m.optimizer.learning_rate, 0.5)
    assert float(m.optimizer.learning_rate) == 0.5


def test_a_named_optimizer_is_a_keras_optimizer_object_after_compile():
    m = keras.Sequential([layers.Input((3,)), layers.Dense(2)])
    m.compile(optimizer="adam", loss="mse")
    assert isinstance(m.optimizer, keras.optimizers.Adam)
    assert float(m.optimizer.learning_rate) == f32(0.001)
    # Compiled again with it, the model keeps the rate its engine had (as a Keras variable).
    m.optimizer.learning_rate = 0.003
    m.compile(optimizer=m.optimizer, loss="mse")
    assert float(m.optimizer.learning_rate) == f32(0.003)


def test_a_scheduled_learning_rate_is_read_at_the_current_step_and_not_settable():
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, decay_steps=2, decay_rate=0.5)
    m = keras.Sequential([layers.Input((3,)), layers.Dense(2)])
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=schedule), loss="mse")
    x, y = np.zeros((8, 3), np.float32), np.zeros((8, 2), np.float32)
    m.fit(x, y, batch_size=2, epochs=1, verbose=0)  # 4 steps
    assert float(m.optimizer.learning_rate) == f32(0.1 * 0.5**2)
    with pytest.raises(TypeError, match="not settable"):
        m.optimizer.learning_rate = 0.5


@pytest.mark.parametrize(
    "monitor, metrics, refused",
    [
        ("val_accuracy", ["accuracy"], False),
        ("loss", [], False),
        ("learning_rate", ["accuracy"], True),
        ("val_accuracy", [], True),
        ("acc", ["accuracy"], True),
    ],
)
def test_mode_auto_refuses_what_keras_cannot_direct(monitor, metrics, refused):
    # Keras 3.15.1 on the same fits: a ValueError ("isn't able to automatically determine whether
    # that metric should be maximized or minimized") for the refused ones, at the first epoch's end.
    rng = np.random.default_rng(0)
    x, y = rng.random((64, 4), dtype=np.float32), rng.integers(0, 3, 64)
    m = keras.Sequential([layers.Input((4,)), layers.Dense(3, activation="softmax")])
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=metrics)
    fit = lambda: m.fit(  # noqa: E731
        x, y, epochs=1, verbose=0, validation_split=0.5,
        callbacks=[callbacks.EarlyStopping(monitor=monitor)],
    )
    if refused:
        with pytest.raises(ValueError, match="mode 'auto' cannot tell whether it should be"):
            fit()
    else:
        fit()
