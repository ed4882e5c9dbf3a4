"""The legacy whole-model HDF5 file (model.save('m.h5'), keras.models.load_model('m.h5')) on
crossover's own: round trips of the architecture, weights and compile settings, the layout Keras's
legacy_h5_format writes (checked with h5py where it is installed), and the refusals of files that
are not such a model. test_legacy_h5_peers.py does the round trips with Keras 3.15 itself."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers

KERAS_DATA = Path(__file__).resolve().parents[1] / "data" / "keras"


def data():
    rs = np.random.RandomState(3)
    return rs.rand(32, 6).astype(np.float32), rs.randint(0, 3, 32)


def trained_mlp():
    x, y = data()
    model = keras.Sequential(
        [
            keras.Input((6,)),
            layers.Dense(5, activation="relu"),
            layers.Dropout(0.2),
            layers.Dense(3, activation="softmax"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.005),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    model.fit(x, y, epochs=1, batch_size=8, verbose=0)
    return model


@pytest.mark.parametrize("name", ["m.h5", "m.hdf5"])
def test_save_and_load_keep_the_model_its_weights_and_compile_settings(tmp_path, name):
    model = trained_mlp()
    x, y = data()
    model.save(tmp_path / name)
    loaded = keras.models.load_model(tmp_path / name)
    assert [type(l).__name__ for l in loaded.layers] == ["Dense", "Dropout", "Dense"]
    assert [l.name for l in loaded.layers] == [l.name for l in model.layers]
    for a, b in zip(loaded.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    # Compiled as saved: the loss, the metric, the optimizer and its rate.
    assert loaded.loss == "sparse_categorical_crossentropy"
    assert type(loaded.optimizer).__name__ == "Adam"
    assert float(loaded.optimizer.learning_rate) == pytest.approx(0.005)
    assert loaded.evaluate(x, y, verbose=0) == pytest.approx(model.evaluate(x, y, verbose=0))
    uncompiled = keras.models.load_model(tmp_path / name, compile=False)
    np.testing.assert_array_equal(uncompiled.predict(x, verbose=0), model.predict(x, verbose=0))


def test_a_model_never_compiled_and_a_convnet_round_trip(tmp_path):
    model = keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            layers.Conv2D(4, 3, activation="relu"),
            layers.BatchNormalization(),
            layers.MaxPooling2D(),
            layers.Flatten(),
            layers.Dense(2),
        ]
    )
    model.save(tmp_path / "conv.h5")
    loaded = keras.models.load_model(tmp_path / "conv.h5")
    x = np.random.RandomState(0).rand(3, 8, 8, 1).astype(np.float32)
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    assert len(loaded.get_weights()) == 8  # conv 2, batch normalization 4, dense 2


def test_the_file_has_keras_legacy_layout(tmp_path):
    h5py = pytest.importorskip("h5py", reason="h5py is not installed: the layout is not read")
    model = trained_mlp()
    model.save(tmp_path / "m.h5")
    with h5py.File(tmp_path / "m.h5", "r") as f:
        assert sorted(f.attrs) == ["backend", "keras_version", "model_config", "training_config"]
        weights = f["model_weights"]
        assert list(weights.attrs["layer_names"]) == [l.name for l in model.layers]
        dense = model.layers[0].name
        names = list(weights[dense].attrs["weight_names"])
        assert names == [f"{model.name}/{dense}/kernel", f"{model.name}/{dense}/bias"]
        np.testing.assert_array_equal(weights[dense][names[0]][()], model.get_weights()[0])
        assert len(weights[model.layers[1].name].attrs["weight_names"]) == 0


def test_files_that_are_not_a_legacy_model_are_refused_naming_why(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        keras.models.load_model(tmp_path / "missing.h5")
    weights_only = tmp_path / "weights_only.h5"
    weights_only.write_bytes((KERAS_DATA / "tiny.weights.h5").read_bytes())
    with pytest.raises(ValueError, match="a weights file.*load_weights"):
        keras.models.load_model(weights_only)
    crash = tmp_path / "crash.h5"
    crash.write_bytes((KERAS_DATA / "libhdf5_crash.weights.h5").read_bytes())
    with pytest.raises(ValueError, match="crash.h5"):
        keras.models.load_model(crash)
    text = tmp_path / "text.h5"
    text.write_text("not hdf5")
    with pytest.raises(ValueError, match="not an HDF5 file"):
        keras.models.load_model(text)
    with pytest.raises(ValueError, match="weights only.*load_weights"):
        keras.models.load_model(tmp_path / "m.weights.h5")


def test_weights_that_do_not_fit_the_model_config_are_refused_by_layer(tmp_path):
    import json

    from crossover import _core

    model = keras.Sequential([keras.Input((6,)), layers.Dense(5), layers.Dense(3)])
    config = json.loads(model.to_json())
    model_config = json.dumps({"class_name": "Sequential", "config": config["config"]})
    first, second = model.layers[0].name, model.layers[1].name
    kernel = np.zeros((6, 4), np.float32)  # the model's is (6, 5)
    wrong_shape = [
        (first, [("s/a/kernel", kernel), ("s/a/bias", np.zeros(4, np.float32))]),
        (second, [("s/b/kernel", np.zeros((5, 3), np.float32))]),
    ]
    _core.write_legacy_h5(
        str(tmp_path / "w.h5"), model_config, "", "3.15.1", "tensorflow", wrong_shape
    )
    with pytest.raises(ValueError, match=f"layer #0 \\(named {first} in the model"):
        keras.models.load_model(tmp_path / "w.h5")
    _core.write_legacy_h5(
        str(tmp_path / "n.h5"), model_config, "", "3.15.1", "tensorflow", wrong_shape[:1]
    )
    with pytest.raises(ValueError, match="Model expected 2 layers, found 1 saved layers"):
        keras.models.load_model(tmp_path / "n.h5")
