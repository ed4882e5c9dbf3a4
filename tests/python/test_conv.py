"""Keras's "Simple MNIST convnet" as its tutorial writes it, on crossover.keras."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers

MNIST_10K = Path(__file__).resolve().parents[2] / "data" / "mnist-10k" / "mnist-10k.npz"


def keras_convnet() -> keras.Sequential:
    return keras.Sequential(
        [
            keras.Input(shape=(28, 28, 1)),
            layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
            layers.MaxPooling2D(pool_size=(2, 2)),
            layers.Flatten(),
            layers.Dropout(0.5),
            layers.Dense(10, activation="softmax"),
        ]
    )


def test_the_tutorials_convnet_has_keras_shapes_and_34826_parameters(capsys):
    model = keras_convnet()
    model.summary()
    out = capsys.readouterr().out
    assert "(None, 26, 26, 32)" in out and "(None, 5, 5, 64)" in out and "34,826" in out
    assert model.count_params() == 34826


def test_the_tutorials_convnet_trains_on_grey_images():
    with np.load(MNIST_10K) as d:
        x = (d["x_train"][:512] / 255.0).astype(np.float32)
        y = d["y_train"][:512]
    x = np.expand_dims(x, -1)  # as the tutorial does: (N, 28, 28, 1)
    model = keras_convnet()
    model.compile(loss="sparse_categorical_crossentropy", optimizer="adam", metrics=["accuracy"])
    history = model.fit(x, y, batch_size=128, epochs=2, validation_split=0.1, verbose=0)
    assert history.history["loss"][1] < history.history["loss"][0]
    weights = model.get_weights()
    assert weights[0].shape == (3, 3, 1, 32) and weights[2].shape == (3, 3, 32, 64)


def test_keras_defaults_and_int_or_tuple_arguments():
    conv = layers.Conv2D(8, 3)
    assert conv.kernel_size == (3, 3) and conv.strides == (1, 1) and conv.padding == "valid"
    assert layers.MaxPooling2D(3).strides == (3, 3)  # strides default to pool_size
    assert layers.MaxPooling2D((2, 2), strides=1, padding="same").strides == (1, 1)


@pytest.mark.parametrize(
    "make, argument",
    [
        (lambda: layers.Conv2D(8, 3, groups=2), "groups"),
        (lambda: layers.Conv2D(8, 3, data_format="channels_first"), "data_format"),
        (lambda: layers.Conv2D(8, 3, kernel_constraint="max_norm"), "kernel_constraint"),
        (lambda: layers.Conv2D(8, 3, padding="causal"), "padding"),
        (lambda: layers.MaxPooling2D(0), "pool_size"),
    ],
)
def test_an_argument_crossover_does_not_run_is_refused_naming_it(make, argument):
    with pytest.raises(ValueError, match=argument):
        make()


def test_a_keras_convnet_round_trips_through_to_json():
    model = keras_convnet()
    again = keras.models.model_from_json(model.to_json())
    assert again.to_json() == model.to_json()
    assert [type(layer).__name__ for layer in again.layers][:2] == ["Conv2D", "MaxPooling2D"]


# ---- dilation_rate (atrous convolution) ----


def dilated_model() -> keras.Sequential:
    return keras.Sequential(
        [
            keras.Input(shape=(9, 10, 2)),
            layers.Conv2D(4, 3, dilation_rate=2, activation="relu"),  # spans 5x5: (5, 6, 4)
            layers.Conv2D(3, (3, 2), dilation_rate=(2, 3), padding="same"),  # (5, 6, 3)
            layers.Flatten(),
            layers.Dense(2, activation="softmax"),
        ]
    )


def test_a_dilated_conv2d_has_keras_shapes_and_parameter_count(capsys):
    model = dilated_model()
    model.summary()
    out = capsys.readouterr().out
    # Keras 3.15's summary of the same model: (None, 5, 6, 4), (None, 5, 6, 3), 333 parameters.
    assert "(None, 5, 6, 4)" in out and "(None, 5, 6, 3)" in out and "Total params: 333" in out
    assert model.count_params() == (3 * 3 * 2 * 4 + 4) + (3 * 2 * 4 * 3 + 3) + (90 * 2 + 2)
    assert model.layers[0].dilation_rate == (2, 2) and model.layers[1].dilation_rate == (2, 3)
    assert layers.Conv2D(8, 3).dilation_rate == (1, 1)
    small = keras.Sequential([keras.Input((5, 6, 2)), layers.Conv2D(3, 3, dilation_rate=2)])
    assert small.output_shape == (None, 1, 2, 3)  # Keras's
    too_small = keras.Sequential([keras.Input((4, 9, 1)), layers.Conv2D(3, 3, dilation_rate=2)])
    with pytest.raises(ValueError, match="dilation_rate .2, 2. spans 5x5, which does not fit"):
        too_small.summary()


def test_a_dilated_conv2ds_config_holds_its_dilation_rate_and_rebuilds_it():
    layer = layers.Conv2D(3, (3, 2), dilation_rate=(2, 3), padding="same")
    config = layer.get_config()
    assert list(config["dilation_rate"]) == [2, 3] and list(config["strides"]) == [1, 1]
    again = layers.Conv2D.from_config(config)
    assert again.dilation_rate == (2, 3) and again.get_config() == config
    model = dilated_model()
    back = keras.models.model_from_json(model.to_json())
    assert back.to_json() == model.to_json()
    assert [layer.dilation_rate for layer in back.layers[:2]] == [(2, 2), (2, 3)]


def test_strides_above_one_with_a_dilation_above_one_is_kerass_value_error():
    for strides, dilation in [(2, 2), ((1, 2), (2, 1))]:
        with pytest.raises(ValueError, match="`strides > 1` not supported in conjunction with"):
            layers.Conv2D(8, 3, strides=strides, dilation_rate=dilation)
    with pytest.raises(ValueError, match="dilation_rate"):
        layers.Conv2D(8, 3, dilation_rate=0)
    assert layers.Conv2D(8, 3, strides=2, dilation_rate=1).strides == (2, 2)


def test_a_dilated_convnet_trains():
    rs = np.random.RandomState(0)
    x = rs.rand(64, 9, 10, 2).astype(np.float32)
    y = (x[:, 2:7, 2:8, 0].mean(axis=(1, 2)) > x[:, 2:7, 2:8, 1].mean(axis=(1, 2))).astype(int)
    model = dilated_model()
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    history = model.fit(x, y, batch_size=16, epochs=5, verbose=0)
    assert history.history["loss"][-1] < history.history["loss"][0]
    assert model.predict(x, verbose=0).shape == (64, 2)
