"""The TensorFlow/Keras surface public scripts use beyond training: versions, keras.backend and
keras.utils, what calling a model returns, tensor ops, loss and metric functions on arrays,
Softmax and a model used as a layer, Keras's names, fresh weights per model, layer inspection,
tf.data. Expected values are Keras 3.15's / TensorFlow 2.21's documented ones."""

import io

import numpy as np
import pytest

import crossover
import crossover as tf
from crossover import keras
from crossover.keras import layers


@pytest.fixture(autouse=True)
def fresh_names():
    keras.backend.clear_session()
    yield


def small(units=3, inputs=4, **kwargs):
    return keras.Sequential(
        [keras.Input(shape=(inputs,)), layers.Dense(units, activation="softmax")], **kwargs
    )


# --- versions --------------------------------------------------------------------------------
def test_versions_are_the_apis_crossover_implements_and_its_own_stays_available():
    assert tf.__version__ == "2.21.0" and tf.version.VERSION == "2.21.0"
    assert keras.__version__ == "3.15.1" and keras.version() == "3.15.1"
    assert tf.keras.__version__ == keras.__version__
    assert isinstance(crossover.__crossover_version__, str)
    assert crossover.__crossover_version__ != tf.__version__
    assert not callable(tf.version)  # importlib's version() no longer leaks in


def test_crossover_version_is_the_projects_in_the_build_tree_and_installed():
    """project()'s VERSION in CMakeLists.txt: the build tree's _build_version.py, or an installed
    package's metadata (made from the same line), never "unknown"."""
    import re
    from pathlib import Path

    cmake = (Path(__file__).resolve().parents[2] / "CMakeLists.txt").read_text()
    declared = re.search(r"project\(crossover VERSION ([0-9.]+)", cmake)
    assert declared is not None
    assert crossover.__crossover_version__ == declared.group(1)


# --- keras.backend, keras.config, tf.config ---------------------------------------------------
def test_backend_settings_keras_reports():
    assert keras.backend.image_data_format() == "channels_last"
    assert keras.config.image_data_format() == "channels_last"
    assert keras.backend.floatx() == "float32" and keras.backend.epsilon() == 1e-7
    keras.backend.set_image_data_format("channels_last")
    with pytest.raises(ValueError, match="data_format"):
        keras.backend.set_image_data_format("channels_first")
    with pytest.raises(ValueError, match="data_format"):
        keras.backend.set_image_data_format("nchw")


def test_enable_op_determinism_is_accepted():
    tf.config.experimental.enable_op_determinism()


def test_clear_session_starts_the_automatic_names_again():
    a, b = layers.Dense(2), layers.Dense(2)
    assert (a.name, b.name) == ("dense", "dense_1")
    keras.backend.clear_session()
    assert layers.Dense(2).name == "dense"


# --- names ------------------------------------------------------------------------------------
def test_layers_and_models_are_named_as_keras_names_them():
    m1 = keras.Sequential(
        [
            keras.Input(shape=(8, 8, 1)),
            layers.Conv2D(2, 3),
            layers.MaxPool2D(),
            layers.BatchNormalization(),
            layers.GlobalAvgPool2D(),
            layers.Dense(3),
            layers.ReLU(),
            layers.Softmax(),
        ]
    )
    m2 = small()
    assert [l.name for l in m1.layers] == [
        "conv2d",
        "max_pooling2d",
        "batch_normalization",
        "global_average_pooling2d",
        "dense",
        "re_lu",
        "softmax",
    ]
    assert (m1.name, m2.name) == ("sequential", "sequential_1")
    assert m2.layers[0].name == "dense_1"
    assert layers.Dense(1, name="mine").name == "mine"
    assert m1.get_layer("dense") is m1.layers[4] and m1.get_layer(index=0) is m1.layers[0]
    with pytest.raises(ValueError, match="No such layer: nope"):
        m1.get_layer("nope")


def test_aliases_are_the_same_classes():
    assert layers.MaxPool2D is layers.MaxPooling2D
    assert layers.AvgPool2D is layers.AveragePooling2D
    assert layers.GlobalAvgPool2D is layers.GlobalAveragePooling2D


# --- keras.utils ------------------------------------------------------------------------------
def test_to_categorical_is_keras_s():
    a = keras.utils.to_categorical([0, 1, 2, 3], num_classes=4)
    assert a.dtype == np.float64 and a.shape == (4, 4)
    np.testing.assert_array_equal(a, np.eye(4))
    b = keras.utils.to_categorical(np.array([[1], [0], [2]]))  # (N, 1): the 1 goes, max + 1
    assert b.shape == (3, 3)
    np.testing.assert_array_equal(b, np.eye(3)[[1, 0, 2]])
    c = keras.utils.to_categorical(np.array([[0, 1], [1, 1]], dtype=np.uint8), 2)
    assert c.shape == (2, 2, 2)
    t = keras.utils.to_categorical(tf.constant([2, 0]), 3)  # a tensor: float32, one_hot
    assert t.dtype == np.float32
    np.testing.assert_array_equal(t, [[0, 0, 1], [1, 0, 0]])


def test_plot_model_without_pydot_says_so_in_one_line(capsys, tmp_path):
    try:
        import pydot  # noqa: F401

        pytest.skip("pydot is installed here")
    except ImportError:
        pass
    assert keras.utils.plot_model(small(), to_file=str(tmp_path / "m.png")) is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pydot" in err and not (tmp_path / "m.png").exists()


# --- tensors and ops --------------------------------------------------------------------------
def test_calling_a_model_returns_a_tensor_like_value():
    model = small()
    x = np.random.default_rng(0).random((2, 4), dtype=np.float32)
    out = model(x)
    assert isinstance(out, tf.Tensor) and isinstance(out, np.ndarray)
    assert out.shape == (2, 3) and out.shape.as_list() == [2, 3] and out.dtype == tf.float32
    np.testing.assert_array_equal(out.numpy(), model.predict(x, verbose=0))
    assert type(out.numpy()) is np.ndarray
    assert repr(tf.constant(1.5)) == "<tf.Tensor: shape=(), dtype=float32, numpy=1.5>"
    assert str(tf.constant([1, 2])) == "tf.Tensor([1 2], shape=(2,), dtype=int32)"
    assert type(np.argmax(out, axis=1)) is np.ndarray  # numpy's functions give numpy
    # training=True: the engine's training pass, the same outputs without dropout.
    np.testing.assert_array_equal(model(x, training=True), out)


def test_the_beginner_quickstart_lines():
    model = keras.Sequential([keras.Input(shape=(28, 28)), layers.Flatten(), layers.Dense(10)])
    x = np.random.default_rng(1).random((1, 28, 28))
    predictions = model(x[:1]).numpy()
    probabilities = tf.nn.softmax(predictions).numpy()
    assert probabilities.shape == (1, 10) and abs(probabilities.sum() - 1) < 1e-6
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    loss = loss_fn(np.array([3]), predictions).numpy()
    assert loss.shape == () and loss.dtype == np.float32
    assert loss == pytest.approx(-np.log(probabilities[0, 3]), rel=1e-5)
    model.compile(optimizer="adam", loss=loss_fn, metrics=["accuracy"])
    rng = np.random.default_rng(2)
    xs, ys = rng.random((64, 28, 28)).astype(np.float32), rng.integers(0, 10, 64)
    # Before training: the loss evaluate reports is Keras's formula on the logits.
    z = model.predict(xs, verbose=0)
    lse = np.log(np.exp(z - z.max(1, keepdims=True)).sum(1)) + z.max(1)
    expected = float(np.mean(lse - z[np.arange(64), ys]))
    loss, accuracy = model.evaluate(xs, ys, verbose=0)
    assert loss == pytest.approx(expected, rel=1e-5)
    assert accuracy == pytest.approx(float(np.mean(z.argmax(1) == ys)))
    history = model.fit(xs, ys, epochs=2, verbose=0)
    assert len(history.history["loss"]) == 2
    logits = model(xs[:2]).numpy()
    assert np.abs(logits.sum(1) - 1).max() > 1e-3  # the raw logits, not probabilities
    probability_model = keras.Sequential([model, layers.Softmax()])
    p = probability_model(xs[:2]).numpy()
    assert p == pytest.approx(tf.nn.softmax(logits).numpy(), abs=1e-6)


def test_constant_and_convert_to_tensor_follow_tensorflows_dtypes():
    assert tf.constant(1.0).dtype == tf.float32 and tf.constant(1).dtype == tf.int32
    assert tf.constant([1.0, 2.0]).numpy().dtype == np.float32
    assert tf.convert_to_tensor(np.zeros(2)).dtype == tf.float64  # numpy keeps its dtype
    assert tf.constant(0.0, shape=(2, 3)).shape == (2, 3)
    assert tf.constant([1, 2], dtype=tf.float32).dtype == np.float32
    assert tf.cast(tf.constant([1.7, -1.7]), tf.int32).numpy().tolist() == [1, -1]
    assert tf.constant(2.5).numpy() == np.float32(2.5) and tf.constant(2.5).numpy().ndim == 0


def test_reductions_argmax_and_one_hot_are_tensorflows():
    x = tf.constant([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    assert tf.argmax(x).numpy().tolist() == [1, 0, 1]  # axis 0 by default
    assert tf.argmax(x, axis=1).numpy().tolist() == [1, 0]
    assert tf.argmax(x, axis=1).dtype == tf.int64
    assert tf.reduce_sum(x).numpy() == 18.0 and tf.reduce_sum(x, axis=0).numpy().tolist() == [
        8,
        5,
        5,
    ]
    assert tf.reduce_mean(x, axis=1, keepdims=True).shape == (2, 1)
    assert tf.reduce_mean(tf.constant([1, 2])).numpy() == 1  # an integer mean is an integer
    assert tf.math.reduce_max(x).numpy() == 7.0
    np.testing.assert_array_equal(tf.one_hot([0, 1, 2], 3), np.eye(3, dtype=np.float32))
    np.testing.assert_array_equal(
        tf.one_hot([0, 2, -1, 1], depth=3, on_value=5.0, off_value=0.0),
        [[5, 0, 0], [0, 0, 5], [0, 0, 0], [0, 5, 0]],
    )
    s = tf.nn.softmax(tf.constant([[1.0, 2.0, 3.0]])).numpy()
    np.testing.assert_allclose(s, [[0.09003057, 0.24472847, 0.66524096]], rtol=1e-6)


# --- loss and metric functions on arrays (the values in Keras's docstrings) -----------------
def test_loss_objects_called_on_arrays_give_keras_s_values():
    y_true, y_pred = [1, 2], [[0.05, 0.95, 0], [0.1, 0.8, 0.1]]
    assert keras.losses.SparseCategoricalCrossentropy()(y_true, y_pred).numpy() == pytest.approx(
        1.177, abs=5e-4
    )
    cce = keras.losses.CategoricalCrossentropy()
    assert cce([[0, 1, 0], [0, 0, 1]], y_pred).numpy() == pytest.approx(1.177, abs=5e-4)
    bce = keras.losses.BinaryCrossentropy(from_logits=True)
    assert bce([0, 1, 0, 0], [-18.6, 0.51, 2.94, -12.8]).numpy() == pytest.approx(0.865, abs=5e-4)
    mse = keras.losses.MeanSquaredError()
    assert mse([[0.0, 1.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 0.0]]).numpy() == 0.5
    assert (
        keras.losses.MeanSquaredError(reduction="sum")(
            [[0.0, 1.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 0.0]]
        ).numpy()
        == 1.0
    )
    mae = keras.losses.MeanAbsoluteError()
    assert mae([[0.0, 1.0], [0.0, 0.0]], [[1.0, 1.0], [1.0, 0.0]]).numpy() == 0.5


def test_loss_functions_are_per_sample_as_keras_s():
    a = np.eye(3, dtype=np.float32)
    b = np.array([[0.9, 0.05, 0.05], [0.05, 0.89, 0.06], [0.05, 0.01, 0.94]], np.float32)
    np.testing.assert_allclose(
        keras.losses.categorical_crossentropy(a, b), [0.10536, 0.11653, 0.06188], atol=1e-5
    )
    np.testing.assert_allclose(keras.losses.categorical_crossentropy(a, a), [0, 0, 0], atol=1e-6)
    c = np.array(
        [
            0.9,
            0.04,
            0.03,
            0.03,
            0.3,
            0.45,
            0.15,
            0.13,
            0.04,
            0.01,
            0.94,
            0.05,
            0.12,
            0.21,
            0.5,
            0.17,
        ]
    ).reshape(4, 4)
    np.testing.assert_allclose(
        keras.losses.categorical_crossentropy(np.eye(4), c),
        [0.10536, 0.82807, 0.1011, 1.77196],
        atol=1e-5,
    )
    sparse = keras.losses.sparse_categorical_crossentropy(
        [1, 2], [[0.05, 0.95, 0], [0.1, 0.8, 0.1]]
    )
    np.testing.assert_allclose(sparse, [0.0513, 2.303], atol=1e-3)
    np.testing.assert_allclose(keras.losses.mse([1.0, 2.0], [[1.0], [4.0]]), [0.0, 4.0])


def test_metric_objects_and_functions_on_arrays():
    m = keras.metrics.SparseCategoricalAccuracy()
    m.update_state([[2], [1]], [[0.1, 0.6, 0.3], [0.05, 0.95, 0]])
    assert m.result().numpy() == 0.5
    m.reset_state()
    assert m.result().numpy() == 0.0
    c = keras.metrics.CategoricalAccuracy()
    assert c([[0, 0, 1], [0, 1, 0]], [[0.1, 0.9, 0.8], [0.05, 0.95, 0]]).numpy() == 0.5
    b = keras.metrics.BinaryAccuracy()
    assert b([[1], [1], [0], [0]], [[0.98], [1], [0], [0.6]]).numpy() == 0.75
    np.testing.assert_array_equal(
        keras.metrics.sparse_categorical_accuracy([1, 2], [[0.1, 0.9, 0], [0.9, 0.1, 0]]),
        [1.0, 0.0],
    )
    mean = keras.metrics.Mean()
    mean.update_state([1, 3, 5, 7])
    assert mean.result().numpy() == 4.0
    rmse = keras.metrics.RootMeanSquaredError()
    np.testing.assert_allclose(rmse([[0.0, 0.0], [2.0, 2.0]], [[1.0, 1.0], [1.0, 3.0]]), 1.0)
    top5 = keras.metrics.TopKCategoricalAccuracy()
    assert top5([[0, 0, 1], [0, 1, 0]], [[0.1, 0.9, 0.8], [0.5, 0.1, 0.4]]).numpy() == 1.0
    scores = [[0.1, 0.9, 0.8], [0.5, 0.1, 0.4]]
    np.testing.assert_array_equal(
        keras.metrics.sparse_top_k_categorical_accuracy([2, 1], scores, k=2), [1.0, 0.0]
    )
    small().compile(optimizer="adam", loss="mse", metrics=["mae"])  # the engine computes it
    with pytest.raises(ValueError, match="not supported"):
        small().compile(optimizer="adam", loss="mse", metrics=["precision"])


def test_a_keras_loss_function_passed_to_compile_is_its_name():
    model = small()
    model.compile(optimizer="adam", loss=keras.losses.sparse_categorical_crossentropy)
    assert model._loss_name == "sparse_categorical_crossentropy"
    # One the engine has no op for trains with Keras's steps in Python (test_python_step_peers.py).
    mae = small()
    mae.compile(optimizer="adam", loss=keras.losses.MeanAbsoluteError())
    assert mae._steps_in_python() and not model._steps_in_python()


# --- Softmax, a model as a layer, shared weights ----------------------------------------------
def test_softmax_layer_is_the_softmax_activation():
    keras.utils.set_random_seed(3)
    logits = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(3)])
    x = np.random.default_rng(2).random((5, 4), dtype=np.float32)
    with_layer = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(3), layers.Softmax()])
    with_layer.layers[0].set_weights(logits.layers[0].get_weights())
    np.testing.assert_allclose(
        with_layer.predict(x, verbose=0), tf.nn.softmax(logits.predict(x, verbose=0)), rtol=1e-5
    )
    with pytest.raises(ValueError, match="axis"):
        layers.Softmax(axis=1)


def test_the_tutorials_probability_model_shares_the_trained_weights():
    keras.utils.set_random_seed(1)
    rng = np.random.default_rng(0)
    x = rng.random((64, 4), dtype=np.float32)
    y = rng.integers(0, 3, 64)
    model = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(3, activation="softmax")])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(x, y, epochs=1, verbose=0)
    probability_model = keras.Sequential([model, layers.Softmax()])
    assert probability_model.layers[0] is model and len(probability_model.layers) == 2
    p = probability_model(x[:5]).numpy()
    np.testing.assert_allclose(p, tf.nn.softmax(model.predict(x[:5], verbose=0)).numpy(), rtol=1e-5)
    # Training the inner model again: the outer one sees the new weights, and back.
    before = probability_model.predict(x[:5], verbose=0)
    model.fit(x, y, epochs=2, verbose=0)
    after = probability_model.predict(x[:5], verbose=0)
    assert not np.array_equal(before, after)
    np.testing.assert_allclose(
        after, tf.nn.softmax(model.predict(x[:5], verbose=0)).numpy(), rtol=1e-5
    )
    probability_model.layers[0].layers[0].set_weights(
        [np.zeros((4, 3), np.float32), np.zeros(3, np.float32)]
    )
    np.testing.assert_allclose(model.predict(x[:2], verbose=0), np.full((2, 3), 1 / 3), rtol=1e-6)
    assert len(probability_model.get_weights()) == 2


def test_fresh_models_draw_fresh_weights_and_a_seed_makes_it_reproducible():
    def three():
        keras.utils.set_random_seed(7)
        models = [small() for _ in range(3)]
        for m in models:
            m.compile(optimizer="adam", loss="mse")
        return [m.get_weights()[0] for m in models]

    first, again = three(), three()
    assert not np.array_equal(first[0], first[1]) and not np.array_equal(first[1], first[2])
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a, b)


# --- layer and model inspection ---------------------------------------------------------------
def test_layer_weights_kernel_bias_and_counts():
    model = keras.Sequential(
        [keras.Input(shape=(4,)), layers.Dense(3), layers.Dropout(0.1), layers.Dense(2)]
    )
    dense = model.layers[0]
    kernel, bias = dense.get_weights()
    assert kernel.shape == (4, 3) and bias.shape == (3,)
    np.testing.assert_array_equal(dense.kernel.numpy(), kernel)
    np.testing.assert_array_equal(dense.bias.numpy(), bias)
    assert dense.count_params() == 15 and model.layers[1].get_weights() == []
    assert [w.shape for w in model.weights] == [(4, 3), (3,), (3, 2), (2,)]
    assert len(model.trainable_weights) == 4 and model.non_trainable_weights == []
    dense.set_weights([np.ones((4, 3)), np.zeros(3)])
    np.testing.assert_array_equal(model.get_weights()[0], np.ones((4, 3)))
    with pytest.raises(ValueError, match="weight shape"):
        dense.set_weights([np.ones((3, 4)), np.zeros(3)])
    with pytest.raises(ValueError, match="expecting 2 weights"):
        dense.set_weights([np.ones((4, 3))])
    bn = keras.Sequential([keras.Input(shape=(3,)), layers.BatchNormalization()]).layers[0]
    assert len(bn.trainable_weights) == 2 and len(bn.non_trainable_weights) == 2


def test_an_unbuilt_layer_has_no_weights_yet():
    layer = layers.Dense(3)
    assert layer.get_weights() == [] and layer.weights == []
    with pytest.raises(ValueError, match="isn't built"):
        layer.count_params()


def test_metrics_names_are_keras_3s():
    model = small()
    assert model.metrics_names == []
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    assert model.metrics_names == ["loss", "compile_metrics"]
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    assert model.metrics_names == ["loss"]


def test_weights_survive_adding_a_layer():
    model = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(3)])
    kernel = model.get_weights()[0]
    model.add(layers.Dense(2))
    np.testing.assert_array_equal(model.get_weights()[0], kernel)


# --- fit with targets of shape (N,) -------------------------------------------------------------
def test_regression_targets_of_shape_n_train_a_dense_1():
    rng = np.random.default_rng(0)
    x = rng.random((64, 3), dtype=np.float32)
    y = x @ np.array([1.0, -2.0, 0.5], np.float32)
    model = keras.Sequential([keras.Input(shape=(3,)), layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
    history = model.fit(x, y, epochs=2, verbose=0, validation_data=(x, y))
    assert len(history.history["val_loss"]) == 2
    as_column = model.evaluate(x, y.reshape(-1, 1), verbose=0)
    assert model.evaluate(x, y, verbose=0) == as_column


# --- tf.data ------------------------------------------------------------------------------------
def test_a_dataset_of_arrays_iterates_and_trains_as_the_arrays_do():
    rng = np.random.default_rng(0)
    x = rng.random((50, 4), dtype=np.float32)
    y = rng.integers(0, 3, 50)
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    assert len(ds) == 50
    first_x, first_y = next(iter(ds))
    np.testing.assert_array_equal(first_x.numpy(), x[0]) and int(first_y) == y[0]
    batches = list(ds.batch(16))
    assert [len(b[0]) for b in batches] == [16, 16, 16, 2]
    assert len(ds.batch(16, drop_remainder=True)) == 3
    scaled = ds.map(lambda a, b: (a * 2, b)).batch(10).prefetch(tf.data.AUTOTUNE)
    np.testing.assert_allclose(next(iter(scaled))[0].numpy(), x[:10] * 2)

    def trained(data_fit):
        keras.utils.set_random_seed(4)
        model = small()
        model.compile(
            optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"]
        )
        return data_fit(model), model

    by_dataset, m1 = trained(lambda m: m.fit(ds.batch(8), epochs=2, verbose=0).history)
    by_arrays, m2 = trained(
        lambda m: m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    )
    assert by_dataset == by_arrays
    assert m1.evaluate(ds.batch(8), verbose=0) == m2.evaluate(x, y, batch_size=8, verbose=0)
    np.testing.assert_array_equal(
        m1.predict(tf.data.Dataset.from_tensor_slices(x).batch(8), verbose=0),
        m2.predict(x, batch_size=8, verbose=0),
    )
    with pytest.raises(ValueError, match="not batched"):
        m1.fit(ds, verbose=0)


def test_repeat_without_a_count_passes_without_end():
    """TensorFlow's repeat(): take(n) reads n batches of the stream, batched across the passes'
    ends; iterating it goes on pass after pass."""
    x = np.arange(10, dtype=np.float32)
    taken = [b.numpy().tolist() for b in tf.data.Dataset.from_tensor_slices(x).repeat().batch(4)
             .take(5)]  # fmt: skip
    assert taken == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 0, 1], [2, 3, 4, 5], [6, 7, 8, 9]]
    stream = iter(tf.data.Dataset.from_tensor_slices(x).repeat())
    assert [float(next(stream)) for _ in range(23)] == [float(i % 10) for i in range(23)]
    assert len(list(tf.data.Dataset.from_tensor_slices(x).repeat(2))) == 20


def test_summary_prints_through_print_fn():
    out = io.StringIO()
    small().summary(print_fn=lambda s, **k: out.write(s))
    assert "Total params" in out.getvalue()


# --- callbacks: CSVLogger, EarlyStopping.stopped_epoch -------------------------------------------
def fitted_with(callbacks, epochs=6, y_shift=0):
    keras.utils.set_random_seed(2)
    rng = np.random.default_rng(0)
    x = rng.random((64, 4), dtype=np.float32)
    y = rng.integers(0, 3, 64)
    model = small()
    model.compile(
        optimizer=keras.optimizers.SGD(1e-30),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    return model.fit(x, y, epochs=epochs, verbose=0, validation_split=0.25, callbacks=callbacks)


def test_csv_logger_writes_keras_s_rows(tmp_path):
    path = tmp_path / "log.csv"
    history = fitted_with([keras.callbacks.CSVLogger(path)], epochs=2)
    lines = path.read_text().splitlines()
    assert lines[0] == "epoch,accuracy,loss,val_accuracy,val_loss"
    first = lines[1].split(",")
    assert first[0] == "0" and float(first[2]) == history.history["loss"][0]
    assert len(lines) == 3
    fitted_with([keras.callbacks.CSVLogger(path, append=True)], epochs=1)
    assert len(path.read_text().splitlines()) == 4  # appended, no second header


def test_early_stopping_reports_the_epoch_it_stopped_at():
    stop = keras.callbacks.EarlyStopping(monitor="val_loss", patience=1)  # lr 1e-30: no change
    history = fitted_with([stop], epochs=6)
    assert len(history.epoch) == 2 and stop.stopped_epoch == 1
    keep_going = keras.callbacks.EarlyStopping(monitor="val_loss", patience=10)
    fitted_with([keep_going], epochs=3)
    assert keep_going.stopped_epoch == 0


def test_a_missing_callback_says_it_is_not_supported():
    with pytest.raises(AttributeError, match="BackupAndRestore is not supported"):
        keras.callbacks.BackupAndRestore


def test_build_gives_a_model_its_input_shape():
    model = keras.Sequential([layers.Flatten(), layers.Dense(3)])
    assert not model.built
    model.build((None, 2, 4))
    assert model.built and model.count_params() == 27 and model.input_shape == (None, 2, 4)


def test_steps_per_epoch_counts_the_optimizer_steps_as_keras():
    x = np.zeros((64, 4), np.float32)
    y = np.zeros(64, np.int64)
    model = small()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    assert len(model.fit(x, y, batch_size=16, steps_per_epoch=4, verbose=0).epoch) == 1
    assert model.optimizer.iterations == 4
    # 4 batches a pass, 3 an epoch: 3, then the 1 left (Keras's warning), then 3.
    model.fit(x, y, batch_size=16, epochs=3, steps_per_epoch=3, verbose=0)
    assert model.optimizer.iterations == 4 + 7
    with pytest.raises(ValueError, match="steps_per_epoch"):
        model.fit(x, y, batch_size=16, steps_per_epoch=0, verbose=0)


def test_sample_and_class_weights_are_taken_not_tripped_over_by_numpy():
    # An array sample_weight once failed inside with numpy's "truth value of an array is
    # ambiguous"; both now train (their values against Keras: test_sample_weight_peers.py).
    x = np.zeros((8, 4), np.float32)
    y = np.zeros(8, np.int64)
    model = small()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    h = model.fit(x, y, sample_weight=np.full(8, 0.5), verbose=0)
    assert np.isfinite(h.history["loss"][0])
    h = model.fit(x, y, class_weight={0: 2.0}, verbose=0)
    assert np.isfinite(h.history["loss"][0])


def test_keras_ops_have_numpy_semantics_as_keras_s():
    x = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]], np.float32)
    assert keras.ops.argmax(x).numpy() == 3  # flattened, unlike tf.argmax
    assert keras.ops.argmax(x, axis=1).numpy().tolist() == [1, 0]
    assert keras.ops.argmax(x, axis=1).dtype == np.int32
    assert keras.ops.sum(x, axis=0).numpy().tolist() == [8, 5, 5]
    assert type(keras.ops.convert_to_numpy(keras.ops.softmax(x))) is np.ndarray
    assert keras.ops.shape(x) == (2, 3)
    model = small()
    assert len(model.trainable_variables) == 2 and model.non_trainable_variables == []


def test_plot_model_draws_one_box_per_layer_through_pydot(monkeypatch, tmp_path):
    """With pydot there (a stand-in recording what plot_model asks of it): one node per layer,
    chained by edges, written in the format of the file's suffix."""
    import sys
    import types

    drawn = {"nodes": [], "edges": [], "written": None}

    class Dot:
        def set(self, *args):
            pass

        def set_node_defaults(self, **kwargs):
            pass

        def add_node(self, node):
            drawn["nodes"].append(node.label)

        def add_edge(self, edge):
            drawn["edges"].append(edge.ends)

        def write(self, path, format):
            drawn["written"] = (path, format)

    class Node:
        def __init__(self, name, label):
            self.label = label

    class Edge:
        def __init__(self, a, b):
            self.ends = (a, b)

    monkeypatch.setitem(sys.modules, "pydot", types.SimpleNamespace(Dot=Dot, Node=Node, Edge=Edge))
    model = small()
    keras.utils.plot_model(model, to_file=str(tmp_path / "m.svg"), show_layer_names=True)
    assert drawn["nodes"] == ["dense (Dense)"]
    model2 = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(2), layers.Softmax()])
    drawn["nodes"].clear()
    keras.utils.plot_model(model2, to_file=str(tmp_path / "m.png"))
    assert drawn["nodes"] == ["Dense", "Softmax"] and drawn["edges"] == [("0", "1")]
    assert drawn["written"] == (str(tmp_path / "m.png"), "png")


def test_the_logging_calls_scripts_make_to_quiet_tensorflow():
    import logging

    tf.get_logger().setLevel("ERROR")
    assert tf.get_logger() is logging.getLogger("tensorflow")
    tf.autograph.set_verbosity(0)
    tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.ERROR)
    assert tf.get_logger().level == logging.ERROR and tf.executing_eagerly()


_KERAS_SUMMARY = """\
Model: "sequential"
┏━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━┓
┃ Layer (type)                    ┃ Output Shape           ┃       Param # ┃
┡━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━┩
│ flatten (Flatten)               │ (None, 784)            │             0 │
├─────────────────────────────────┼────────────────────────┼───────────────┤
│ dense (Dense)                   │ (None, 128)            │       100,480 │
├─────────────────────────────────┼────────────────────────┼───────────────┤
│ dropout (Dropout)               │ (None, 128)            │             0 │
├─────────────────────────────────┼────────────────────────┼───────────────┤
│ dense_1 (Dense)                 │ (None, 10)             │         1,290 │
└─────────────────────────────────┴────────────────────────┴───────────────┘
 Total params: 101,770 (397.54 KB)
 Trainable params: 101,770 (397.54 KB)
 Non-trainable params: 0 (0.00 B)"""


def test_summary_is_keras_3s_table_for_the_quickstart_model():
    """The text Keras 3 prints for the TensorFlow quickstart's model outside a terminal (76
    columns); after training Adam's variables (2 per weight + 2) are counted too."""
    model = keras.Sequential(
        [
            layers.Flatten(input_shape=(28, 28)),
            layers.Dense(128, activation="relu"),
            layers.Dropout(0.2),
            layers.Dense(10, activation="softmax"),
        ]
    )
    lines = []
    model.summary(line_length=76, print_fn=lines.append)
    assert lines == [_KERAS_SUMMARY]
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(np.zeros((4, 28, 28), np.float32), np.zeros(4), epochs=1, verbose=0)
    lines.clear()
    model.summary(line_length=76, print_fn=lines.append)
    assert lines[0].endswith(
        " Total params: 305,312 (1.16 MB)\n Trainable params: 101,770 (397.54 KB)\n"
        " Non-trainable params: 0 (0.00 B)\n Optimizer params: 203,542 (795.09 KB)"
    )


def test_summary_of_a_model_built_by_its_first_fit_shows_the_built_layers():
    """A Sequential made without an input shape is built by fit's data, as in Keras: summary()
    then shows each layer's output shape and parameters (Keras 3.15's numbers), not "unbuilt"."""
    model = keras.Sequential(
        [layers.Flatten(), layers.Dense(64, activation="relu"), layers.Dense(10)]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(np.zeros((4, 28, 28, 1), np.float32), np.zeros(4), epochs=1, verbose=0)
    lines = []
    model.summary(line_length=76, print_fn=lines.append)
    assert "(None, 784)" in lines[0] and "50,240" in lines[0] and "unbuilt" not in lines[0]
    assert " Trainable params: 50,890 (198.79 KB)" in lines[0]


def test_pop_removes_the_last_layer_and_output_shape_follows():
    model = keras.Sequential([keras.Input(shape=(4,)), layers.Dense(3), layers.Dense(2)])
    kernel = model.get_weights()[0]
    assert model.output_shape == (None, 2)
    last = model.pop()
    assert last.name == "dense_1" and model.output_shape == (None, 3)
    np.testing.assert_array_equal(model.get_weights()[0], kernel)
    assert len(model.get_weights()) == 2


def test_a_mirrored_strategy_is_one_replica_whose_scope_models_are_made_in():
    strategy = tf.distribute.MirroredStrategy()
    assert strategy.num_replicas_in_sync == 1
    with strategy.scope():
        model = keras.Sequential([keras.Input(shape=(3,)), layers.Dense(2)])
        model.compile(optimizer="adam", loss="mse")
    model.fit(np.zeros((4, 3), np.float32), np.zeros((4, 2), np.float32), verbose=0)
    with tf.distribute.OneDeviceStrategy("/cpu:0").scope():
        assert crossover._device.current() == "cpu"
    with pytest.raises(NotImplementedError, match="several devices in one process"):
        tf.distribute.MirroredStrategy(["/gpu:0", "/gpu:1"])
    with pytest.raises(AttributeError, match="strategy.run"):
        strategy.run(lambda: None)
    with pytest.raises(AttributeError, match="distribute.TPUStrategy is not supported"):
        tf.distribute.TPUStrategy


def test_one_hot_of_floats_as_tensorflow_takes_them():
    """A numpy array of floats is converted (truncated) as TensorFlow converts it; a float
    tensor is TensorFlow's InvalidArgumentError."""
    np.testing.assert_array_equal(
        tf.one_hot(np.array([1.0, 2.7, -1.0], np.float32), depth=3),
        [[0, 1, 0], [0, 0, 1], [0, 0, 0]],
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match="int32 or int64"):
        tf.one_hot(tf.constant([1.0, 2.0]), depth=3)
