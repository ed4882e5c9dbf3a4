"""keras.utils.set_random_seed and tf.random.set_seed: a seeded script is reproducible."""

import random

import numpy as np
import pytest

import crossover as tf
from crossover import keras


def data():
    rng = np.random.default_rng(1)
    return rng.random((256, 12), dtype=np.float32), rng.integers(0, 4, 256)


def run(set_seed, seed):
    """The seed, then a model with dropout built, compiled and trained as a script does."""
    set_seed(seed)
    model = keras.Sequential(
        [
            keras.layers.Input(shape=(12,)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dropout(0.3),
            keras.layers.Dense(4, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    initial = model.get_weights()
    x, y = data()
    history = model.fit(x, y, batch_size=16, epochs=2, verbose=0)  # shuffled, with dropout
    return initial, model.get_weights(), history.history["loss"]


@pytest.mark.parametrize(
    "set_seed", [keras.utils.set_random_seed, tf.random.set_seed, tf.keras.utils.set_random_seed]
)
def test_the_same_seed_gives_bit_identical_weights_and_losses(set_seed):
    initial_a, final_a, losses_a = run(set_seed, 1234)
    initial_b, final_b, losses_b = run(set_seed, 1234)
    for a, b in zip(initial_a + final_a, initial_b + final_b):
        np.testing.assert_array_equal(a, b)
    assert losses_a == losses_b


def test_different_seeds_give_different_weights_and_losses():
    initial_a, final_a, losses_a = run(keras.utils.set_random_seed, 1)
    initial_b, final_b, losses_b = run(keras.utils.set_random_seed, 2)
    assert not np.array_equal(initial_a[0], initial_b[0])
    assert not np.array_equal(final_a[0], final_b[0])
    assert losses_a != losses_b


def test_the_seed_applies_to_models_compiled_afterwards_only():
    keras.utils.set_random_seed(5)
    first = keras.Sequential([keras.layers.Dense(3, input_shape=(2,))])
    first.compile(optimizer="sgd", loss="mse")
    keras.utils.set_random_seed(6)
    weights_of_first = first.get_weights()[0]
    keras.utils.set_random_seed(5)
    again = keras.Sequential([keras.layers.Dense(3, input_shape=(2,))])
    again.compile(optimizer="sgd", loss="mse")
    np.testing.assert_array_equal(again.get_weights()[0], weights_of_first)


def test_set_random_seed_also_seeds_python_and_numpy_as_keras_does():
    keras.utils.set_random_seed(42)
    a = (random.random(), np.random.rand())
    keras.utils.set_random_seed(42)
    assert (random.random(), np.random.rand()) == a


@pytest.mark.parametrize("bad", [1.5, "7", None, -1])
def test_a_seed_that_is_not_a_non_negative_integer_is_a_value_error(bad):
    with pytest.raises(ValueError, match="seed"):
        keras.utils.set_random_seed(bad)
    with pytest.raises(ValueError, match="seed"):
        tf.random.set_seed(bad)
