"""tf.saved_model.save / load (crossover.saved_model): the folder holds the model as a Keras 3
`.keras` archive (model.keras), not a TensorFlow SavedModel; load gives back a callable object
with TensorFlow's signatures["serving_default"]; a real SavedModel folder is refused by name."""

import os
from pathlib import Path

import numpy as np
import pytest

import crossover as tf
from crossover import keras


def small_model():
    model = keras.Sequential(
        [keras.Input((6,)), keras.layers.Dense(5, activation="relu"), keras.layers.Dense(3)]
    )
    model.compile(optimizer="adam", loss="mse")
    return model


def test_save_writes_a_keras_archive_into_the_folder_and_load_reads_it(tmp_path: Path) -> None:
    model = small_model()
    x = np.random.RandomState(0).rand(4, 6).astype(np.float32)
    folder = tmp_path / "saved_model" / "my_model"  # parents made, as TensorFlow does
    tf.saved_model.save(model, str(folder))
    assert sorted(os.listdir(folder)) == ["model.keras"]  # no saved_model.pb: not TensorFlow's
    loaded = tf.saved_model.load(folder)
    np.testing.assert_array_equal(np.asarray(loaded(x)), model.predict(x, verbose=0))
    outputs = loaded.signatures["serving_default"](x)
    assert list(outputs) == ["output_0"]
    np.testing.assert_array_equal(np.asarray(outputs["output_0"]), model.predict(x, verbose=0))
    assert "not a TensorFlow SavedModel" in repr(loaded)
    # The archive is an ordinary .keras file.
    again = keras.models.load_model(folder / "model.keras")
    np.testing.assert_array_equal(again.predict(x, verbose=0), model.predict(x, verbose=0))


def test_a_tensorflow_saved_model_folder_is_refused_naming_the_keras_archive(tmp_path) -> None:
    (tmp_path / "saved_model.pb").write_bytes(b"\x08\x01")
    refusal = r"TensorFlow SavedModel.*model.save\('model.keras'\)"
    with pytest.raises(NotImplementedError, match=refusal):
        tf.saved_model.load(str(tmp_path))


def test_load_of_a_folder_without_a_model_and_save_of_a_non_model_are_errors(tmp_path) -> None:
    with pytest.raises(OSError, match="has no model.keras"):
        tf.saved_model.load(str(tmp_path))
    with pytest.raises(TypeError, match="crossover.keras model"):
        tf.saved_model.save(object(), str(tmp_path / "m"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(FileExistsError, match="not a folder"):
        tf.saved_model.save(small_model(), str(tmp_path / "file"))
    with pytest.raises(ValueError, match="signatures"):
        tf.saved_model.save(small_model(), str(tmp_path / "m"), signatures=lambda x: x)
    with pytest.raises(AttributeError, match="not supported"):
        tf.saved_model.Asset
