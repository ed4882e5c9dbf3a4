"""C-contiguous float32 arrays reach the library without a copy; other dtypes and layouts are
converted first. Neither is observable: the results are the same and the inputs are unchanged."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers, models

MNIST_10K = Path(__file__).resolve().parents[2] / "data" / "mnist-10k" / "mnist-10k.npz"


@pytest.fixture(scope="module")
def data():
    with np.load(MNIST_10K) as d:
        return (d["x_train"][:256] / 255.0).astype(np.float32), d["y_train"][:256]


def compiled() -> keras.Sequential:
    model = keras.Sequential(
        [layers.Flatten(input_shape=(28, 28)), layers.Dense(10, activation="softmax")]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def test_a_c_contiguous_float32_array_is_passed_on_as_itself(data):
    x, _ = data
    assert models._floats(x, "x") is x
    assert not np.shares_memory(models._floats(np.asfortranarray(x), "x"), x)


def test_fit_evaluate_and_predict_give_the_same_numbers_on_any_layout_and_keep_the_input(data):
    x, y = data
    kept = x.copy()
    others = [x.astype(np.float64), np.asfortranarray(x), x[:, ::-1, :][:, ::-1, :]]
    results = []
    for xs in [x] + others:
        model = compiled()
        history = model.fit(xs, y, epochs=2, verbose=0)
        results.append(
            (
                history.history["loss"],
                model.evaluate(xs, y, verbose=0),
                model.predict(xs, verbose=0),
            )
        )
    for loss, evaluated, predicted in results[1:]:
        assert loss == results[0][0]
        assert evaluated == results[0][1]
        np.testing.assert_array_equal(predicted, results[0][2])
    np.testing.assert_array_equal(x, kept)
