"""Keras's UpSampling2D on crossover.keras: defaults, shapes in summary(), what it computes,
refusals, JSON and files (its values against Keras itself: test_upsampling_peers.py)."""

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers


def autoencoder(**up) -> keras.Sequential:
    return keras.Sequential(
        [
            keras.Input(shape=(8, 8, 1)),
            layers.Conv2D(4, 3, activation="relu", padding="same"),
            layers.MaxPooling2D(2, padding="same"),
            layers.UpSampling2D(**up),
            layers.Conv2D(1, 3, activation="sigmoid", padding="same"),
            layers.Flatten(),  # the engine's outputs are flat
        ]
    )


def test_keras_defaults():
    up = layers.UpSampling2D()
    assert (up.size, up.data_format, up.interpolation) == ((2, 2), "channels_last", "nearest")
    assert layers.UpSampling2D(3).size == (3, 3)
    assert layers.UpSampling2D(interpolation="NEAREST").interpolation == "nearest"


def test_summary_shows_the_upsampled_shape_and_no_parameters(capsys):
    model = autoencoder(size=(2, 3))
    model.summary()
    out = capsys.readouterr().out
    assert "up_sampling2d (UpSampling2D)" in out
    assert "(None, 8, 12, 4)" in out
    assert model.count_params() == (9 * 4 + 4) + (9 * 4 + 1)
    assert model.layers[2].get_weights() == []


def test_predict_repeats_each_value_over_its_block():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 2, 5, 4)).astype(np.float32)
    model = keras.Sequential(
        [keras.Input((2, 5, 4)), layers.UpSampling2D((3, 2)), layers.Flatten()]
    )
    y = model.predict(x, verbose=0)
    assert y.shape == (3, 6 * 10 * 4)
    np.testing.assert_array_equal(y, np.repeat(np.repeat(x, 3, axis=1), 2, axis=2).reshape(3, -1))


@pytest.mark.parametrize(
    "argument, value",
    [("interpolation", "bilinear"), ("interpolation", "bicubic"), ("data_format", "channels_first")],
)
def test_an_argument_crossover_does_not_run_is_refused_naming_it(argument, value):
    with pytest.raises(ValueError, match=f"UpSampling2D: argument {argument}[=:]"):
        layers.UpSampling2D(**{argument: value})


def test_a_bad_size_is_refused():
    with pytest.raises(ValueError, match="UpSampling2D: argument size: expected two numbers"):
        layers.UpSampling2D((1, 2, 3))


def test_to_json_round_trip_keeps_the_size():
    model = autoencoder(size=(3, 2))
    again = keras.models.model_from_json(model.to_json())
    assert again.to_json() == model.to_json()
    up = again.layers[2]
    assert type(up).__name__ == "UpSampling2D"
    assert up.size == (3, 2)


@pytest.mark.parametrize("suffix", [".weights.h5", ".safetensors"])
def test_an_autoencoder_trains_and_its_weights_come_back(tmp_path, suffix):
    rng = np.random.default_rng(4)
    x = rng.uniform(size=(32, 8, 8, 1)).astype(np.float32)
    model = autoencoder()
    model.compile(loss="binary_crossentropy", optimizer="adam")
    history = model.fit(x, x.reshape(32, -1), batch_size=8, epochs=3, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    path = str(tmp_path / ("m" + suffix))
    model.save_weights(path)
    other = autoencoder()
    other.load_weights(path)
    np.testing.assert_array_equal(model.predict(x, verbose=0), other.predict(x, verbose=0))
