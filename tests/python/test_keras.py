"""crossover.keras as a Keras user calls it. Imports the installed package (pip install .);
builds nothing. Run: python -m pytest tests/python"""

import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import crossover as tf
from crossover import keras
from crossover.keras import layers

MNIST_10K = Path(__file__).resolve().parents[2] / "data" / "mnist-10k" / "mnist-10k.npz"


@pytest.fixture(scope="module")
def mnist():
    with np.load(MNIST_10K) as d:
        return (d["x_train"] / 255.0, d["y_train"]), (d["x_test"] / 255.0, d["y_test"])


def small_model() -> keras.Sequential:
    """The seed's SMALL model, as the seed's script writes it."""
    return tf.keras.models.Sequential(
        [
            tf.keras.layers.Flatten(input_shape=(28, 28)),
            tf.keras.layers.Dense(128, activation="relu"),
            tf.keras.layers.Dropout(0.2),
            tf.keras.layers.Dense(10, activation="softmax"),
        ]
    )


@pytest.fixture(scope="module")
def trained(mnist):
    (x_train, y_train), _ = mnist
    model = small_model()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(x_train, y_train, epochs=2, validation_split=0.1, verbose=0)
    return model, history


def test_import_crossover_as_tf_gives_keras_names():
    assert tf.keras.Sequential is tf.keras.models.Sequential
    assert tf.keras.layers.Dense is layers.Dense
    # Keras 3's automatic names: the symbolic tensor "keras_tensor[_N]", its layer "input_layer[_N]";
    # a name given is the tensor's.
    inp = tf.keras.Input(shape=(4,))
    assert inp.name.startswith("keras_tensor") and inp._keras_history[0].name.startswith(
        "input_layer"
    )
    assert tf.keras.Input(shape=(4,), name="img").name == "img"


def test_the_seed_model_learns_mnist_10k(trained, mnist):
    model, _ = trained
    _, (x_test, y_test) = mnist
    loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
    assert accuracy > 0.85
    assert 0 < loss < 1


def test_history_has_keras_keys_per_epoch(trained):
    _, history = trained
    assert set(history.history) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert history.epoch == [0, 1]
    assert all(len(v) == 2 for v in history.history.values())
    assert history.history["loss"][1] < history.history["loss"][0]


def test_validation_data_gives_val_keys(mnist):
    (x, y), (xv, yv) = mnist
    model = small_model()
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate=0.1),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    h = model.fit(x[:512], y[:512], batch_size=64, validation_data=(xv[:256], yv[:256]), verbose=0)
    assert sorted(h.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]


def test_evaluate_returns_loss_and_accuracy_or_the_loss_alone(mnist):
    _, (x, y) = mnist
    with_metrics = small_model()
    with_metrics.compile(
        optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"]
    )
    result = with_metrics.evaluate(x, y, verbose=0)
    assert isinstance(result, list) and len(result) == 2
    without = small_model()
    without.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    assert isinstance(without.evaluate(x, y, verbose=0), float)


def test_predict_returns_probabilities_as_numpy(trained, mnist):
    model, _ = trained
    _, (x, _) = mnist
    p = model.predict(x[:100], verbose=0)
    assert isinstance(p, np.ndarray) and p.shape == (100, 10) and p.dtype == np.float32
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-5)


def test_weights_are_in_keras_shapes_and_order_and_round_trip(trained, mnist):
    model, _ = trained
    _, (x, _) = mnist
    weights = model.get_weights()
    assert [w.shape for w in weights] == [(784, 128), (128,), (128, 10), (10,)]
    before = model.predict(x[:10], verbose=0)
    model.set_weights([np.zeros_like(w) for w in weights])
    assert all(not w.any() for w in model.get_weights())
    np.testing.assert_allclose(model.predict(x[:10], verbose=0), 0.1, rtol=1e-6)
    model.set_weights(weights)
    for got, want in zip(model.get_weights(), weights):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(model.predict(x[:10], verbose=0), before)


def test_a_list_and_add_build_the_same_model():
    listed = small_model()
    added = keras.Sequential()
    added.add(layers.Input(shape=(28, 28)))
    added.add(layers.Flatten())
    added.add(layers.Dense(128, activation="relu"))
    added.add(layers.Dropout(0.2))
    added.add(layers.Dense(10, activation="softmax"))
    assert listed.count_params() == added.count_params() == 101_770


def test_summary_prints_the_layers(capsys):
    small_model().summary()
    out = capsys.readouterr().out
    assert "dense (Dense)" in out and "dense_1 (Dense)" in out
    assert "Total params: 101,770 (397.54 KB)" in out and "InputLayer" not in out


def test_fit_prints_keras_progress_line(mnist, capfd):
    (x, y), _ = mnist
    model = small_model()
    model.compile(
        optimizer=keras.optimizers.Adam(learning_rate=1e-3),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    model.fit(x[:320], y[:320], epochs=1, verbose=1)
    out = capfd.readouterr().out
    assert "Epoch 1/1" in out
    assert (
        "10/10 [==============================]" in out
        and "- loss: " in out
        and "- accuracy: " in out
    )


def test_compile_keeps_weights_set_before_it():
    model = small_model()
    zeros = [np.zeros_like(w) for w in model.get_weights()]
    model.set_weights(zeros)
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    assert all(not w.any() for w in model.get_weights())


def test_compile_takes_its_positional_arguments_in_keras_order():
    # Keras 3: compile(optimizer, loss, loss_weights, metrics, ...): the third is loss_weights.
    model = small_model()
    model.compile("adam", "sparse_categorical_crossentropy", None, ["accuracy"])
    x, y = np.zeros((8, 28, 28), np.float32), np.zeros(8, np.int64)
    assert set(model.evaluate(x, y, verbose=0, return_dict=True)) == {"loss", "accuracy"}
    with pytest.raises(ValueError, match="loss_weights"):
        model.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])


# --- errors ------------------------------------------------------------------------------
def compiled_small() -> keras.Sequential:
    model = small_model()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def test_an_unknown_keyword_is_refused_as_keras_3_refuses_it():
    # Keras 3.15.1's own errors, type and text: a layer's ValueError, an optimizer's ValueError,
    # and Python's TypeError for the classes that take no **kwargs (metrics, losses, schedules).
    with pytest.raises(ValueError, match="Unrecognized keyword arguments passed to Dense"):
        layers.Dense(10, kernel_size=3)
    with pytest.raises(ValueError, match=r"^Argument\(s\) not recognized: \{'lr': 0.1\}$"):
        keras.optimizers.RMSprop(lr=0.1)
    with pytest.raises(
        TypeError,
        match=r"^SparseCategoricalAccuracy.__init__\(\) got an unexpected keyword argument 'foo'$",
    ):
        keras.metrics.SparseCategoricalAccuracy(foo=1)
    with pytest.raises(TypeError, match=r"^MeanSquaredError.__init__\(\) got an unexpected"):
        keras.losses.MeanSquaredError(foo=1)


def test_an_unsupported_keras_argument_is_named():
    with pytest.raises(ValueError, match="kernel_constraint"):
        layers.Dense(10, kernel_constraint="max_norm")


def test_an_unknown_activation_is_a_value_error():
    with pytest.raises(ValueError, match="activation"):
        layers.Dense(10, activation="swishy")


def test_an_unknown_optimizer_or_loss_is_a_value_error():
    with pytest.raises(ValueError, match="optimizer"):
        small_model().compile(optimizer="ftrl", loss="mse")
    with pytest.raises(ValueError, match="loss"):
        small_model().compile(optimizer="adam", loss="hinge")


def test_fit_before_compile_is_a_value_error(mnist):
    (x, y), _ = mnist
    with pytest.raises(ValueError, match="compile"):
        small_model().fit(x[:32], y[:32], verbose=0)


def test_a_wrong_input_shape_is_a_value_error(mnist):
    (x, y), _ = mnist
    with pytest.raises(ValueError):
        compiled_small().fit(x[:32, :27, :27], y[:32], verbose=0)


def test_a_label_out_of_range_is_a_value_error(mnist):
    (x, _), _ = mnist
    with pytest.raises(ValueError, match="label 10"):
        compiled_small().fit(x[:4], np.array([1, 2, 10, 3]), verbose=0)


def test_set_weights_with_a_wrong_shape_is_a_value_error():
    model = compiled_small()
    weights = model.get_weights()
    weights[0] = np.zeros((10, 10), np.float32)
    with pytest.raises(ValueError, match="shape"):
        model.set_weights(weights)
    with pytest.raises(ValueError, match="4 weight tensors, 3 were given"):
        model.set_weights(weights[:3])


def test_dense_takes_the_input_shape_of_the_model():
    model = keras.Sequential([layers.Dense(8, input_shape=(4,)), layers.Activation("relu")])
    assert model.count_params() == 40
    assert model.predict(np.ones((3, 4)), verbose=0).shape == (3, 8)


def test_ctrl_c_during_fit_raises_keyboard_interrupt_with_the_model_intact(mnist):
    (x, y), _ = mnist
    model = compiled_small()
    python_handler = signal.getsignal(signal.SIGINT)
    # A real SIGINT from another thread while the library trains with the GIL released.
    timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt, match="after the current step"):
        model.fit(x[:320], y[:320], epochs=100_000, verbose=0)
    timer.join()
    assert len(model.history.epoch) < 100_000  # stopped by the signal, not by the end of fit
    assert all(np.isfinite(w).all() for w in model.get_weights())
    assert np.isfinite(model.predict(x[:4], verbose=0)).all()
    assert np.isfinite(model.fit(x[:320], y[:320], epochs=1, verbose=0).history["loss"][0])
    assert signal.getsignal(signal.SIGINT) is python_handler


def test_ctrl_c_at_any_moment_of_a_step_leaves_the_process_intact(mnist, monkeypatch):
    # SIGINT lands wherever the step is, oneDNN's JIT kernels included: the handler must run on a
    # stack of its own (their data below the stack pointer was overwritten: heap corruption about
    # one press in five before the fix, nearly always within 15 presses). The thread count is
    # pinned so that each press lands in training, not in the first fit's thread measurement.
    monkeypatch.setenv("CROSSOVER_THREADS", "1")
    (x, y), _ = mnist
    for i in range(15):
        model = compiled_small()
        timer = threading.Timer(0.05 + 0.013 * i, os.kill, (os.getpid(), signal.SIGINT))
        timer.start()
        with pytest.raises(KeyboardInterrupt, match="after the current step"):
            model.fit(x[:320], y[:320], epochs=100_000, verbose=0)
        timer.join()
        assert np.isfinite(model.fit(x[:320], y[:320], epochs=1, verbose=0).history["loss"][0])


def test_ctrl_c_while_the_first_fit_measures_threads_says_so(mnist, monkeypatch, tmp_path):
    # The first fit of a CPU model without a thread count measures the fastest count first (the
    # library's trial fits, which do not stop on Ctrl-C): a press then is not lost but a
    # KeyboardInterrupt that says where it landed, and the model trains afterwards. A profile folder of its own, so
    # that no count saved by another test skips the measurement.
    monkeypatch.delenv("CROSSOVER_THREADS", raising=False)
    monkeypatch.setenv("CROSSOVER_PROFILE_DIR", str(tmp_path))
    (x, y), _ = mnist
    # Two layers of 1,000 (the seed's BIG): the measurement takes about a second here, so the
    # press lands in it on a machine five times as fast too.
    model = keras.Sequential(
        [
            keras.Input((28, 28)),
            layers.Flatten(),
            layers.Dense(1000, activation="relu"),
            layers.Dense(1000, activation="relu"),
            layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    timer = threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt, match="while measuring the thread count"):
        model.fit(x[:320], y[:320], epochs=1, verbose=0)
    timer.join()
    assert np.isfinite(model.fit(x[:320], y[:320], epochs=1, verbose=0).history["loss"][0])


class _CtrlC(keras.callbacks.Callback):
    """Presses Ctrl-C `times` times at the start of the second epoch."""

    def __init__(self, times):
        super().__init__()
        self.times = times

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == 1:
            for _ in range(self.times):
                os.kill(os.getpid(), signal.SIGINT)


def test_ctrl_c_stops_after_the_current_step_and_fit_trains_on(mnist):
    (x, y), _ = mnist
    model = compiled_small()
    with pytest.raises(KeyboardInterrupt, match="after the current step"):
        model.fit(x[:320], y[:320], epochs=5, verbose=0, callbacks=[_CtrlC(1)])
    core = model._model()
    assert core.optimizer_steps == 10 + 1  # the first epoch's 10 steps, then one more
    assert model.history.epoch == [0]  # the epochs finished
    weights = model.get_weights()
    assert all(np.isfinite(w).all() for w in weights)
    model.fit(x[:320], y[:320], epochs=1, verbose=0)
    assert core.optimizer_steps == 21
    assert any((a != b).any() for a, b in zip(weights, model.get_weights()))


def test_python_s_sigint_handler_is_back_after_fit():
    model = compiled_small()
    model.fit(np.zeros((32, 28, 28)), np.zeros(32), verbose=0)
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)  # Python's handler: KeyboardInterrupt right here
        for _ in range(1000):
            time.sleep(0.01)


def test_a_second_ctrl_c_is_python_s_keyboard_interrupt_not_the_end_of_python(mnist):
    (x, y), _ = mnist
    model = compiled_small()
    with pytest.raises(KeyboardInterrupt):
        model.fit(x[:320], y[:320], epochs=5, verbose=0, callbacks=[_CtrlC(2)])
    assert np.isfinite(model.predict(x[:4], verbose=0)).all()  # still here, model intact
