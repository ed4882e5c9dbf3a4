"""save_weights / load_weights (.weights.h5 and .safetensors), to_json and model_from_json,
against files real Keras 3 wrote (tests/data/keras/, made by make.py there)."""

import json
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers

KERAS_DATA = Path(__file__).resolve().parents[1] / "data" / "keras"


def npz_arrays(name: str) -> list[np.ndarray]:
    with np.load(KERAS_DATA / name) as d:
        return [d[f"arr_{i}"] for i in range(len(d.files))]


def tiny_model() -> keras.Sequential:
    """The model of tests/data/keras/tiny*.weights.h5, as built in make.py."""
    return keras.Sequential(
        [
            keras.Input((2, 3)),
            layers.Flatten(),
            layers.Dense(5, activation="relu"),
            layers.Dropout(0.25),
            layers.Dense(4, use_bias=False),
            layers.Dense(3),
            layers.Activation("softmax"),
        ],
        name="tiny",
    )


def assert_same_weights(got: list[np.ndarray], want: list[np.ndarray]) -> None:
    assert [w.shape for w in got] == [w.shape for w in want]
    for g, w in zip(got, want):
        assert g.dtype == np.float32
        assert np.array_equal(g, w)  # bit for bit, not approximately


# --- reading what Keras wrote -------------------------------------------------------------------


def test_load_weights_reads_a_keras_written_file_exactly():
    model = tiny_model()
    model.load_weights(KERAS_DATA / "tiny.weights.h5")
    assert_same_weights(model.get_weights(), npz_arrays("tiny_weights.npz"))


def test_load_weights_ignores_the_optimizer_state_keras_saved():
    model = tiny_model()
    model.load_weights(str(KERAS_DATA / "tiny_trained.weights.h5"))
    assert_same_weights(model.get_weights(), npz_arrays("tiny_trained_weights.npz"))


def test_load_weights_after_compile_keeps_the_loaded_weights_for_training():
    model = tiny_model()
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    model.load_weights(KERAS_DATA / "tiny.weights.h5")
    assert_same_weights(model.get_weights(), npz_arrays("tiny_weights.npz"))
    x = np.ones((4, 2, 3), np.float32)
    assert model.predict(x).shape == (4, 3)


def test_model_from_keras_json_then_keras_weights_predicts_like_the_arrays():
    model = keras.models.model_from_json((KERAS_DATA / "tiny_keras3.json").read_text())
    model.load_weights(KERAS_DATA / "tiny.weights.h5")
    k0, b0, k1, k2, b2 = npz_arrays("tiny_weights.npz")
    x = np.random.default_rng(3).standard_normal((6, 2, 3)).astype(np.float32)
    h = np.maximum(x.reshape(6, 6) @ k0 + b0, 0) @ k1 @ k2 + b2
    want = np.exp(h - h.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(model.predict(x), want, rtol=1e-5, atol=1e-6)


# --- writing ------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".weights.h5", ".safetensors"])
def test_save_then_load_gives_the_weights_back_bit_for_bit(tmp_path, suffix):
    source = tiny_model()
    source.set_weights(npz_arrays("tiny_weights.npz"))
    path = tmp_path / f"model{suffix}"
    source.save_weights(path)
    target = tiny_model()
    target.load_weights(path)
    assert_same_weights(target.get_weights(), source.get_weights())


def test_a_saved_weights_h5_is_an_hdf5_file_like_keras_writes(tmp_path):
    model = tiny_model()
    model.save_weights(tmp_path / "m.weights.h5")
    ours = (tmp_path / "m.weights.h5").read_bytes()
    keras_file = (KERAS_DATA / "tiny.weights.h5").read_bytes()
    assert ours[:8] == keras_file[:8] == b"\x89HDF\r\n\x1a\n"
    assert ours[8] == keras_file[8] == 0  # superblock version 0, as h5py writes by default


def test_save_weights_replaces_a_file_without_truncating_it_first(tmp_path):
    path = tmp_path / "m.weights.h5"
    model = tiny_model()
    model.save_weights(path)
    old = path.read_bytes()
    model.set_weights([w + 1 for w in model.get_weights()])
    with open(path, "rb") as before:  # the old file, opened before the new one is written
        model.save_weights(path)
        assert before.read() == old  # it was replaced by a rename, never rewritten in place
    assert path.read_bytes() != old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.weights.h5"]  # no temporary left


def test_save_weights_with_overwrite_false_keeps_an_existing_file(tmp_path):
    path = tmp_path / "m.weights.h5"
    path.write_bytes(b"keep me")
    with pytest.raises(ValueError, match="overwrite=False"):
        tiny_model().save_weights(path, overwrite=False)
    assert path.read_bytes() == b"keep me"


def test_save_weights_of_a_model_without_input_shape_is_refused(tmp_path):
    model = keras.Sequential([layers.Dense(3)])
    with pytest.raises(ValueError, match="not yet been built"):
        model.save_weights(tmp_path / "m.weights.h5")


# --- refused ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, what",
    [("model.keras", "a .keras archive"), ("model.h5", "legacy Keras 2"), ("w.hdf5", "legacy")],
)
def test_other_keras_formats_are_refused_in_one_line_saying_what_is_supported(tmp_path, name, what):
    path = tmp_path / name
    path.write_bytes(b"PK\x03\x04 not read anyway")
    for call in (tiny_model().save_weights, tiny_model().load_weights):
        with pytest.raises(ValueError) as e:
            call(path)
        message = str(e.value)
        assert what in message and ".safetensors or Keras 3's .weights.h5" in message
        assert "\n" not in message
    assert path.read_bytes() == b"PK\x03\x04 not read anyway"


def test_loading_into_a_dense_of_another_size_names_the_layer_and_both_shapes():
    model = keras.Sequential(
        [
            keras.Input((2, 3)),
            layers.Flatten(),
            layers.Dense(5, activation="relu"),
            layers.Dropout(0.25),
            layers.Dense(7, use_bias=False),  # 4 in the file
            layers.Dense(3),
            layers.Activation("softmax"),
        ]
    )
    with pytest.raises(ValueError) as e:
        model.load_weights(KERAS_DATA / "tiny.weights.h5")
    message = str(e.value)
    assert "dense_1" in message and "(Dense" in message
    assert "(5, 4) in the file but (5, 7) in the model" in message


def test_loading_into_a_model_with_fewer_layers_names_the_extra_group():
    model = keras.Sequential(
        [keras.Input((2, 3)), layers.Flatten(), layers.Dense(5), layers.Dense(4, use_bias=False)]
    )
    with pytest.raises(ValueError, match="layers/dense_2, which the model does not have"):
        model.load_weights(KERAS_DATA / "tiny.weights.h5")


def test_loading_into_a_model_with_more_layers_names_the_missing_one():
    model = tiny_model()
    model.add(layers.Dense(2))
    with pytest.raises(ValueError, match=r"layer 7 'dense_3' \(Dense, group layers/dense_3\) is "):
        model.load_weights(KERAS_DATA / "tiny.weights.h5")


def test_a_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        tiny_model().load_weights(tmp_path / "none.weights.h5")


def hostile_variants(original: bytes):
    """Truncations, overwritten bytes and garbage, deterministically."""
    rng = np.random.default_rng(5)
    for n in (0, 7, 8, 48, 96, 512, 2048, len(original) // 2, len(original) - 1):
        yield original[:n]
    yield rng.integers(0, 256, 4096, dtype=np.uint8).tobytes()
    yield original[:8] + rng.integers(0, 256, 4096, dtype=np.uint8).tobytes()
    for _ in range(200):
        b = bytearray(original)
        for at in rng.integers(0, len(b), 8):
            b[at] = int(rng.integers(0, 256))
        yield bytes(b)


def test_hostile_files_are_refused_with_a_value_error_never_a_crash(tmp_path):
    original = (KERAS_DATA / "tiny.weights.h5").read_bytes()
    path = tmp_path / "hostile.weights.h5"
    refused = 0
    for data in hostile_variants(original):
        path.write_bytes(data)
        model = tiny_model()
        try:
            model.load_weights(path)
        except ValueError as e:
            assert str(e).startswith(str(path))  # crossover::Error names the file
            refused += 1
    assert refused >= 11  # at least every truncation and the garbage


def test_a_file_that_crashes_libhdf5_is_a_value_error_and_the_process_lives_on():
    # Found by fuzz/fuzz_keras_h5.cpp: libhdf5 1.10.8 reads out of bounds (SIGSEGV) on it.
    model = tiny_model()
    with pytest.raises(ValueError, match="libhdf5 crashed reading it"):
        model.load_weights(KERAS_DATA / "libhdf5_crash.weights.h5")
    model.load_weights(KERAS_DATA / "tiny.weights.h5")  # the model and libhdf5 still work
    assert_same_weights(model.get_weights(), npz_arrays("tiny_weights.npz"))


def test_a_legacy_keras2_file_renamed_to_weights_h5_is_refused_naming_it(tmp_path):
    path = tmp_path / "renamed.weights.h5"
    path.write_bytes((KERAS_DATA / "tiny_keras2_legacy.h5").read_bytes())
    with pytest.raises(ValueError, match="a legacy Keras 2 weights file"):
        tiny_model().load_weights(path)


def test_a_file_that_is_not_hdf5_is_refused_naming_it(tmp_path):
    path = tmp_path / "zip.weights.h5"
    path.write_bytes((KERAS_DATA / "tiny_weights.npz").read_bytes())
    with pytest.raises(ValueError, match="not an HDF5 file"):
        tiny_model().load_weights(path)


# --- JSON ---------------------------------------------------------------------------------------


def test_model_from_json_reads_what_keras_3_wrote():
    model = keras.models.model_from_json((KERAS_DATA / "small_real_keras3.json").read_text())
    assert [type(l).__name__ for l in model.layers] == ["Flatten", "Dense", "Dropout", "Dense"]
    assert model.count_params() == 101770


def test_to_json_writes_keras_3s_layout_for_each_layer():
    theirs = json.loads((KERAS_DATA / "tiny_keras3.json").read_text())
    ours = json.loads(keras.models.model_from_json(json.dumps(theirs)).to_json())
    for key in ("module", "class_name"):
        assert ours[key] == theirs[key]
    assert ours["build_config"] == theirs["build_config"]
    assert ours["config"]["name"] == theirs["config"]["name"] == "tiny"
    assert len(ours["config"]["layers"]) == len(theirs["config"]["layers"])
    for o, t in zip(ours["config"]["layers"], theirs["config"]["layers"]):
        assert (o["module"], o["class_name"]) == (t["module"], t["class_name"])
        for field in ("name", "units", "activation", "use_bias", "rate", "batch_shape"):
            assert o["config"].get(field) == t["config"].get(field), (t["class_name"], field)
        assert o.get("build_config") == t.get("build_config")


def test_to_json_round_trips_through_model_from_json():
    model = tiny_model()
    again = keras.models.model_from_json(model.to_json())
    assert again.to_json() == model.to_json()
    assert json.loads(model.to_json(indent=2)) == json.loads(model.to_json())


def test_model_from_json_names_an_unsupported_layer_class():
    text = (KERAS_DATA / "cnn_keras3.json").read_text().replace('"Conv2D"', '"Conv3D"', 1)
    with pytest.raises(ValueError, match="Conv3D"):
        keras.models.model_from_json(text)


def test_model_from_json_reads_a_keras3_convnet():
    model = keras.models.model_from_json((KERAS_DATA / "cnn_keras3.json").read_text())
    assert [type(layer).__name__ for layer in model.layers][:2] == ["Conv2D", "Flatten"]


def test_model_from_json_reads_a_keras_functional_model():
    model = keras.models.model_from_json((KERAS_DATA / "functional_keras3.json").read_text())
    assert type(model).__name__ == "Functional"
    assert [type(l).__name__ for l in model.layers] == ["InputLayer", "Dense"]
    assert model.count_params() == 7850


def test_to_json_has_a_compile_config_only_once_the_user_compiled():
    model = tiny_model()
    model.predict(np.zeros((1, 2, 3), np.float32))  # weights exist, the user has not compiled
    assert "compile_config" not in json.loads(model.to_json())
    model.compile(optimizer="sgd", loss="mean_squared_error")
    assert json.loads(model.to_json())["compile_config"]["loss"] == "mean_squared_error"


def test_to_json_uses_keras_separators():
    assert tiny_model().to_json().startswith('{"module": "keras", "class_name": "Sequential"')
