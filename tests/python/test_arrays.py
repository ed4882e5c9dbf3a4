"""numpy in: dtypes and layouts converted once per call, labels as Keras takes them, and the
engine's errors for a wrong shape or a label out of range."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import _sequential, models

MNIST_10K = Path(__file__).resolve().parents[2] / "data" / "mnist-10k" / "mnist-10k.npz"


@pytest.fixture(scope="module")
def digits():
    with np.load(MNIST_10K) as d:
        return d["x_train"][:512], d["y_train"][:512]


def compiled(loss="sparse_categorical_crossentropy"):
    model = keras.Sequential(
        [
            keras.layers.Flatten(input_shape=(28, 28)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss=loss, metrics=["accuracy"])
    return model


def losses_of(x, y, loss="sparse_categorical_crossentropy"):
    keras.utils.set_random_seed(0)  # each model draws fresh weights: the same seed for each
    return compiled(loss).fit(x, y, batch_size=64, epochs=2, verbose=0).history["loss"]


def test_a_c_contiguous_float32_array_is_not_copied():
    a = np.zeros((4, 3), np.float32)
    assert models._floats(a, "x") is a


def test_uint8_float64_and_non_contiguous_inputs_train_as_their_float32_values(digits):
    x, y = digits
    reference = losses_of(np.ascontiguousarray(x, dtype=np.float32), y)
    assert losses_of(x, y) == reference  # uint8, as Keras: values 0..255
    assert losses_of(x.astype(np.float64), y) == reference
    wide = np.zeros((512, 28, 56), np.float32)
    wide[:, :, ::2] = x
    assert not wide[:, :, ::2].flags.c_contiguous
    assert losses_of(wide[:, :, ::2], y) == reference


def test_inputs_are_converted_once_per_fit_not_per_step(digits, monkeypatch):
    x, y = digits
    calls = []
    convert = models._floats
    counted = lambda a, what: calls.append(what) or convert(a, what)  # noqa: E731
    monkeypatch.setattr(_sequential, "_floats", counted)  # Sequential's module (fit converts)
    compiled().fit(x.astype(np.float64), y, batch_size=32, epochs=3, verbose=0)  # 48 steps
    assert sorted(calls) == ["x", "y"]


def test_integer_labels_of_shape_n_or_n_1_any_int_dtype_train_alike(digits):
    x, y = digits
    x = x / 255.0
    reference = losses_of(x, y.astype(np.int64))
    assert losses_of(x, y.astype(np.int32).reshape(-1, 1)) == reference
    assert losses_of(x, y) == reference  # uint8
    assert losses_of(x, y.astype(np.float32)) == reference


def test_one_hot_targets_train_with_categorical_crossentropy(digits):
    x, y = digits
    h = compiled("categorical_crossentropy").fit(x / 255.0, np.eye(10)[y], epochs=1, verbose=0)
    assert np.isfinite(h.history["loss"][0]) and 0 <= h.history["accuracy"][0] <= 1


def test_class_indices_with_a_one_hot_loss_is_the_engines_value_error(digits):
    x, y = digits
    with pytest.raises(ValueError, match=r"y must have shape \(512, 10\)"):
        compiled("categorical_crossentropy").fit(x, y, verbose=0)


@pytest.mark.parametrize("bad,shown", [(10, "label 10"), (-1, "label -1"), (2.5, "label 2.5")])
def test_a_label_that_is_not_a_class_index_is_the_engines_value_error(digits, bad, shown):
    x, y = digits
    y = y.astype(np.float64)
    y[7] = bad
    with pytest.raises(ValueError, match=f"{shown} at index 7 is not a class index in 0..9"):
        compiled().fit(x, y, verbose=0)


def test_a_wrong_input_shape_is_the_engines_value_error(digits):
    x, y = digits
    with pytest.raises(ValueError, match="shape"):
        compiled().fit(x[:, :27, :], y, verbose=0)
    with pytest.raises(ValueError, match="shape"):
        compiled().predict(np.zeros((3, 27, 28)), verbose=0)


def test_a_label_count_that_differs_from_x_is_a_value_error(digits):
    x, y = digits
    with pytest.raises(ValueError, match="one class index per sample"):
        compiled().fit(x, y[:-1], verbose=0)


def test_something_that_is_not_numeric_is_a_value_error():
    with pytest.raises(ValueError, match="x must be a numeric array"):
        compiled().fit([["a"]], [0], verbose=0)
