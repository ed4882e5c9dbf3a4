"""Keras's GaussianNoise, GaussianDropout and SpatialDropout2D on crossover.keras: Keras's argument
forms and checks, refusals, get_config/from_config and JSON, summary(), the identity in predict,
the statistics of a training pass (model(x, training=True)), and fit/predict in a Sequential
(against Keras itself: test_noise_peers.py)."""

import json

import numpy as np
import pytest

import crossover as tf
from crossover import keras
from crossover.keras import layers


def test_keras_argument_forms():
    noise = layers.GaussianNoise(0.1)
    assert noise.stddev == 0.1 and noise.seed is None
    assert layers.GaussianNoise(stddev=1).stddev == 1
    dropout = layers.GaussianDropout(rate=0.25, name="gd")
    assert dropout.rate == 0.25 and dropout.name == "gd"
    spatial = layers.SpatialDropout2D(0.5)
    assert spatial.rate == 0.5 and spatial.data_format == "channels_last"
    assert layers.SpatialDropout2D(0.5, data_format="channels_last").data_format == "channels_last"
    assert layers.SpatialDropout2D(0.5, "CHANNELS_LAST").data_format == "channels_last"
    assert layers.GaussianNoise(0).get_weights() == []
    # A layer's own seed is taken and kept, as Dropout's; the noise comes from the model's seed.
    assert layers.GaussianNoise(0.1, seed=3).seed == 3
    assert layers.SpatialDropout2D(0.1, seed=3).seed == 3


@pytest.mark.parametrize(
    "make,error,message",
    [
        (lambda: layers.GaussianNoise(-0.1), ValueError, r"stddev: .*\[0, 1\], got -0.1"),
        (lambda: layers.GaussianNoise(1.5), ValueError, "argument stddev: .*got 1.5"),
        (lambda: layers.GaussianDropout(1.2), ValueError, "argument rate: .*got 1.2"),
        (lambda: layers.GaussianDropout(1), ValueError, r"argument rate: .*\[0, 1\), got 1"),
        (lambda: layers.SpatialDropout2D(1.0), ValueError, r"argument rate: .*\[0, 1\), got 1"),
        (lambda: layers.SpatialDropout2D(-0.5), ValueError, "argument rate: .*got -0.5"),
        (lambda: layers.SpatialDropout2D(0.1, "channels_first"), ValueError, "data_format"),
        (lambda: layers.SpatialDropout2D(0.1, "channels_middle"), ValueError, "data_format"),
        (lambda: layers.GaussianNoise(0.1, foo=1), (TypeError, ValueError), "foo"),
    ],
)
def test_bad_arguments_are_one_clear_error(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_spatial_dropout_needs_images():
    model = keras.Sequential([keras.Input((12,)), layers.SpatialDropout2D(0.5), layers.Dense(2)])
    with pytest.raises(ValueError, match=r"SpatialDropout2D needs samples of shape \(height"):
        model.summary()


def test_get_config_and_from_config_are_keras_s():
    noise = layers.GaussianNoise(0.2, name="n")
    config = noise.get_config()
    assert config["stddev"] == 0.2 and config["seed"] is None and config["trainable"] is True
    assert config["dtype"]["config"]["name"] == "float32"
    again = layers.GaussianNoise.from_config(config)
    assert again.stddev == 0.2 and again.name == "n"
    gd = layers.GaussianDropout.from_config(layers.GaussianDropout(0.4).get_config())
    assert gd.rate == 0.4
    spatial = layers.SpatialDropout2D(0.3, name="s").get_config()
    assert spatial == {"rate": 0.3, "seed": None, "name": "s", "dtype": "float32",
                       "data_format": "channels_last"}
    assert layers.SpatialDropout2D.from_config(spatial).rate == 0.3


def noisy_model(stddev=0.5, rate=0.3, spatial=0.4):
    return keras.Sequential(
        [keras.Input((4, 4, 3)), layers.GaussianNoise(stddev), layers.Conv2D(4, 2),
         layers.SpatialDropout2D(spatial), layers.Flatten(), layers.GaussianDropout(rate),
         layers.Dense(3, activation="softmax")]
    )


def test_json_round_trip_and_summary(capsys):
    model = noisy_model()
    text = model.to_json()
    entries = json.loads(text)["config"]["layers"]
    by_class = {e["class_name"]: e for e in entries}
    assert by_class["GaussianNoise"]["config"]["stddev"] == 0.5
    assert by_class["GaussianDropout"]["config"]["rate"] == 0.3
    spatial = by_class["SpatialDropout2D"]["config"]
    assert set(spatial) == {"rate", "seed", "name", "dtype", "data_format"}
    assert spatial["rate"] == 0.4 and spatial["dtype"] == "float32"
    for cls in ("GaussianNoise", "GaussianDropout", "SpatialDropout2D"):
        assert "build_config" not in by_class[cls]  # Keras 3.15 writes none
    again = keras.models.model_from_json(text)
    assert [type(l).__name__ for l in again.layers] == [type(l).__name__ for l in model.layers]
    assert again.layers[0].stddev == 0.5 and again.layers[2].rate == 0.4
    again.summary()
    out = capsys.readouterr().out
    assert "gaussian_noise" in out and "(GaussianNoise)" in out
    assert "(SpatialDropout2D)" in out and "(None, 3, 3, 4)" in out
    assert "(GaussianDropout)" in out
    assert again.count_params() == (2 * 2 * 3 * 4 + 4) + (36 * 3 + 3)


def test_predict_is_the_identity():
    x = np.random.default_rng(1).standard_normal((5, 4, 4, 3)).astype(np.float32)
    for layer in (layers.GaussianNoise(1.0), layers.GaussianDropout(0.9),
                  layers.SpatialDropout2D(0.9)):
        model = keras.Sequential([keras.Input((4, 4, 3)), layer, layers.Flatten()])
        np.testing.assert_array_equal(model.predict(x, verbose=0), x.reshape(5, -1))
        np.testing.assert_array_equal(np.asarray(model(x)), x.reshape(5, -1))
    with pytest.raises(NotImplementedError, match="training=True"):
        layers.GaussianNoise(0.5)(x, training=True)


def training_pass(layer, x):
    model = keras.Sequential([keras.Input(x.shape[1:]), layer, layers.Flatten()])
    model.compile(optimizer="sgd", loss="mse")
    return np.asarray(model(x, training=True)).reshape(x.shape)


def test_gaussian_noise_in_training_adds_noise_of_its_stddev():
    x = np.full((50, 20, 20, 2), 3.0, np.float32)
    noise = training_pass(layers.GaussianNoise(0.4), x) - x
    assert abs(noise.mean()) < 0.01  # 40,000 draws: standard error 0.002
    assert noise.var() == pytest.approx(0.16, rel=0.03)


def test_gaussian_dropout_in_training_multiplies_by_one_centred_noise():
    x = np.full((50, 20, 20, 2), 2.0, np.float32)
    factor = training_pass(layers.GaussianDropout(0.5), x) / x
    assert factor.mean() == pytest.approx(1.0, abs=0.02)
    assert factor.var() == pytest.approx(1.0, rel=0.03)  # rate / (1 - rate)


def test_spatial_dropout_in_training_drops_whole_channels():
    rng = np.random.default_rng(3)
    x = rng.random((100, 5, 5, 40)).astype(np.float32) + 0.5
    y = training_pass(layers.SpatialDropout2D(0.25), x)
    factor = np.round(y / x, 4)  # 0 or 1 / 0.75, up to float32's rounding of x * factor
    per_channel = factor.reshape(100, 25, 40)
    assert np.all(per_channel == per_channel[:, :1, :])  # one factor per sample and channel
    kept = per_channel[:, 0, :]
    assert set(np.unique(kept)) == {0.0, np.float32(round(1 / 0.75, 4))}
    assert (kept == 0).mean() == pytest.approx(0.25, abs=0.03)  # 4,000 draws
    scale = np.where(kept == 0, 0, np.float32(1 / 0.75))
    np.testing.assert_array_equal(y, x * scale[:, None, None])


def test_a_noisy_convnet_fits_and_predicts():
    tf.keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    x = rng.random((128, 4, 4, 3)).astype(np.float32)
    y = (x.mean(axis=(1, 2, 3)) * 6).astype(np.int64) % 3
    model = noisy_model(0.1, 0.2, 0.2)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    history = model.fit(x, y, epochs=8, batch_size=16, verbose=0).history
    assert np.isfinite(history["loss"]).all() and history["loss"][-1] < history["loss"][0]
    p1, p2 = model.predict(x, verbose=0), model.predict(x, verbose=0)
    np.testing.assert_array_equal(p1, p2)  # no noise in predict
    np.testing.assert_allclose(p1.sum(axis=1), 1.0, rtol=1e-5)
