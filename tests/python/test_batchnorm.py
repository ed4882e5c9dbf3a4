"""Keras's BatchNormalization on crossover.keras: weights, counts, modes, files and JSON."""

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers


def dense_bn_model(**bn) -> keras.Sequential:
    return keras.Sequential(
        [
            keras.Input(shape=(6,)),
            layers.Dense(4),
            layers.BatchNormalization(**bn),
            layers.Dense(3, activation="softmax"),
        ]
    )


def test_keras_weights_order_initial_values_and_counts(capsys):
    model = dense_bn_model()
    weights = model.get_weights()
    assert [w.shape for w in weights[2:6]] == [(4,)] * 4
    for w, value in zip(weights[2:6], (1.0, 0.0, 0.0, 1.0)):  # gamma, beta, moving mean/var
        assert np.all(w == value)
    assert model.count_params() == 59  # as Keras: the moving statistics included
    model.summary()
    out = capsys.readouterr().out
    assert "Trainable params: 51 " in out and "Non-trainable params: 8 (32.00 B)" in out


def test_fit_updates_the_moving_statistics_and_predict_uses_them():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((64, 6)) * 3 + 2).astype(np.float32)
    y = rng.integers(0, 3, 64)
    model = dense_bn_model(momentum=0.5)
    model.compile(loss="sparse_categorical_crossentropy", optimizer="adam")
    before = model.predict(x, verbose=0)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    w = model.get_weights()
    assert not np.all(w[4] == 0.0) and not np.all(w[5] == 1.0)
    # predict normalises with the moving statistics: the same answer twice, and a different one
    # from before fit.
    after = model.predict(x, verbose=0)
    assert np.array_equal(after, model.predict(x, verbose=0))
    assert not np.allclose(before, after)


@pytest.mark.parametrize(
    "argument, value",
    [
        ("renorm", True),
        ("synchronized", True),
        ("beta_constraint", "non_neg"),
    ],
)
def test_an_argument_crossover_does_not_run_is_refused_naming_it(argument, value):
    with pytest.raises(ValueError, match=f"BatchNormalization: argument {argument}[=:]"):
        layers.BatchNormalization(**{argument: value})


def test_an_axis_other_than_the_last_is_refused_when_the_model_is_built():
    # The engine's reader takes an axis as a number (tf.keras 2 files write the last one, [3]);
    # the input's shape says whether it is the last.
    model = keras.Sequential([keras.Input((4, 4, 3)), layers.BatchNormalization(axis=1)])
    with pytest.raises(ValueError, match="BatchNormalization axis 1 is not supported on samples"):
        model.predict(np.zeros((2, 4, 4, 3), np.float32), verbose=0)


def test_to_json_round_trip_keeps_the_arguments():
    model = dense_bn_model(momentum=0.9, epsilon=0.01, center=False)
    again = keras.models.model_from_json(model.to_json())
    assert again.to_json() == model.to_json()
    bn = again.layers[1]
    assert type(bn).__name__ == "BatchNormalization"
    assert (bn.momentum, bn.epsilon, bn.center, bn.scale) == (0.9, 0.01, False, True)


@pytest.mark.parametrize("suffix", [".weights.h5", ".safetensors"])
def test_saved_weights_keep_the_moving_statistics(tmp_path, suffix):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((32, 6)).astype(np.float32)
    model = dense_bn_model()
    model.compile(loss="sparse_categorical_crossentropy", optimizer="adam")
    model.fit(x, rng.integers(0, 3, 32), batch_size=8, epochs=2, verbose=0)
    path = tmp_path / f"bn{suffix}"
    model.save_weights(path)
    other = dense_bn_model()
    other.load_weights(path)
    for a, b in zip(model.get_weights(), other.get_weights()):
        assert np.array_equal(a, b)
    assert np.array_equal(model.predict(x, verbose=0), other.predict(x, verbose=0))
