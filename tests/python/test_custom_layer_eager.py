"""Custom layers called on data (keras/_eager.py), as Keras calls them eagerly: call() runs in
Python on the values, after build() gave add_weight's weights their values; the weights are
Keras's variables (assign, assign_add, the same objects in `weights`), nested layers' weights
and losses are the outer layer's, and the same layer object in a model starts from its weights
and shows what the engine trained. A subclass of keras.Model made with (inputs, outputs) is a
functional model of that class."""

import numpy as np
import pytest

from crossover import keras
from crossover import math as tf_math
from crossover.keras import layers, ops


class Linear(layers.Layer):
    def __init__(self, units=4, **kwargs):
        super().__init__(**kwargs)
        self.units = units
        self.built_with = []

    def build(self, input_shape):
        self.built_with.append(input_shape)
        self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="random_normal")
        self.b = self.add_weight(shape=(self.units,), initializer="random_normal")
        super().build(input_shape)
        self.built = True  # Keras 2's habit

    def call(self, inputs):
        return ops.matmul(inputs, self.w) + self.b

    def get_config(self):
        config = super().get_config()
        config.update({"units": self.units})
        return config


class ComputeSum(layers.Layer):
    def __init__(self, input_dim):
        super().__init__()
        self.total = self.add_weight(initializer="zeros", shape=(input_dim,), trainable=False)

    def call(self, inputs):
        self.total.assign_add(ops.sum(inputs, axis=0))
        return self.total


class Penalized(layers.Layer):
    def __init__(self, rate=0.5, **kwargs):
        super().__init__(**kwargs)
        self.rate = rate

    def call(self, inputs):
        self.add_loss(self.rate * ops.mean(inputs))
        return inputs * 2.0


class Block(layers.Layer):
    def __init__(self):
        super().__init__()
        self.first = Linear(3)
        self.counter = ComputeSum(3)
        self.rest = [Linear(2), Penalized(0.25)]

    def call(self, inputs, training=None):
        self.seen = training
        x = keras.activations.relu(self.first(inputs))
        self.counter(x)
        return self.rest[1](self.rest[0](x))


def test_a_custom_layer_called_on_data_computes_with_its_weights_as_numpy_does():
    layer = Linear(4)
    assert not layer.built and layer.weights == []
    x = np.arange(6, dtype=np.float64).reshape(2, 3)  # float64: Keras computes in float32
    y = layer(x)
    assert layer.built and layer.built_with == [(2, 3)]
    assert layer.weights == [layer.w, layer.b]  # the same objects, Keras's order
    assert [w.name for w in layer.weights] == ["variable", "variable_1"]
    assert layer.w.path == "linear/variable" and layer.w.shape == (3, 4)
    w, b = layer.w.numpy(), layer.b.numpy()
    assert y.dtype == np.float32 and y.shape == (2, 4)
    np.testing.assert_array_equal(y.numpy(), x.astype(np.float32) @ w + b)
    layer(keras.ops.ones((5, 3)))  # built once
    assert layer.built_with == [(2, 3)]
    layer.w.assign(np.ones((3, 4)))
    layer.b.assign_sub(layer.b.numpy())
    np.testing.assert_array_equal(layer(np.ones((1, 3))).numpy(), np.full((1, 4), 3.0))
    assert [v.shape for v in layer.get_weights()] == [(3, 4), (4,)]
    layer.set_weights([np.zeros((3, 4)), np.ones(4)])
    np.testing.assert_array_equal(layer(np.ones((1, 3))).numpy(), np.ones((1, 4)))


def test_a_non_trainable_weight_updated_by_assign_add_keeps_its_running_value():
    total = ComputeSum(2)
    first = total(keras.ops.ones((2, 2)))
    np.testing.assert_array_equal(first.numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(total(keras.ops.ones((2, 2))).numpy(), [4.0, 4.0])
    assert len(total.weights) == 1 and total.trainable_weights == []
    assert total.non_trainable_weights == [total.total]


def test_nested_layers_weights_and_losses_are_the_outer_layers_as_keras_tracks_them():
    block = Block()
    assert block.losses == []
    out = block(np.ones((2, 5), np.float32), training=False)
    assert out.shape == (2, 2) and block.seen is False
    inner = block.first, block.counter, block.rest[0]
    expected = [inner[0].w, inner[0].b, inner[1].total, inner[2].w, inner[2].b]
    assert block.weights == expected
    assert block.trainable_weights == [w for w in expected if w is not inner[1].total]
    assert block.non_trainable_weights == [inner[1].total]
    assert block.first.w.path == "block/linear/variable_1"  # built inside block's call
    assert block.counter.total.path == "compute_sum/variable"  # made in __init__
    (loss,) = block.losses  # the inner layer's add_loss, reset at each outer call
    h = np.maximum(np.ones((2, 5), np.float32) @ inner[0].w.numpy() + inner[0].b.numpy(), 0)
    hidden = h @ inner[2].w.numpy() + inner[2].b.numpy()
    np.testing.assert_allclose(float(loss), 0.25 * hidden.mean(), rtol=1e-6)
    block(np.ones((2, 5), np.float32))
    assert len(block.losses) == 1 and block.seen is None  # the default: none given
    block.rest[0].trainable = False
    assert len(block.trainable_weights) == 2 and len(block.non_trainable_weights) == 3
    with pytest.raises(ValueError, match="only be called from inside `build\\(\\)` or `call"):
        Penalized().add_loss(1.0)


def test_training_is_the_given_one_else_the_outer_calls():
    class Mode(layers.Layer):
        def call(self, inputs, training=None):
            self.seen = training
            return inputs

    class Outer(layers.Layer):
        def __init__(self):
            super().__init__()
            self.inner = Mode()

        def call(self, inputs):
            return self.inner(inputs)

    outer = Outer()
    outer(np.ones((1, 2)), training=True)
    assert outer.inner.seen is True
    outer(np.ones((1, 2)))
    assert outer.inner.seen is None


def test_config_round_trips_through_from_config():
    layer = Linear(64, name="lin")
    config = layer.get_config()
    assert config["name"] == "lin" and config["units"] == 64 and config["trainable"] is True
    assert config["dtype"]["config"] == {"name": "float32"}
    again = Linear.from_config(config)
    assert (again.name, again.units) == ("lin", 64)
    # A built-in layer's is Keras's too (test_layer_config.py, test_layer_config_peers.py).
    assert layers.Dense(2, name="d").get_config()["units"] == 2


def test_a_layer_used_on_data_then_in_a_model_keeps_its_weights_both_ways():
    layer = Linear(2)
    x = np.random.RandomState(0).rand(16, 3).astype(np.float32)
    eager = layer(x).numpy()
    w0 = layer.w.numpy()
    model = keras.Sequential([keras.Input((3,)), layer])
    np.testing.assert_allclose(model.predict(x, verbose=0), eager, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(model.get_weights()[0], w0)  # the engine starts from them
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x, np.zeros((16, 2), np.float32), epochs=2, batch_size=4, verbose=0)
    trained = model.get_weights()
    assert np.abs(trained[0] - w0).max() > 1e-4
    np.testing.assert_array_equal(layer.w.numpy(), trained[0])  # what the engine trained
    np.testing.assert_allclose(layer(x).numpy(), x @ trained[0] + trained[1], rtol=1e-6)
    layer.b.assign(np.full(2, 5.0))  # and an assign reaches the engine
    np.testing.assert_allclose(model.predict(x, verbose=0), x @ trained[0] + 5.0, rtol=1e-5)


def test_what_a_call_on_data_cannot_do_says_so():
    class Looping(layers.Layer):
        def call(self, inputs):
            return tf_math.cumsum(inputs)

    with pytest.raises(NotImplementedError, match=r"math.cumsum is not supported .* 'looping'"):
        Looping()(np.ones((1, 2)))
    # In a model, add_loss is traced: its term joins evaluate's loss (test_add_loss_peers.py).
    inp = keras.Input((3,))
    model = keras.Model(inp, Penalized()(inp))
    model.compile(optimizer="sgd", loss="mse")
    x = np.random.RandomState(2).rand(4, 3).astype(np.float32)
    expected = np.mean(np.square(2.0 * x)) + 0.5 * x.mean()
    assert model.evaluate(x, np.zeros_like(x), verbose=0) == pytest.approx(expected, rel=1e-5)


class Trainer(keras.Model):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.loss_tracker = keras.metrics.Mean(name="loss")
        self.loss_fn = keras.losses.MeanSquaredError()

    def train_step(self, data):
        x, y = data
        with keras_tape() as tape:
            loss = self.loss_fn(y, self(x, training=True))
        variables = self.trainable_variables
        self.optimizer.apply(tape.gradient(loss, variables), variables)
        self.loss_tracker.update_state(loss)
        return {"loss": self.loss_tracker.result()}

    @property
    def metrics(self):
        return [self.loss_tracker]


def keras_tape():
    import crossover

    return crossover.GradientTape()


@pytest.mark.parametrize("keywords", [False, True])
def test_a_model_subclass_made_with_inputs_and_outputs_is_functional_with_its_train_step(
    keywords: bool,
):
    inputs = keras.Input((4,))
    outputs = layers.Dense(1)(inputs)
    model = Trainer(inputs=inputs, outputs=outputs) if keywords else Trainer(inputs, outputs)
    assert isinstance(model, Trainer) and isinstance(model, keras.Model)
    assert model.name.startswith("trainer") and model.built
    assert [type(l).__name__ for l in model.layers] == ["InputLayer", "Dense"]
    model.compile(optimizer="sgd")
    x = np.random.RandomState(1).rand(64, 4).astype(np.float32)
    y = x.sum(axis=1, keepdims=True)
    history = model.fit(x, y, epochs=3, batch_size=16, verbose=0).history
    assert list(history) == ["loss"] and history["loss"][2] < history["loss"][0]
    with pytest.raises(TypeError, match=r"takes \(inputs, outputs\) or name= only"):
        Trainer(inputs)


def test_a_test_step_reads_the_compiled_loss_and_metrics_as_keras_3_has_them():
    class Checked(keras.Model):
        def test_step(self, data):
            x, y = data
            y_pred = self(x, training=False)
            loss = self.compute_loss(y=y, y_pred=y_pred)
            for metric in self.metrics:
                if metric.name == "loss":
                    metric.update_state(loss)
                else:
                    metric.update_state(y, y_pred)
            return {m.name: m.result() for m in self.metrics}

    inputs = keras.Input((3,))
    model = Checked(inputs, layers.Dense(2)(inputs))
    assert model.metrics == []  # before compile
    x = np.random.RandomState(2).rand(40, 3).astype(np.float32)
    y = np.random.RandomState(3).rand(40, 2).astype(np.float32)
    with pytest.raises(ValueError, match="No loss to compute"):
        model.compute_loss(y=y, y_pred=y)
    model.compile(loss="mse", metrics=["mae"])
    assert [m.name for m in model.metrics] == ["loss", "compile_metrics"]
    logs = model.evaluate(x, y, batch_size=40, verbose=0, return_dict=True)
    pred = model.predict(x, verbose=0)
    assert sorted(logs) == ["loss", "mae"]
    np.testing.assert_allclose(logs["loss"], np.mean((pred - y) ** 2), rtol=1e-5)
    np.testing.assert_allclose(logs["mae"], np.mean(np.abs(pred - y)), rtol=1e-5)


def test_a_built_in_layer_on_data_is_computed_by_the_engine_and_keeps_one_set_of_weights():
    dense = layers.Dense(3)
    assert dense.weights == []
    x = np.random.RandomState(5).rand(4, 2).astype(np.float32)
    y = dense(x)
    kernel, bias = dense.get_weights()
    np.testing.assert_allclose(y.numpy(), x @ kernel + bias, rtol=1e-6, atol=1e-6)
    model = keras.Sequential([keras.Input((2,)), dense])
    np.testing.assert_array_equal(model.get_weights()[0], kernel)  # the same weights
    model.compile(optimizer="sgd", loss="mse")
    model.fit(x, np.ones((4, 3), np.float32), epochs=2, verbose=0)
    trained = model.get_weights()
    assert np.abs(trained[0] - kernel).max() > 1e-4
    np.testing.assert_allclose(dense(x).numpy(), x @ trained[0] + trained[1], rtol=1e-6)

    class Wrapper(layers.Layer):  # a custom layer calling a built-in one on data
        def __init__(self):
            super().__init__()
            self.inner = layers.Dense(2, activation="relu")

        def call(self, inputs, training=None):
            return self.inner(inputs, training=training) * 2.0

    wrapper = Wrapper()
    out = wrapper(x)
    k, b = wrapper.inner.get_weights()
    np.testing.assert_allclose(out.numpy(), np.maximum(x @ k + b, 0) * 2.0, rtol=1e-6)
    assert [w.shape for w in wrapper.weights] == [(2, 2), (2,)]
    with pytest.raises(NotImplementedError, match="training=True is not supported"):
        layers.Dropout(0.5)(x, training=True)


def test_variables_set_as_attributes_are_the_layers_weights_as_keras_tracks_them():
    import crossover as tf

    class Linear2(layers.Layer):  # TensorFlow's 2020 guide: tf.Variable and tf initializers
        def __init__(self, units=3, input_dim=2):
            super().__init__()
            w_init = tf.random_normal_initializer()
            self.w = tf.Variable(initial_value=w_init(shape=(input_dim, units), dtype="float32"))
            self.total = keras.Variable(tf.zeros((units,)), trainable=False)

        def call(self, inputs):
            out = tf.matmul(inputs, self.w)
            self.total.assign_add(tf.reduce_sum(out, axis=0))
            return out

    layer = Linear2()
    assert layer.weights == [layer.w, layer.total] and layer.trainable_weights == [layer.w]
    assert isinstance(layer.w, tf.Variable) and layer.w.path == "linear2/" + layer.w.name
    x = np.ones((4, 2), np.float32)
    y = layer(x)
    np.testing.assert_allclose(y.numpy(), x @ layer.w.numpy(), rtol=1e-6)
    np.testing.assert_allclose(layer.total.numpy(), y.numpy().sum(axis=0), rtol=1e-6)
    a, b = (keras.initializers.RandomNormal()((50,)) for _ in range(2))
    assert not np.array_equal(a, b)  # unseeded: new values at each call, as Keras's
    seeded = keras.initializers.RandomNormal(seed=3)
    np.testing.assert_array_equal(seeded((50,)), seeded((50,)))
    assert tf.zeros(2, 1).dtype == np.float32  # TensorFlow's DataType number 1: float32
    counter = tf.Variable(np.arange(3))  # TensorFlow's: an int64 variable (not in a model)
    assert counter.dtype == np.int64 and counter.assign_add([1, 1, 1]).numpy().tolist() == [1, 2, 3]


def test_a_subclassed_model_not_compiled_runs_its_call_on_data_when_it_cannot_be_traced():
    class Untraceable(keras.Model):
        def __init__(self):
            super().__init__()
            self.enc = layers.Dense(4, activation="relu")
            self.dec = layers.Dense(3)

        def call(self, x):
            return self.dec(ops.log(self.enc(x) + 1.0))  # log: no engine op

    model = Untraceable()
    x = np.random.RandomState(6).rand(5, 3).astype(np.float32)
    y = model(x)
    (k1, b1), (k2, b2) = model.enc.get_weights(), model.dec.get_weights()
    expected = np.log(np.maximum(x @ k1 + b1, 0) + 1.0) @ k2 + b2
    np.testing.assert_allclose(y.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert not model.built
    model.compile(optimizer="sgd", loss="mse")
    with pytest.raises(NotImplementedError, match="keras.ops.log on a symbolic tensor"):
        model.fit(x, x, verbose=0)  # the reason, not the layers' state from the first trace


def test_keras_random_normal_and_uniform_on_data():
    import crossover as tf

    seeds = keras.random.SeedGenerator(1)
    a, b = keras.random.normal((2, 3), seed=seeds), keras.random.normal((2, 3), seed=seeds)
    assert a.dtype == np.float32 and a.shape == (2, 3) and not np.array_equal(a, b)
    again = [keras.random.normal((4,), seed=7) for _ in range(2)]
    np.testing.assert_array_equal(*again)
    u = keras.random.uniform(tf.shape(tf.zeros((64, 1))), minval=2.0, maxval=3.0, seed=seeds)
    assert u.shape == (64, 1) and 2.0 <= float(u.min()) and float(u.max()) < 3.0
    with pytest.raises(NotImplementedError, match="keras.random.normal of a symbolic shape"):
        keras.random.normal(keras.Input((3,)))
