"""Keras's activations elu, selu, leaky_relu, gelu, softplus, silu (swish) and exponential, and
the LeakyReLU and ELU layers, on crossover.keras: a model's outputs against the formulas, the
layer given as an activation, and the JSON round trip. (Keras's own values at a set of points:
tests/activations_test.cpp.)"""

import json
import math

import numpy as np
import pytest

from crossover import keras
from crossover.keras import activations, layers

FORMULAS = {
    "elu": lambda v: np.where(v > 0, v, np.exp(v) - 1),
    "selu": lambda v: 1.0507009873554805 * np.where(v > 0, v, 1.6732632423543772 * (np.exp(v) - 1)),
    "leaky_relu": lambda v: np.where(v >= 0, v, 0.2 * v),
    "gelu": lambda v: 0.5 * v * (1 + np.vectorize(math.erf)(v / math.sqrt(2))),
    "softplus": lambda v: np.log1p(np.exp(v)),
    "silu": lambda v: v / (1 + np.exp(-v)),
    "exponential": np.exp,
}


@pytest.mark.parametrize("name", sorted(FORMULAS))
def test_an_activation_layer_computes_the_formula(name):
    x = np.linspace(-4, 3, 36, dtype=np.float32).reshape(6, 6)
    model = keras.Sequential([keras.Input((6,)), layers.Activation(name)])
    got = model.predict(x, verbose=0)
    np.testing.assert_allclose(got, FORMULAS[name](x.astype(np.float64)), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(
        np.asarray(getattr(activations, name)(x)), got, rtol=2e-6, atol=1e-7
    )


def test_leaky_relu_and_elu_layers_and_as_an_activation():
    x = np.linspace(-3, 3, 12, dtype=np.float32).reshape(2, 6)
    model = keras.Sequential([keras.Input((6,)), layers.LeakyReLU(alpha=0.1), layers.ELU(0.5)])
    want = np.where(x >= 0, x, 0.1 * x)
    want = np.where(want > 0, want, 0.5 * (np.exp(want) - 1))
    np.testing.assert_allclose(model.predict(x, verbose=0), want, rtol=2e-6, atol=1e-7)
    assert layers.LeakyReLU().negative_slope == 0.3

    dense = layers.Dense(4, activation=layers.LeakyReLU(negative_slope=0.1))
    model = keras.Sequential([keras.Input((6,)), dense])
    again = keras.models.model_from_json(model.to_json())
    assert again.to_json() == model.to_json()
    w = model.get_weights()
    z = x @ w[0] + w[1]
    written = json.loads(again.layers[0]._core_layer().keras_config())["activation"]
    assert written["class_name"] == "LeakyReLU"
    np.testing.assert_allclose(written["config"]["negative_slope"], 0.1, rtol=1e-6)
    again.set_weights(w)
    np.testing.assert_allclose(again.predict(x, verbose=0), np.where(z >= 0, z, 0.1 * z), rtol=1e-5)


def test_fit_with_selu_and_lecun_normal_lowers_the_loss():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((256, 8)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    model = keras.Sequential(
        [
            keras.Input((8,)),
            layers.Dense(16, activation="selu", kernel_initializer="lecun_normal"),
            layers.Dense(16, activation="gelu", kernel_initializer="he_normal"),
            layers.Dense(2, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    history = model.fit(x, y, epochs=5, batch_size=32, verbose=0).history["loss"]
    assert history[-1] < history[0]
