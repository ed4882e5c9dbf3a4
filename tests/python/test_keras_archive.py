"""Whole-model saving in Keras 3's `.keras` archive: model.save, keras.models.load_model /
keras.saving.load_model, ModelCheckpoint to `.keras`, and the refusals (a legacy .h5 checkpoint, damaged or
foreign archives). The layout is Keras 3.15's saving_lib's; the round trips with Keras itself are
in test_keras_archive_peers.py."""

import json
import os
import zipfile

import numpy as np
import pytest

import crossover as tf
from crossover import keras
from crossover.keras import callbacks, layers


def mlp() -> keras.Sequential:
    return keras.Sequential(
        [
            keras.Input((6,)),
            layers.Dense(8, activation="relu"),
            layers.Dropout(0.2),
            layers.Dense(3, activation="softmax"),
        ],
        name="mlp",
    )


def convnet() -> keras.Sequential:
    return keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            layers.Conv2D(4, (3, 3), activation="relu"),
            layers.MaxPooling2D((2, 2)),
            layers.Flatten(),
            layers.Dense(3, activation="softmax"),
        ]
    )


@pytest.fixture
def data():
    rs = np.random.RandomState(1)
    return rs.rand(48, 6).astype(np.float32), rs.randint(0, 3, 48)


def trained_mlp(data, optimizer=None):
    x, y = data
    model = mlp()
    model.compile(
        optimizer or keras.optimizers.Adam(learning_rate=0.002),
        "sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    model.fit(x, y, epochs=1, batch_size=16, verbose=0)
    return model


def same_weights(a, b):
    wa, wb = a.get_weights(), b.get_weights()
    assert [w.shape for w in wa] == [w.shape for w in wb]
    assert all(np.array_equal(p, q) for p, q in zip(wa, wb))


# --- what is written -------------------------------------------------------------------------
def test_save_writes_keras_3s_three_members_stored_in_its_order(data, tmp_path):
    model = trained_mlp(data)
    path = tmp_path / "m.keras"
    model.save(path)
    with zipfile.ZipFile(path) as zf:
        infos = zf.infolist()
        assert [i.filename for i in infos] == ["metadata.json", "config.json", "model.weights.h5"]
        assert all(i.compress_type == zipfile.ZIP_STORED for i in infos)
        metadata = json.loads(zf.read("metadata.json"))
        config = json.loads(zf.read("config.json"))
        weights = zf.read("model.weights.h5")
    assert sorted(metadata) == ["date_saved", "keras_version"]
    assert metadata["keras_version"] == keras.__version__
    assert len(metadata["date_saved"]) == len("2026-01-31@12:00:00")
    assert metadata["date_saved"][10] == "@"
    assert config == json.loads(model.to_json())  # compile_config included: it was compiled
    assert config["compile_config"]["optimizer"]["class_name"] == "Adam"
    # The weights member is exactly what save_weights writes.
    model.save_weights(tmp_path / "same.weights.h5")
    assert weights[:8] == b"\x89HDF\r\n\x1a\n"
    again = mlp()
    again.load_weights(tmp_path / "same.weights.h5")
    same_weights(again, model)
    assert sorted(os.listdir(tmp_path)) == ["m.keras", "same.weights.h5"]  # no temporary left


def test_an_uncompiled_model_is_saved_with_keras_3s_empty_compile_config_and_loads_uncompiled(
    tmp_path,
):
    model = mlp()
    model.save(str(tmp_path / "u.keras"))
    with zipfile.ZipFile(tmp_path / "u.keras") as zf:
        assert json.loads(zf.read("config.json"))["compile_config"] == {}
    loaded = keras.models.load_model(tmp_path / "u.keras")
    assert loaded.optimizer is None
    with pytest.raises(ValueError, match="compile"):
        loaded.fit(np.zeros((4, 6), np.float32), np.zeros(4), verbose=0)
    same_weights(loaded, model)


# --- round trips -----------------------------------------------------------------------------
def test_load_model_gives_the_same_model_weights_predictions_and_compile_settings(data, tmp_path):
    x, y = data
    model = trained_mlp(data)
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert loaded.name == "mlp"
    assert [type(l).__name__ for l in loaded.layers] == ["Dense", "Dropout", "Dense"]
    assert [l.name for l in loaded.layers] == [l.name for l in model.layers]
    same_weights(loaded, model)
    assert np.array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    assert isinstance(loaded.optimizer, keras.optimizers.Adam)
    assert float(loaded.optimizer.learning_rate) == pytest.approx(0.002, rel=1e-7)
    assert loaded.loss == "sparse_categorical_crossentropy"
    # Compiled as it was: it trains on, and evaluates with the same metric names.
    history = loaded.fit(x, y, epochs=1, batch_size=16, verbose=0)
    assert sorted(history.history) == ["accuracy", "loss"]


def test_a_convnet_and_sgd_with_momentum_round_trip(tmp_path):
    rs = np.random.RandomState(2)
    x, y = rs.rand(16, 8, 8, 1).astype(np.float32), rs.randint(0, 3, 16)
    model = convnet()
    model.compile(keras.optimizers.SGD(0.05, momentum=0.9), "sparse_categorical_crossentropy")
    model.fit(x, y, epochs=1, verbose=0)
    model.save(tmp_path / "c.keras")
    loaded = tf.keras.saving.load_model(str(tmp_path / "c.keras"))
    same_weights(loaded, model)
    assert np.array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))
    assert isinstance(loaded.optimizer, keras.optimizers.SGD)
    assert loaded.optimizer.momentum == pytest.approx(0.9)
    assert float(loaded.optimizer.learning_rate) == pytest.approx(0.05, rel=1e-7)


def test_compile_false_loads_the_model_uncompiled(data, tmp_path):
    model = trained_mlp(data)
    keras.saving.save_model(model, tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras", compile=False)
    assert loaded.optimizer is None
    same_weights(loaded, model)
    x, _ = data
    assert np.array_equal(loaded.predict(x, verbose=0), model.predict(x, verbose=0))


def test_an_exponential_decay_schedule_is_restored(data, tmp_path):
    schedule = keras.optimizers.schedules.ExponentialDecay(0.01, decay_steps=10, decay_rate=0.5)
    model = trained_mlp(data, keras.optimizers.RMSprop(schedule))
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert isinstance(loaded.optimizer, keras.optimizers.RMSprop)
    assert loaded.optimizer._schedule is not None
    assert loaded.optimizer._schedule.decay_steps == 10
    assert loaded.optimizer._schedule.decay_rate == pytest.approx(0.5)


# --- atomic writes, overwrite ----------------------------------------------------------------
def test_a_failed_save_leaves_the_old_file_as_it_was_and_nothing_else(data, tmp_path, monkeypatch):
    model = trained_mlp(data)
    path = tmp_path / "m.keras"
    model.save(path)
    before = path.read_bytes()

    def broken(*args, **kwargs):
        raise OSError("disk full (simulated)")

    monkeypatch.setattr(zipfile.ZipFile, "write", broken)
    with pytest.raises(OSError, match="simulated"):
        model.save(path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["m.keras"]


def test_overwrite_false_on_an_existing_file_is_refused(data, tmp_path):
    model = trained_mlp(data)
    model.save(tmp_path / "m.keras")
    with pytest.raises(ValueError, match="overwrite=False"):
        model.save(tmp_path / "m.keras", overwrite=False)


def test_save_into_a_missing_folder_says_which(data, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        trained_mlp(data).save(tmp_path / "no" / "m.keras")


# --- refusals --------------------------------------------------------------------------------
def test_a_legacy_h5_checkpoint_is_refused_naming_keras(data, tmp_path):
    # model.save('m.h5') and load_model('m.h5') are the legacy format (test_legacy_h5.py).
    model = trained_mlp(data)
    for name in ("m.h5", "m.hdf5"):
        with pytest.raises(ValueError, match=r"legacy HDF5.*\.keras"):
            callbacks.ModelCheckpoint(str(tmp_path / name))
    with pytest.raises(ValueError, match="weights only.*load_weights"):
        keras.models.load_model(tmp_path / "m.weights.h5")
    with pytest.raises(ValueError, match=r"`\.keras` extension"):
        model.save(tmp_path / "m.model")
    with pytest.raises(ValueError, match="zipped=False"):
        model.save(tmp_path / "m.keras", zipped=False)
    with pytest.raises(ValueError, match="not supported"):
        model.save(tmp_path / "m.keras", signatures=None)
    assert os.listdir(tmp_path) == []


def test_an_unbuilt_model_is_refused(tmp_path):
    model = keras.Sequential([layers.Dense(3)])
    with pytest.raises(ValueError, match="not yet been built"):
        model.save(tmp_path / "m.keras")


def archive(path, members):
    with zipfile.ZipFile(path, "w") as zf:
        for name, content in members.items():
            zf.writestr(name, content)


@pytest.fixture
def saved(data, tmp_path):
    path = tmp_path / "good.keras"
    trained_mlp(data).save(path)
    with zipfile.ZipFile(path) as zf:
        return {n: zf.read(n) for n in zf.namelist()}


def test_damaged_and_foreign_archives_are_one_line_naming_the_file_and_why(saved, tmp_path):
    bad = tmp_path / "bad.keras"
    bad.write_bytes(b"not a zip at all")
    with pytest.raises(ValueError, match=r"bad\.keras: not a \.keras archive \(the file is not"):
        keras.models.load_model(bad)
    archive(bad, {k: v for k, v in saved.items() if k != "config.json"})
    with pytest.raises(ValueError, match=r"bad\.keras: the archive has no config\.json"):
        keras.models.load_model(bad)
    archive(bad, {k: v for k, v in saved.items() if k != "model.weights.h5"})
    with pytest.raises(ValueError, match=r"bad\.keras: the archive has no model\.weights\.h5"):
        keras.models.load_model(bad)
    archive(bad, dict(saved, **{"config.json": b"{not json"}))
    with pytest.raises(ValueError, match=r"bad\.keras: config\.json is not JSON"):
        keras.models.load_model(bad)
    functional = json.loads(saved["config.json"])
    functional["class_name"] = "MyModel"  # a subclassed model's class
    archive(bad, dict(saved, **{"config.json": json.dumps(functional)}))
    with pytest.raises(ValueError, match=r"bad\.keras: a model of class MyModel is not supp"):
        keras.models.load_model(bad)
    archive(bad, dict(saved, **{"model.weights.h5": b"\x89HDF\r\n\x1a\n" + b"\0" * 64}))
    with pytest.raises(ValueError, match=r"bad\.keras: model\.weights\.h5: .*bad\.keras"):
        keras.models.load_model(bad)
    with pytest.raises(ValueError, match="File not found"):
        keras.models.load_model(tmp_path / "missing.keras")
    with pytest.raises(ValueError, match="File format not supported"):
        keras.models.load_model(tmp_path / "m.safetensors")


def test_weights_of_another_architecture_name_the_layer(saved, tmp_path):
    config = json.loads(saved["config.json"])
    config["config"]["layers"][1]["config"]["units"] = 7  # the first Dense: 8 units in the file
    bad = tmp_path / "other.keras"
    archive(bad, dict(saved, **{"config.json": json.dumps(config)}))
    with pytest.raises(ValueError, match=r"other\.keras: model\.weights\.h5: .*\(6, 8\).*\(6, 7\)"):
        keras.models.load_model(bad)


def test_compile_settings_crossover_lacks_are_an_error_that_names_compile_false(saved, tmp_path):
    config = json.loads(saved["config.json"])
    config["compile_config"]["optimizer"]["class_name"] = "Ftrl"
    path = tmp_path / "ftrl.keras"
    archive(path, dict(saved, **{"config.json": json.dumps(config)}))
    with pytest.raises(ValueError, match=r"ftrl\.keras: the compile settings.*Ftrl.*compile=False"):
        keras.models.load_model(path)
    assert keras.models.load_model(path, compile=False).optimizer is None


def test_keras_saving_names_what_it_lacks():
    with pytest.raises(AttributeError, match="not supported"):
        keras.saving.register_keras_serializable  # noqa: B018
    assert "load_model" in keras.saving.__all__ and "load_model" in keras.models.__all__


# --- ModelCheckpoint to .keras ---------------------------------------------------------------
class Recorder(callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.weights = []

    def on_epoch_end(self, epoch, logs=None):
        self.weights.append(self.model.get_weights())


def test_model_checkpoint_writes_the_archive_each_epoch_with_keras_s_file_names(
    data, tmp_path, capsys
):
    x, y = data
    model = mlp()
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    recorder = Recorder()
    check = callbacks.ModelCheckpoint(
        str(tmp_path / "ck" / "e{epoch:02d}-{val_loss:.2f}.keras"), verbose=1
    )
    history = model.fit(
        x, y, epochs=2, validation_split=0.25, verbose=0, callbacks=[recorder, check]
    )
    names = [f"e{e + 1:02d}-{history.history['val_loss'][e]:.2f}.keras" for e in range(2)]
    assert sorted(os.listdir(tmp_path / "ck")) == names
    for epoch, name in enumerate(names):
        loaded = keras.models.load_model(tmp_path / "ck" / name)
        got = loaded.get_weights()
        assert all(np.array_equal(a, b) for a, b in zip(got, recorder.weights[epoch]))
        assert isinstance(loaded.optimizer, keras.optimizers.Adam)
    out = capsys.readouterr().out
    path = str(tmp_path / "ck" / names[0])
    assert f"\nEpoch 1: saving model to {path}\n" in out
    assert f"\nEpoch 1: finished saving model to {path}\n" in out
    assert "model.weights.h5" not in out  # the library's staging file is not shown


def test_model_checkpoint_save_best_only_keeps_the_best_epoch_s_model(data, tmp_path, capsys):
    x, y = data
    model = mlp()
    model.compile(keras.optimizers.SGD(0.1), "sparse_categorical_crossentropy")
    recorder = Recorder()
    # mode="max" on a falling val_loss: only the first epoch is an improvement.
    check = callbacks.ModelCheckpoint(
        filepath=str(tmp_path / "best.keras"), save_best_only=True, mode="max", verbose=1
    )
    history = model.fit(
        x, y, epochs=3, validation_split=0.25, verbose=0, callbacks=[recorder, check]
    )
    assert history.history["val_loss"][2] < history.history["val_loss"][0]
    assert os.listdir(tmp_path) == ["best.keras"]
    best = keras.models.load_model(tmp_path / "best.keras")
    assert all(np.array_equal(a, b) for a, b in zip(best.get_weights(), recorder.weights[0]))
    out = capsys.readouterr().out
    assert f"saving model to {tmp_path / 'best.keras'}" in out
    assert "Epoch 2: val_loss did not improve from" in out


def test_model_checkpoint_suffixes_follow_keras(tmp_path):
    with pytest.raises(ValueError, match=r"must end in `\.keras`"):
        callbacks.ModelCheckpoint(str(tmp_path / "m.weights.h5"))
    with pytest.raises(ValueError, match=r"save_weights_only=True.*\.weights\.h5"):
        callbacks.ModelCheckpoint(str(tmp_path / "m.keras"), save_weights_only=True)
    check = callbacks.ModelCheckpoint(str(tmp_path / "m.keras"))
    assert check.save_weights_only is False and check.filepath.endswith("m.keras")
