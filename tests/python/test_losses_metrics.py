"""keras.losses objects and names, and the metrics the engine computes, in compile."""

import numpy as np
import pytest

from crossover import keras
from crossover.keras import losses, metrics


def model(units=3, activation="softmax"):
    return keras.Sequential([keras.layers.Dense(units, activation=activation, input_shape=(4,))])


def sparse_data():
    rng = np.random.default_rng(3)
    return rng.random((40, 4)), rng.integers(0, 3, 40)


def history_of(loss, metric_list, y_transform=lambda y: y, activation="softmax"):
    keras.utils.set_random_seed(0)  # each model draws fresh weights: the same seed for each run
    x, y = sparse_data()
    m = model(activation=activation)
    m.compile(optimizer="sgd", loss=loss, metrics=metric_list)
    return m.fit(x, y_transform(y), batch_size=8, epochs=2, validation_split=0.25, verbose=0)


def one_hot(y):
    return np.eye(3, dtype=np.float32)[y]


@pytest.mark.parametrize(
    "obj,name,transform,activation",
    [
        (
            losses.SparseCategoricalCrossentropy(),
            "sparse_categorical_crossentropy",
            None,
            "softmax",
        ),
        (losses.CategoricalCrossentropy(), "categorical_crossentropy", one_hot, "softmax"),
        (losses.BinaryCrossentropy(), "binary_crossentropy", one_hot, "sigmoid"),
        (losses.MeanSquaredError(), "mean_squared_error", one_hot, "linear"),
        (losses.MeanSquaredError(), "mse", one_hot, "linear"),
    ],
)
def test_a_loss_object_trains_exactly_as_its_name(obj, name, transform, activation):
    transform = transform or (lambda y: y)
    by_object = history_of(obj, None, transform, activation).history
    by_name = history_of(name, None, transform, activation).history
    assert by_object == by_name and len(by_object["loss"]) == 2


@pytest.mark.parametrize(
    "make",
    [
        lambda: losses.CategoricalCrossentropy(label_smoothing=0.1),
        lambda: losses.MeanSquaredError(reduction="sum"),
    ],
)
def test_a_loss_argument_the_engine_does_not_run_trains_in_python_steps(make):
    """Keras's own step (keras/_python_step.py): one batch, the History's loss is the object's
    value on the outputs before the update."""
    loss, (x, y) = make(), sparse_data()
    y = np.eye(3, dtype=np.float32)[y.astype(int)]
    m = model()
    m.compile(optimizer="sgd", loss=loss)
    before = float(loss(y, m.predict(x, verbose=0)))
    history = m.fit(x, y, batch_size=len(x), epochs=1, verbose=0).history
    assert history["loss"][0] == pytest.approx(before, rel=1e-5)
    assert float(loss(y, m.predict(x, verbose=0))) < before


def test_a_python_step_takes_data_as_keras_gives_it():
    """A loss function gets y_true of the outputs' rank ((N,) targets against (N, 1) outputs:
    Keras's squeeze_or_expand_to_same_rank), and fit takes x and y in lists of one array."""

    def squared(y_true, y_pred):
        return keras.ops.mean(keras.ops.square(y_true - y_pred), axis=-1)

    rs = np.random.RandomState(3)
    x, y = rs.rand(12, 4).astype(np.float32), rs.rand(12).astype(np.float32)
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    m.compile(optimizer="sgd", loss=squared)
    before = np.mean(np.square(y[:, None] - m.predict(x, verbose=0)))  # not (12, 12)
    history = m.fit([x], [y], batch_size=12, epochs=1, verbose=0).history
    assert history["loss"][0] == pytest.approx(before, rel=1e-5)


def test_from_logits_after_a_softmax_trains_on_the_softmax_input_and_predicts_its_output():
    # Keras 3 (TensorFlow) takes the softmax's input back as the logits (and warns):
    # test_from_logits_peers.py checks it against Keras itself.
    x, y = sparse_data()
    soft, linear = model(), model(activation=None)
    for m in (soft, linear):
        m.compile(optimizer="sgd", loss=losses.SparseCategoricalCrossentropy(from_logits=True))
    linear.set_weights(soft.get_weights())
    h_soft = soft.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    h_linear = linear.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    assert h_soft == h_linear
    z = linear.predict(x, verbose=0)
    e = np.exp(z - z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(soft.predict(x, verbose=0), e / e.sum(1, keepdims=True), atol=1e-6)


def test_ignore_class_is_refused_by_name():
    with pytest.raises(ValueError, match="ignore_class"):
        losses.SparseCategoricalCrossentropy(ignore_class=0)


def test_an_unknown_loss_name_is_refused():
    with pytest.raises(ValueError, match="unknown loss 'hinge'"):
        model().compile(optimizer="sgd", loss="hinge")
    with pytest.raises(AttributeError, match="LogCosh is not supported"):
        losses.LogCosh


@pytest.mark.parametrize(
    "given,key",
    [
        ("accuracy", "accuracy"),
        ("acc", "acc"),
        ("sparse_categorical_accuracy", "sparse_categorical_accuracy"),
        (metrics.SparseCategoricalAccuracy(), "sparse_categorical_accuracy"),
        (metrics.SparseCategoricalAccuracy(name="acc2"), "acc2"),
    ],
)
def test_the_accuracy_is_keyed_as_the_user_named_it(given, key):
    h = history_of("sparse_categorical_crossentropy", [given]).history
    assert sorted(h) == sorted(["loss", key, "val_loss", f"val_{key}"])
    reference = history_of("sparse_categorical_crossentropy", ["accuracy"]).history
    assert h[key] == reference["accuracy"] and h[f"val_{key}"] == reference["val_accuracy"]


def test_evaluate_names_the_metric_as_compile_did():
    x, y = sparse_data()
    m = model()
    m.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=["acc"])
    # Keras 3 (TensorFlow) returns the dict sorted by name.
    assert list(m.evaluate(x, y, verbose=0, return_dict=True)) == ["acc", "loss"]


@pytest.mark.parametrize(
    "loss,metric",
    [
        ("categorical_crossentropy", metrics.CategoricalAccuracy()),
        ("categorical_crossentropy", "accuracy"),
        ("binary_crossentropy", metrics.BinaryAccuracy()),
        ("binary_crossentropy", "binary_accuracy"),
        ("mse", metrics.CategoricalAccuracy()),
    ],
)
def test_the_accuracy_that_goes_with_each_loss_is_taken(loss, metric):
    m = model()
    m.compile(optimizer="sgd", loss=loss, metrics=[metric])
    assert m._model().metrics() == ["accuracy"]


@pytest.mark.parametrize(
    "loss,metric,message",
    [
        ("sparse_categorical_crossentropy", metrics.CategoricalAccuracy(), "reads one-hot"),
        ("sparse_categorical_crossentropy", "mae", "targets are class indices"),
        ("categorical_crossentropy", "auc", "metric .auc. is not supported"),
        ("sparse_categorical_crossentropy", "precision", "metric 'precision' is not supported"),
        ("mse", "accuracy", "exact equality"),
    ],
)
def test_a_metric_the_engine_does_not_compute_is_refused_by_name(loss, metric, message):
    with pytest.raises(ValueError, match=message):
        model().compile(optimizer="sgd", loss=loss, metrics=[metric])


def test_a_binary_accuracy_keeps_its_threshold_and_refuses_one_that_is_not_a_number():
    # Computed with it (test_metrics.py, test_metrics_peers.py); not a number: a ValueError.
    assert metrics.BinaryAccuracy(threshold=0.7).get_config()["threshold"] == 0.7
    with pytest.raises(ValueError, match="threshold must be a finite number, got 'high'"):
        metrics.BinaryAccuracy(threshold="high")


def test_metrics_must_be_a_list_and_other_metric_classes_are_not_there():
    with pytest.raises(TypeError, match="list"):
        model().compile(optimizer="sgd", loss="mse", metrics="accuracy")
    with pytest.raises(AttributeError, match="AUC is not supported"):
        metrics.AUC


def test_a_metric_of_the_users_makes_its_variables_after_the_base_init():
    """Keras's Metric.__init__ resets nothing: a subclass's reset_state may read the variables
    its __init__ makes after super().__init__ (Deep Learning with Python's RootMeanSquaredError)."""
    import crossover as tf

    class Rmse(keras.metrics.Metric):
        def __init__(self, name="rmse", **kwargs):
            super().__init__(name=name, **kwargs)
            self.total = self.add_weight(name="total", initializer="zeros")
            self.count = self.add_weight(name="count", initializer="zeros", dtype="int32")

        def update_state(self, y_true, y_pred, sample_weight=None):
            self.total.assign_add(tf.reduce_sum(tf.square(tf.one_hot(y_true, 2) - y_pred)))
            self.count.assign_add(tf.shape(y_pred)[0])

        def result(self):
            return tf.sqrt(self.total / tf.cast(self.count, tf.float32))

        def reset_state(self):
            self.total.assign(0.0)
            self.count.assign(0)

    metric = Rmse()
    metric.update_state(np.array([0, 1]), np.array([[1.0, 0.0], [0.5, 0.5]], np.float32))
    assert float(metric.result()) == pytest.approx(0.5)
    metric.reset_state()
    assert [float(v.numpy()) for v in metric.variables] == [0.0, 0.0]


def test_a_python_loss_of_keras_ops_abs_has_a_gradient():
    """keras.ops.abs on the outputs is recorded by the Python step's tape (numpy's function is
    named `absolute`; the op was computed unrecorded, and apply_gradients found no gradient)."""

    def absolute_error(y_true, y_pred):
        return keras.ops.mean(keras.ops.abs(y_true - y_pred), axis=-1)

    rs = np.random.RandomState(4)
    x, y = rs.rand(12, 4).astype(np.float32), rs.rand(12, 2).astype(np.float32)
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
    m.compile(optimizer="sgd", loss=absolute_error)
    before = np.mean(np.abs(y - m.predict(x, verbose=0)))
    kernel = m.get_weights()[0]
    history = m.fit(x, y, batch_size=12, epochs=1, verbose=0).history
    assert history["loss"][0] == pytest.approx(before, rel=1e-5)
    assert not np.array_equal(m.get_weights()[0], kernel)
