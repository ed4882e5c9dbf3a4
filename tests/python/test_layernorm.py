"""Keras's LayerNormalization on crossover.keras: defaults, weights, counts, refusals, files and
JSON (its values against Keras itself: test_layernorm_peers.py)."""

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers


def dense_ln_model(**ln) -> keras.Sequential:
    return keras.Sequential(
        [
            keras.Input(shape=(6,)),
            layers.Dense(4),
            layers.LayerNormalization(**ln),
            layers.Dense(3, activation="softmax"),
        ]
    )


def test_keras_defaults():
    ln = layers.LayerNormalization()
    assert (ln.axis, ln.epsilon, ln.center, ln.scale, ln.rms_scaling) == (-1, 1e-3, True, True, False)


def test_weights_are_gamma_ones_and_beta_zeros_and_counted(capsys):
    model = dense_ln_model()
    weights = model.get_weights()
    assert [w.shape for w in weights[2:4]] == [(4,)] * 2
    assert np.all(weights[2] == 1.0) and np.all(weights[3] == 0.0)
    assert model.count_params() == 28 + 8 + 15
    model.summary()
    assert "Trainable params: 51 " in capsys.readouterr().out
    ln = model.layers[1]
    assert np.all(ln.gamma.numpy() == 1.0) and np.all(ln.beta.numpy() == 0.0)
    assert len(dense_ln_model(center=False, scale=False).get_weights()) == 4


def test_each_sample_is_normalised_by_its_own_statistics_in_fit_and_predict():
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((16, 5)) * 4 + 3).astype(np.float32)
    model = keras.Sequential([keras.Input((5,)), layers.LayerNormalization(epsilon=1e-6)])
    y = model.predict(x, verbose=0)
    np.testing.assert_allclose(y.mean(axis=1), 0.0, atol=1e-5)
    np.testing.assert_allclose(y.std(axis=1), 1.0, atol=1e-4)
    # One sample alone gives the same row: no batch statistics.
    np.testing.assert_array_equal(model.predict(x[3:4], verbose=0)[0], y[3])


@pytest.mark.parametrize(
    "argument, value",
    [
        ("rms_scaling", True),
        ("beta_constraint", "non_neg"),
    ],
)
def test_an_argument_crossover_does_not_run_is_refused_naming_it(argument, value):
    with pytest.raises(ValueError, match=f"LayerNormalization: argument {argument}[=:]"):
        layers.LayerNormalization(**{argument: value})


def test_an_axis_other_than_the_last_is_refused_when_the_model_is_built():
    # The engine's reader takes an axis as a number (tf.keras 2 files write the last one, [3]);
    # the input's shape says whether it is the last.
    model = keras.Sequential([keras.Input((4, 4, 3)), layers.LayerNormalization(axis=1)])
    with pytest.raises(ValueError, match="LayerNormalization axis 1 is not supported on samples"):
        model.predict(np.zeros((2, 4, 4, 3), np.float32), verbose=0)


def test_to_json_round_trip_keeps_the_arguments():
    model = dense_ln_model(epsilon=0.01, center=False)
    again = keras.models.model_from_json(model.to_json())
    assert again.to_json() == model.to_json()
    ln = again.layers[1]
    assert type(ln).__name__ == "LayerNormalization"
    assert (ln.epsilon, ln.center, ln.scale) == (0.01, False, True)


@pytest.mark.parametrize("suffix", [".weights.h5", ".safetensors"])
def test_saved_weights_come_back(tmp_path, suffix):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((32, 6)).astype(np.float32)
    y = rng.integers(0, 3, 32)
    model = dense_ln_model()
    model.compile(loss="sparse_categorical_crossentropy", optimizer="adam")
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    path = str(tmp_path / ("m" + suffix))
    model.save_weights(path)
    other = dense_ln_model()
    other.load_weights(path)
    for a, b in zip(model.get_weights(), other.get_weights()):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(model.predict(x, verbose=0), other.predict(x, verbose=0))
