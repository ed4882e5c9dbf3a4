"""keras.initializers on crossover.keras: names and objects for Dense, Conv2D and
BatchNormalization, the drawn values' distribution, get_config, JSON round trips and refusals."""

import json

import numpy as np
import pytest

from crossover import keras
from crossover.keras import initializers, layers


def kernel_of(layer: layers.Layer, input_shape: tuple) -> np.ndarray:
    model = keras.Sequential([keras.Input(input_shape), layer, layers.Flatten(), layers.Dense(1)])
    return model.get_weights()[0]


def test_he_normal_by_name_draws_a_truncated_normal_of_variance_two_over_fan_in():
    dense = layers.Dense(500, kernel_initializer="he_normal")
    assert isinstance(dense.kernel_initializer, initializers.HeNormal)
    w = kernel_of(dense, (400,))
    assert w.shape == (400, 500)
    assert abs(w.var() / (2 / 400) - 1) < 0.03  # 200,000 draws: 0.4% standard error
    assert abs(w.mean()) < 6 * np.sqrt(2 / 400 / w.size)
    bound = 2 * np.sqrt(2 / 400) / 0.87962566103423978
    assert np.abs(w).max() <= bound * (1 + 1e-6)
    assert np.abs(w).max() > 0.99 * bound


def test_objects_and_conv2d_fans():
    # fan_in = 5 * 5 * 16 = 400: limit sqrt(3 / 400) for LecunUniform.
    conv = layers.Conv2D(64, 5, kernel_initializer=initializers.LecunUniform(seed=3))
    w = kernel_of(conv, (9, 9, 16))
    limit = np.sqrt(3 / 400)
    assert np.abs(w).max() <= limit and np.abs(w).max() > 0.99 * limit
    assert abs(w.var() / (limit**2 / 3) - 1) < 0.03


def test_bias_and_batch_normalization_initializers():
    model = keras.Sequential(
        [
            keras.Input((3,)),
            layers.Dense(4, bias_initializer=initializers.Constant(0.5)),
            layers.BatchNormalization(
                gamma_initializer="zeros", moving_variance_initializer=initializers.Constant(2.0)
            ),
        ]
    )
    w = model.get_weights()
    assert np.all(w[1] == 0.5)
    assert np.all(w[2] == 0.0) and np.all(w[3] == 0.0) and np.all(w[5] == 2.0)


def test_get_config_is_keras_3_15s():
    assert initializers.HeNormal().get_config() == {
        "seed": None,
        "input_axes": None,
        "output_axes": None,
    }
    assert initializers.VarianceScaling(2.0, "fan_avg", "normal").get_config() == {
        "seed": None,
        "scale": 2.0,
        "mode": "fan_avg",
        "distribution": "truncated_normal",
        "input_axes": None,
        "output_axes": None,
    }
    assert initializers.RandomNormal(stddev=0.1).get_config() == {
        "seed": None,
        "mean": 0.0,
        "stddev": 0.1,
    }
    assert initializers.serialize(initializers.get("identity"))["class_name"] == "Identity"
    assert type(initializers.get("uniform")) is initializers.RandomUniform
    assert initializers.he_uniform is initializers.HeUniform


def test_json_round_trip_keeps_each_initializer():
    model = keras.Sequential(
        [
            keras.Input((6,)),
            layers.Dense(
                5,
                kernel_initializer=initializers.VarianceScaling(2.0, "fan_avg", "uniform"),
                bias_initializer=initializers.TruncatedNormal(0.5, 0.01, seed=9),
            ),
            layers.Dense(3, kernel_initializer="orthogonal", bias_initializer="ones"),
        ]
    )
    text = model.to_json()
    config = json.loads(text)["config"]["layers"]
    assert config[1]["config"]["bias_initializer"]["config"] == {
        "seed": 9,
        "mean": 0.5,
        "stddev": 0.01,
    }
    again = keras.models.model_from_json(text)
    assert again.to_json() == text
    first = again.layers[0]
    assert isinstance(first.kernel_initializer, initializers.VarianceScaling)
    assert first.kernel_initializer.get_config()["mode"] == "fan_avg"
    assert isinstance(again.layers[1].kernel_initializer, initializers.Orthogonal)


def test_calling_an_initializer_draws_its_values():
    values = np.asarray(initializers.HeUniform(seed=1)((300, 200)))
    limit = np.sqrt(6 / 300)
    assert values.shape == (300, 200)
    assert np.abs(values).max() <= limit and np.abs(values).max() > 0.99 * limit
    assert np.array_equal(np.asarray(initializers.Identity(2.0)((2, 3))), 2 * np.eye(2, 3))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: layers.Dense(3, kernel_initializer="he"), "could not interpret initializer"),
        (lambda: initializers.VarianceScaling(mode="fan"), "invalid mode"),
        (lambda: initializers.VarianceScaling(scale=0), "scale must be a positive"),
        (lambda: layers.Dense(3, kernel_initializer=lambda shape, dtype=None: 0), "custom"),
        (
            lambda: layers.Dense(3, kernel_initializer=initializers.HeNormal(input_axes=[0])),
            "kernel_initializer: input_axes",
        ),
    ],
)
def test_what_crossover_lacks_is_a_value_error_naming_it(make, message):
    with pytest.raises(ValueError, match=message):
        make()
