"""crossover.device (tf.device) scopes and crossover.config.list_physical_devices."""

import threading

import numpy as np
import pytest

import crossover as tf
from crossover import _core, _device, keras

GPUS = len(_core.cuda_devices())


def tiny_model() -> keras.Sequential:
    return keras.Sequential([keras.layers.Dense(3, activation="softmax", input_shape=(4,))])


@pytest.mark.parametrize(
    "name,library",
    [
        ("/cpu:0", "cpu"),
        ("/CPU:0", "cpu"),
        ("/device:CPU:0", "cpu"),
        ("cpu", "cpu"),
        ("/gpu:0", "cuda:0"),
        ("/GPU:0", "cuda:0"),
        ("/device:GPU:1", "cuda:1"),
        ("gpu", "cuda:0"),
        ("cuda", "cuda:0"),
        ("cuda:0", "cuda:0"),
        ("cuda:2", "cuda:2"),
    ],
)
def test_tensorflow_and_torch_names_map_to_the_library_devices(name, library):
    assert _device.library_device(name) == library


@pytest.mark.parametrize("name", ["/tpu:0", "gpu0", "/cpu:1", "", "/gpu:x"])
def test_an_unknown_device_name_is_a_value_error(name):
    with pytest.raises(ValueError, match="device"):
        with tf.device(name):
            pass


def test_scopes_nest_and_restore_also_on_an_exception():
    assert _device.current() is None
    with tf.device("/cpu:0"):
        assert _device.current() == "cpu"
        with pytest.raises(RuntimeError):
            with tf.device("cpu"):
                assert _device.current() == "cpu"
                raise RuntimeError("inside")
        assert _device.current() == "cpu"
    assert _device.current() is None


def test_a_scope_is_per_thread_as_in_tensorflow():
    seen = []
    with tf.device("/cpu:0"):
        t = threading.Thread(target=lambda: seen.append(_device.current()))
        t.start()
        t.join()
    assert seen == [None]


@pytest.mark.skipif(GPUS > 0, reason="this machine has a GPU")
def test_a_gpu_scope_without_a_gpu_raises_when_entered_and_does_not_fall_back():
    with pytest.raises(tf.DeviceNotFoundError, match="does not fall back") as e:
        with tf.device("/gpu:0"):
            pytest.fail("entered a GPU scope on a machine without one")
    assert "cuda:0" in str(e.value) and isinstance(e.value, RuntimeError)
    assert _device.current() is None


def test_a_gpu_ordinal_past_the_last_device_raises_when_entered():
    with pytest.raises(tf.DeviceNotFoundError, match=f"cuda:{GPUS}"):
        with tf.device(f"/device:GPU:{GPUS}"):
            pass


def test_a_model_compiled_in_a_cpu_scope_trains_on_the_cpu():
    model = tiny_model()
    with tf.device("/CPU:0"):
        model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    assert model._model().device_name.startswith("cpu")
    model.fit(np.ones((8, 4)), np.zeros(8), verbose=0)


@pytest.mark.skipif(GPUS == 0, reason="no CUDA device here")
def test_a_model_compiled_in_a_gpu_scope_trains_on_the_gpu():
    x, y = np.random.default_rng(0).random((64, 4)), np.arange(64) % 3
    with tf.device("/gpu:0"):
        model = tiny_model()
        model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
        model.fit(x, y, verbose=0)
    assert model._model().device_name.startswith("cuda:0")
    created_there = None
    with tf.device("/gpu:0"):
        created_there = tiny_model()
    created_there.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    assert created_there._model().device_name.startswith("cuda:0")


def test_list_physical_devices_is_like_tensorflows():
    cpus = tf.config.list_physical_devices("CPU")
    assert [(d.name, d.device_type) for d in cpus] == [("/physical_device:CPU:0", "CPU")]
    gpus = tf.config.list_physical_devices("GPU")
    assert [d.name for d in gpus] == [f"/physical_device:GPU:{i}" for i in range(GPUS)]
    assert all(d.device_type == "GPU" for d in gpus)
    assert tf.config.list_physical_devices() == cpus + gpus
    assert tf.config.list_physical_devices("TPU") == []


def test_set_memory_growth_is_accepted_for_a_gpu_only():
    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, True)
    assert tf.config.experimental.list_physical_devices("CPU") == tf.config.list_physical_devices(
        "CPU"
    )
    with pytest.raises(ValueError, match="expected a GPU"):
        tf.config.experimental.set_memory_growth(tf.config.list_physical_devices("CPU")[0], True)


@pytest.mark.skipif(GPUS == 0, reason="no CUDA device here")
def test_fit_in_another_devices_scope_than_compiles_is_a_value_error():
    model = tiny_model()
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")  # on the CPU
    with tf.device("/gpu:0"):
        with pytest.raises(ValueError, match="compiled for cpu.*compile it inside that scope"):
            model.fit(np.ones((8, 4)), np.zeros(8), verbose=0)
        with pytest.raises(ValueError, match="compiled for cpu"):
            model.predict(np.ones((8, 4)), verbose=0)


def test_fit_in_the_scope_of_the_models_own_device_runs():
    model = tiny_model()
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    with tf.device("/cpu:0"):
        model.fit(np.ones((8, 4)), np.zeros(8), verbose=0)
        assert model.predict(np.ones((2, 4)), verbose=0).shape == (2, 3)


def test_a_scope_for_another_device_than_the_compiled_one_is_refused_not_ignored(monkeypatch):
    model = tiny_model()
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")  # on the CPU
    monkeypatch.setattr(_device, "current", lambda: "cuda:0")  # as inside tf.device('/gpu:0')
    with pytest.raises(ValueError, match="compiled for cpu.*compile it inside that scope"):
        model.fit(np.ones((8, 4)), np.zeros(8), verbose=0)
    with pytest.raises(ValueError, match="compiled for cpu"):
        model.evaluate(np.ones((8, 4)), np.zeros(8), verbose=0)
    with pytest.raises(ValueError, match="compiled for cpu"):
        model.predict(np.ones((8, 4)), verbose=0)
    assert len(model.get_weights()) == 2  # the weights stay readable anywhere


@pytest.fixture
def fresh_default(monkeypatch):
    """_device.default() as in a new process: no CROSSOVER_DEVICE, the CPU line not yet said."""
    monkeypatch.delenv("CROSSOVER_DEVICE", raising=False)
    monkeypatch.setattr(_device, "_said_no_gpu", False)


def test_outside_any_scope_a_model_trains_where_tensorflow_would_place_it(fresh_default, capsys):
    # The first GPU where this build and this machine have one; else the CPU, which a build with
    # the CUDA backend says in one line, once per process.
    expected = "cuda:0" if GPUS else "cpu"
    assert _device.default() == expected
    model = tiny_model()
    model.compile(loss="sparse_categorical_crossentropy", optimizer="adam")
    model.fit(np.zeros((4, 4), np.float32), np.zeros(4, np.int32), verbose=0)
    assert model._core.device_name == expected
    assert _device.default() == expected
    lines = [l for l in capsys.readouterr().err.splitlines() if l.startswith("crossover:")]
    if _core.cuda_built() and not GPUS:
        assert len(lines) == 1, lines
        assert "no usable GPU" in lines[0] and "training on the CPU" in lines[0]
        assert _core.cuda_unavailable_reason(0) in lines[0]
    else:
        assert lines == []


@pytest.mark.parametrize("name,library", [("cpu", "cpu"), ("/CPU:0", "cpu")])
def test_crossover_device_chooses_the_default_quietly(
    fresh_default, monkeypatch, capsys, name, library
):
    monkeypatch.setenv("CROSSOVER_DEVICE", name)
    assert _device.default() == library
    assert "crossover:" not in capsys.readouterr().err


def test_crossover_device_is_held_to_what_it_names(fresh_default, monkeypatch):
    monkeypatch.setenv("CROSSOVER_DEVICE", "/tpu:0")
    with pytest.raises(ValueError, match="CROSSOVER_DEVICE: device: unknown device name"):
        _device.default()
    monkeypatch.setenv("CROSSOVER_DEVICE", f"/gpu:{GPUS}")  # one past the last GPU here
    with pytest.raises(tf.DeviceNotFoundError, match=f"CROSSOVER_DEVICE=/gpu:{GPUS}"):
        _device.default()
