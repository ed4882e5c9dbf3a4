"""Custom layers (keras/_trace.py): a keras.layers.Layer subclass's build() and call() traced into
engine ops. The traced model computes what numpy computes from its weights, shows the layer and
its weights as Keras does, and says what it cannot trace."""

import numpy as np
import pytest

from crossover import keras
from crossover import math as tf_math
from crossover import nn as tf_nn
from crossover.keras import layers, ops


class Antirectifier(layers.Layer):
    def __init__(self, initializer="he_normal", **kwargs):
        super().__init__(**kwargs)
        self.initializer = keras.initializers.get(initializer)

    def build(self, input_shape):
        width = input_shape[-1]
        self.kernel = self.add_weight(
            shape=(width * 2, width), initializer=self.initializer, name="kernel", trainable=True
        )

    def call(self, inputs):
        inputs -= tf_math.reduce_mean(inputs, axis=-1, keepdims=True)
        pos = tf_nn.relu(inputs)
        neg = tf_nn.relu(-inputs)
        return ops.matmul(ops.concatenate([pos, neg], axis=-1), self.kernel)


class Affine(layers.Layer):
    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units), name="w")
        self.b = self.add_weight(shape=(self.units,), initializer="ones", name="b")

    def call(self, inputs):
        return ops.matmul(inputs, self.w) + self.b


class Noisy(layers.Layer):
    def __init__(self, rate, **kwargs):
        super().__init__(**kwargs)
        self.rate = rate
        self.seed_generator = keras.random.SeedGenerator(1337)

    def call(self, inputs):
        return keras.random.dropout(inputs, self.rate, seed=self.seed_generator)


def antirectifier(x: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    x = x - x.mean(axis=-1, keepdims=True)
    return np.concatenate([np.maximum(x, 0), np.maximum(-x, 0)], axis=-1) @ kernel


def test_a_custom_layer_in_a_sequential_computes_its_traced_ops():
    model = keras.Sequential([keras.Input((6,)), layers.Dense(5), Antirectifier(), layers.Dense(3)])
    x = np.random.RandomState(1).rand(7, 6).astype(np.float32)
    got = model.predict(x, verbose=0)
    k1, b1, kernel, k2, b2 = model.get_weights()
    assert kernel.shape == (10, 5)
    custom = model.layers[1]
    assert isinstance(custom, Antirectifier) and custom.name == "antirectifier"
    np.testing.assert_array_equal(custom.kernel.numpy(), kernel)
    assert [w.shape for w in custom.weights] == [(10, 5)]
    assert custom.count_params() == 50 and model.count_params() == 6 * 5 + 5 + 50 + 5 * 3 + 3
    expected = antirectifier(x @ k1 + b1, kernel) @ k2 + b2
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    # set_weights on the layer reaches the engine
    custom.set_weights([np.ones((10, 5), np.float32)])
    np.testing.assert_allclose(
        model.predict(x, verbose=0),
        antirectifier(x @ k1 + b1, np.ones((10, 5))) @ k2 + b2,
        rtol=1e-5,
        atol=1e-5,
    )
    lines = []
    model.summary(print_fn=lines.append)
    assert "antirectifier (Antirectifier)" in lines[0] and "50" in lines[0]


def test_a_custom_layer_trains_in_a_functional_and_a_subclassed_model():
    inp = keras.Input((4,))
    out = Affine(2)(Noisy(0.5)(Affine(3)(inp)) * 2.0 - 1.0)
    model = keras.Model(inp, out)
    assert [type(l).__name__ for l in model.layers][:3] == ["InputLayer", "Affine", "Noisy"]
    x = np.random.RandomState(2).rand(64, 4).astype(np.float32)
    y = np.random.RandomState(3).rand(64, 2).astype(np.float32)
    w1, b1, w2, b2 = model.get_weights()
    np.testing.assert_array_equal(b1, np.ones(3, np.float32))  # the "ones" initializer
    np.testing.assert_allclose(  # dropout is the identity in predict
        model.predict(x, verbose=0), ((x @ w1 + b1) * 2 - 1) @ w2 + b2, rtol=1e-5, atol=1e-5
    )
    # summary(): a custom layer without weights of its own (Noisy) counts none.
    lines: list[str] = []
    model.summary(print_fn=lines.append)
    table = "\n".join(lines)
    noisy = next(line for line in table.splitlines() if "(Noisy)" in line)
    assert noisy.rstrip(" │").endswith(" 0"), table
    assert "Total params: 23 " in table, table  # (4 + 1) * 3 + (3 + 1) * 2
    model.compile(optimizer="sgd", loss="mse")
    history = model.fit(x, y, epochs=2, batch_size=16, verbose=0).history
    assert history["loss"][1] < history["loss"][0]

    class Two(keras.Model):
        def __init__(self):
            super().__init__()
            self.a = Affine(3)
            self.b = Affine(2)
            self.c = Affine(1)

        def call(self, x):
            return self.c(ops.concatenate([self.a(x), self.b(x)], axis=-1))

    two = Two()
    two.compile(optimizer="sgd", loss="mse")
    two.fit(x, y[:, :1], epochs=1, batch_size=16, verbose=0)
    assert [l.name for l in two.layers] == ["affine_2", "affine_3", "affine_4"]
    assert [w.shape for w in two.get_weights()] == [(4, 3), (3,), (4, 2), (2,), (5, 1), (1,)]


def test_what_a_custom_layer_cannot_trace_says_so_naming_the_op_and_the_layer():
    class Branchy(layers.Layer):
        def call(self, inputs):
            if inputs > 0:
                return inputs * 2.0
            return inputs

    class Flat(layers.Layer):
        def call(self, inputs):
            return tf_math.reduce_sum(inputs, axis=-1)  # keepdims=False

    class Log(layers.Layer):
        def call(self, inputs):
            return ops.log(inputs)

    inp = keras.Input((3,))
    with pytest.raises(NotImplementedError, match=r"flow\) in the call\(\) of layer 'branchy'"):
        Branchy()(inp)
    with pytest.raises(NotImplementedError, match="keepdims=False .* layer 'flat' .Flat."):
        Flat()(inp)
    with pytest.raises(NotImplementedError, match=r"keras.ops.log in the call\(\) of layer 'log'"):
        Log()(inp)

    class Convolving(layers.Layer):
        def call(self, inputs):
            return ops.conv(inputs, inputs)

    # On data, call() runs in Python (keras/_eager.py): an op crossover lacks is named there.
    with pytest.raises(NotImplementedError, match=r"ops.conv is not supported .* 'convolving'"):
        Convolving()(np.zeros((1, 3), np.float32))


def test_the_element_wise_merging_layers_broadcast_and_round_trip_through_json():
    inp = keras.Input((4,))
    a, b, c = layers.Dense(3)(inp), layers.Dense(3)(inp), layers.Dense(1)(inp)
    joined = layers.Maximum()([layers.Subtract()([a, b]), layers.Multiply()([a, c])])  # c: (1,)
    model = keras.Model(inp, layers.Average()([joined, layers.Minimum()([a, b])]))
    x = np.random.RandomState(4).rand(5, 4).astype(np.float32)
    k = model.get_weights()
    da, db, dc = (x @ k[i] + k[i + 1] for i in (0, 2, 4))
    expected = (np.maximum(da - db, da * dc) + np.minimum(da, db)) / 2
    np.testing.assert_allclose(model.predict(x, verbose=0), expected, rtol=1e-5, atol=1e-6)
    again = keras.models.model_from_json(model.to_json())
    again.set_weights(k)
    np.testing.assert_allclose(again.predict(x, verbose=0), expected, rtol=1e-5, atol=1e-6)
    assert [type(l).__name__ for l in again.layers][-2:] == ["Minimum", "Average"]
    with pytest.raises(NotImplementedError, match="Subtract with 3 inputs"):
        layers.Subtract()([a, b, a])


def test_tf_reshape_in_a_subclassed_models_call_keeps_the_batch_axis():
    """tf.reshape(x, [-1, ...]) on the traced input is a Reshape layer (a -1 among the others
    inferred); another first axis than -1 says so."""
    import crossover as tf

    class Net(keras.Model):
        def __init__(self, shape):
            super().__init__()
            self.shape_to = shape
            self.flatten = layers.Flatten()
            self.dense = layers.Dense(3)

        def call(self, x):
            return self.dense(self.flatten(tf.reshape(x, self.shape_to)))

    x = np.random.default_rng(5).random((4, 2, 6)).astype(np.float32)
    for shape in ([-1, 12], (-1, 4, -1)):
        model = Net(shape)
        out = model.predict(x, verbose=0)
        kernel, bias = model.get_weights()
        np.testing.assert_allclose(out, x.reshape(4, 12) @ kernel + bias, atol=1e-5)
    with pytest.raises(NotImplementedError, match="first axis is not -1"):
        Net([4, 12]).predict(x, verbose=0)
    with pytest.raises(ValueError, match="cannot reshape samples of shape"):
        Net([-1, 5]).predict(x, verbose=0)
