"""Keras's ZeroPadding2D and Cropping2D on crossover.keras: defaults and Keras's argument forms,
shapes in summary(), what they compute (numpy's pad and slices), refusals, JSON (their values and
training against Keras itself: test_zero_padding_peers.py)."""

import json

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers


def test_keras_defaults_and_argument_forms():
    assert layers.ZeroPadding2D().padding == ((1, 1), (1, 1))
    assert layers.ZeroPadding2D(2).padding == ((2, 2), (2, 2))
    assert layers.ZeroPadding2D((1, 3)).padding == ((1, 1), (3, 3))
    assert layers.ZeroPadding2D(((0, 1), (2, 3))).padding == ((0, 1), (2, 3))
    assert layers.Cropping2D().cropping == ((0, 0), (0, 0))
    assert layers.Cropping2D(((4, 4), (0, 2))).cropping == ((4, 4), (0, 2))
    assert layers.ZeroPadding2D().data_format == "channels_last"


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda: layers.ZeroPadding2D(-1), r"argument padding: .*whole numbers >= 0, got -1"),
        (lambda: layers.Cropping2D(((1, -2), (0, 0))), r"cropping: .*>= 0, got \[\[1,-2\]"),
        (lambda: layers.ZeroPadding2D((1, 2, 3)), r"padding: expected an int, \[height,"),
        (lambda: layers.ZeroPadding2D(((1, 2, 3), (0, 0))), r"\[\[top, bottom\], \[left,"),
        (lambda: layers.Cropping2D(1.5), "argument cropping: expected an int.*got 1.5"),
        (lambda: layers.ZeroPadding2D(data_format="channels_first"), "data_format"),
    ],
)
def test_bad_arguments_are_one_clear_error(make, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make()


def test_cropping_everything_is_refused_when_the_model_builds():
    model = keras.Sequential(
        [keras.Input((4, 4, 1)), layers.Cropping2D(((2, 2), (0, 0))), layers.Flatten()]
    )
    with pytest.raises(ValueError, match="leaves nothing of the 4x4 input"):
        model.summary()


def test_summary_shows_the_padded_and_cropped_shapes(capsys):
    model = keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            layers.ZeroPadding2D(((1, 2), (3, 0))),
            layers.Conv2D(2, 3),
            layers.Cropping2D(((4, 4), (0, 2))),
            layers.Flatten(),
        ]
    )
    model.summary()
    out = capsys.readouterr().out
    assert "zero_padding2d (ZeroPadding2D)" in out and "(None, 31, 31, 1)" in out
    assert "cropping2d (Cropping2D)" in out and "(None, 21, 27, 2)" in out
    assert model.layers[0].get_weights() == [] and model.count_params() == 9 * 2 + 2


def test_predict_pads_with_zeros_and_crops_the_window():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 5, 2)).astype(np.float32)
    padded = keras.Sequential(
        [keras.Input((4, 5, 2)), layers.ZeroPadding2D(((1, 2), (0, 3))), layers.Flatten()]
    )
    expected = np.pad(x, ((0, 0), (1, 2), (0, 3), (0, 0)))
    np.testing.assert_array_equal(padded.predict(x, verbose=0), expected.reshape(3, -1))
    cropped = keras.Sequential(
        [keras.Input((4, 5, 2)), layers.Cropping2D(((1, 0), (2, 1))), layers.Flatten()]
    )
    np.testing.assert_array_equal(cropped.predict(x, verbose=0), x[:, 1:, 2:4].reshape(3, -1))


def test_json_round_trip_writes_keras_fields():
    model = keras.Sequential(
        [
            keras.Input((6, 6, 1)),
            layers.ZeroPadding2D((1, 2)),
            layers.Cropping2D(1),
            layers.Flatten(),
        ]
    )
    config = json.loads(model.to_json())
    pad, crop = config["config"]["layers"][1]["config"], config["config"]["layers"][2]["config"]
    assert pad["padding"] == [[1, 1], [2, 2]] and pad["data_format"] == "channels_last"
    assert crop["cropping"] == [[1, 1], [1, 1]]
    again = keras.models.model_from_json(model.to_json())
    assert again.layers[0].padding == ((1, 1), (2, 2))
    assert again.layers[1].cropping == ((1, 1), (1, 1))


def test_a_padded_convnet_trains():
    rng = np.random.default_rng(0)
    x = rng.random((64, 6, 6, 1)).astype(np.float32)
    y = (x.mean(axis=(1, 2, 3)) > 0.5).astype(np.int64)
    model = keras.Sequential(
        [
            keras.Input((6, 6, 1)),
            layers.ZeroPadding2D(),
            layers.Conv2D(4, 3, activation="relu"),
            layers.Cropping2D(1),
            layers.Flatten(),
            layers.Dense(2, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    history = model.fit(x, y, epochs=5, batch_size=16, verbose=0).history
    assert history["loss"][-1] < history["loss"][0]


def test_1d_keras_defaults_and_argument_forms():
    assert layers.ZeroPadding1D().padding == (1, 1)
    assert layers.ZeroPadding1D(3).padding == (3, 3)
    assert layers.ZeroPadding1D((0, 2)).padding == (0, 2)
    assert layers.ZeroPadding1D().data_format == "channels_last"
    assert layers.Cropping1D().cropping == (1, 1)
    assert layers.Cropping1D([2, 0]).cropping == (2, 0)


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda: layers.ZeroPadding1D(-1), "argument padding: .*>= 0, got -1"),
        (lambda: layers.Cropping1D((1, 2, 3)), r"cropping: expected an int or \[left,"),
        (lambda: layers.Cropping1D(1.5), "argument cropping: .*got 1.5"),
        (lambda: layers.ZeroPadding1D(("a", 1)), "argument padding: .*whole numbers"),
        (lambda: layers.ZeroPadding1D(data_format="channels_first"), "data_format"),
    ],
)
def test_1d_bad_arguments_are_one_clear_error(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_1d_layers_pad_and_crop_the_steps_as_numpy_does():
    x = np.arange(2 * 5 * 3, dtype=np.float32).reshape(2, 5, 3)
    model = keras.Sequential([keras.Input((5, 3)), layers.ZeroPadding1D((2, 1))])
    assert model.output_shape == (None, 8, 3)
    np.testing.assert_array_equal(model.predict(x, verbose=0), np.pad(x, ((0, 0), (2, 1), (0, 0))))
    model = keras.Sequential([keras.Input((5, 3)), layers.Cropping1D((1, 2))])
    assert model.output_shape == (None, 2, 3)
    np.testing.assert_array_equal(model.predict(x, verbose=0), x[:, 1:3, :])


def test_1d_cropping_everything_or_a_sample_of_another_rank_is_refused():
    with pytest.raises(ValueError, match="must be smaller than the input length"):
        keras.Sequential([keras.Input((4, 3)), layers.Cropping1D((2, 2))]).predict(
            np.zeros((1, 4, 3), np.float32), verbose=0
        )
    with pytest.raises(ValueError, match=r"\(steps, features\) samples"):
        keras.Sequential([keras.Input((4, 3, 2)), layers.ZeroPadding1D()]).predict(
            np.zeros((1, 4, 3, 2), np.float32), verbose=0
        )


def test_1d_json_round_trip_keeps_the_margins():
    model = keras.Sequential(
        [keras.Input((6, 2)), layers.ZeroPadding1D((0, 3)), layers.Cropping1D(2)]
    )
    again = keras.models.model_from_json(model.to_json())
    assert [
        l.get_config()["padding" if i == 0 else "cropping"] for i, l in enumerate(again.layers)
    ] == [
        [0, 3],
        [2, 2],
    ]
