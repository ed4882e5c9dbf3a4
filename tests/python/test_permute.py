"""Keras's Permute and RepeatVector on crossover.keras: Keras's argument checks and messages,
shapes in summary(), what they compute (numpy's transpose and repeat), get_config / from_config
and JSON, fit and predict in a Sequential and a functional model (their values and training
against Keras itself: test_permute_peers.py)."""

import json

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers


def test_arguments_as_keras_keeps_them():
    assert layers.Permute((2, 1)).dims == (2, 1)
    assert layers.Permute([3, 1, 2]).dims == (3, 1, 2)
    assert layers.Permute((1,)).dims == (1,)
    assert layers.RepeatVector(4).n == 4


@pytest.mark.parametrize(
    "make,error,message",
    [
        (lambda: layers.Permute((1, 1)), ValueError, "must be consecutive and start from 1"),
        (lambda: layers.Permute((0, 1)), ValueError, "must be consecutive and start from 1"),
        (lambda: layers.Permute((2, 3)), ValueError, "Received dims=\\(2, 3\\)"),
        (lambda: layers.Permute(()), ValueError, "Permute needs dims"),  # Keras: only (batch,)
        (lambda: layers.Permute(tuple(range(9, 0, -1))), ValueError, "at most 8"),
        (lambda: layers.RepeatVector(0), ValueError, "argument n: n must be a whole number from 1"),
        (lambda: layers.RepeatVector(-2), ValueError, "argument n: .*got -2"),
        (lambda: layers.RepeatVector(2.0), ValueError, "argument n: .*got 2.0"),
        (lambda: layers.RepeatVector(True), ValueError, "argument n: .*got true"),
    ],
)
def test_bad_arguments_are_one_clear_error(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_a_rank_other_than_the_inputs_is_refused_when_the_model_builds():
    model = keras.Sequential([keras.Input((4, 5, 2)), layers.Permute((2, 1)), layers.Flatten()])
    with pytest.raises(ValueError, match="permutes samples of 2 axes.*\\(4, 5, 2\\)"):
        model.summary()
    model = keras.Sequential([keras.Input((4, 5)), layers.RepeatVector(3), layers.Flatten()])
    with pytest.raises(ValueError, match="RepeatVector repeats flat samples"):
        model.summary()


def test_summary_shows_the_permuted_and_repeated_shapes(capsys):
    model = keras.Sequential(
        [keras.Input((28, 28)), layers.Permute((2, 1)), layers.Reshape((28, 4, 7)),
         layers.Permute((3, 1, 2)), layers.Flatten(), layers.Dense(6), layers.RepeatVector(3),
         layers.Flatten()]
    )
    model.summary()
    out = capsys.readouterr().out
    assert "permute (Permute)" in out and "(None, 28, 28)" in out
    assert "permute_1 (Permute)" in out and "(None, 7, 28, 4)" in out
    assert "repeat_vector (RepeatVector)" in out and "(None, 3, 6)" in out
    assert model.layers[0].get_weights() == [] and model.layers[5].get_weights() == []
    assert model.count_params() == 784 * 6 + 6


def test_predict_transposes_and_repeats_as_numpy():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 3, 4, 2)).astype(np.float32)
    for dims in [(1, 2, 3), (2, 1, 3), (3, 2, 1), (2, 3, 1), (3, 1, 2)]:
        model = keras.Sequential([keras.Input((3, 4, 2)), layers.Permute(dims), layers.Flatten()])
        expected = np.transpose(x, (0,) + dims).reshape(5, -1)
        np.testing.assert_array_equal(model.predict(x, verbose=0), expected, err_msg=str(dims))
    flat = x.reshape(5, -1)
    for n in (1, 2, 5, 8):
        model = keras.Sequential([keras.Input((24,)), layers.RepeatVector(n), layers.Flatten()])
        expected = np.repeat(flat[:, None, :], n, axis=1).reshape(5, -1)
        np.testing.assert_array_equal(model.predict(flat, verbose=0), expected, err_msg=str(n))


def test_get_config_from_config_and_json_round_trip():
    permute = layers.Permute((3, 1, 2), name="p")
    config = permute.get_config()
    assert config["dims"] == (3, 1, 2) and config["name"] == "p"
    again = layers.Permute.from_config(config)
    assert again.dims == (3, 1, 2) and again.name == "p"
    repeat = layers.RepeatVector(4, name="r")
    assert repeat.get_config()["n"] == 4
    assert layers.RepeatVector.from_config(repeat.get_config()).n == 4

    model = keras.Sequential(
        [keras.Input((2, 3, 4)), layers.Permute((3, 1, 2)), layers.Flatten(),
         layers.RepeatVector(2), layers.Flatten()]
    )
    written = json.loads(model.to_json())["config"]["layers"]
    assert written[1]["class_name"] == "Permute" and written[1]["config"]["dims"] == [3, 1, 2]
    assert written[3]["class_name"] == "RepeatVector" and written[3]["config"]["n"] == 2
    # Keras 3.15 writes one for both (their InputSpec checks the input's rank when they build).
    assert written[1]["build_config"] == {"input_shape": [None, 2, 3, 4]}
    assert written[3]["build_config"] == {"input_shape": [None, 24]}
    again = keras.models.model_from_json(model.to_json())
    assert again.layers[0].dims == (3, 1, 2) and again.layers[2].n == 2
    x = np.arange(2 * 24, dtype=np.float32).reshape(2, 2, 3, 4)
    np.testing.assert_array_equal(again.predict(x, verbose=0), model.predict(x, verbose=0))


def test_a_model_file_with_bad_dims_is_one_clear_error():
    model = keras.Sequential([keras.Input((2, 3)), layers.Permute((2, 1)), layers.Flatten()])
    text = model.to_json().replace('"dims": [2, 1]', '"dims": [2, 2]')
    assert '"dims": [2, 2]' in text
    with pytest.raises(ValueError, match="dims.*must be consecutive"):
        keras.models.model_from_json(text)


def _data():
    rng = np.random.default_rng(0)
    x = rng.random((64, 6, 4)).astype(np.float32)
    y = (x[:, :, 0].mean(axis=1) > x[:, 0, :].mean(axis=1)).astype(np.int64)
    return x, y


def test_a_sequential_model_with_both_trains_and_predicts():
    x, y = _data()
    model = keras.Sequential(
        [keras.Input((6, 4)), layers.Permute((2, 1)), layers.Flatten(),
         layers.Dense(8, activation="tanh"), layers.RepeatVector(3), layers.Flatten(),
         layers.Dense(2, activation="softmax")]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    history = model.fit(x, y, epochs=8, batch_size=16, verbose=0).history
    assert history["loss"][-1] < history["loss"][0]
    assert model.predict(x, verbose=0).shape == (64, 2)


def test_a_functional_model_with_both_trains_and_predicts():
    x, y = _data()
    inp = keras.Input((6, 4))
    a = layers.Flatten()(layers.Permute((2, 1))(inp))
    b = layers.Flatten()(inp)
    h = layers.Dense(5, activation="relu")(layers.Concatenate()([a, b]))
    r = layers.RepeatVector(2)(h)
    out = layers.Dense(2, activation="softmax")(layers.Flatten()(r))
    model = keras.Model(inp, out)
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    history = model.fit(x, y, epochs=8, batch_size=16, verbose=0).history
    assert history["loss"][-1] < history["loss"][0]
    assert model.predict(x, verbose=0).shape == (64, 2)
    assert tuple(r.shape) == (None, 2, 5)


def test_a_keras_archive_keeps_both(tmp_path):
    x, y = _data()
    model = keras.Sequential(
        [keras.Input((6, 4)), layers.Permute((2, 1)), layers.Flatten(), layers.Dense(5),
         layers.RepeatVector(2), layers.Flatten(), layers.Dense(2, activation="softmax")]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(x, y, epochs=1, verbose=0)
    model.save(str(tmp_path / "m.keras"))
    again = keras.models.load_model(str(tmp_path / "m.keras"))
    assert again.layers[0].dims == (2, 1) and again.layers[3].n == 2
    np.testing.assert_array_equal(again.predict(x, verbose=0), model.predict(x, verbose=0))
