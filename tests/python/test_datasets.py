"""keras.datasets.mnist / fashion_mnist: Keras's shapes and dtypes from a local copy, found where
the CLI looks; never the real HOME (every test runs with a temporary one)."""

import gzip
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

import crossover as tf
from crossover import keras

MNIST_10K = Path(__file__).resolve().parents[2] / "data" / "mnist-10k" / "mnist-10k.npz"


@pytest.fixture
def home(tmp_path, monkeypatch):
    """An empty HOME, no $CROSSOVER_DATA or $KERAS_HOME, and a working folder without data/."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("CROSSOVER_DATA", raising=False)
    monkeypatch.delenv("KERAS_HOME", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return home


@pytest.fixture(scope="module")
def expected():
    with np.load(MNIST_10K) as d:
        return {k: d[k] for k in ("x_train", "y_train", "x_test", "y_test")}


def keras_cache(home: Path) -> Path:
    folder = home / ".keras" / "datasets"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def assert_keras_splits(result, expected):
    (x_train, y_train), (x_test, y_test) = result
    assert x_train.dtype == y_train.dtype == x_test.dtype == y_test.dtype == np.uint8
    assert x_train.shape == (8000, 28, 28) and y_train.shape == (8000,)
    assert x_test.shape == (2000, 28, 28) and y_test.shape == (2000,)
    np.testing.assert_array_equal(x_train, expected["x_train"])
    np.testing.assert_array_equal(y_train, expected["y_train"])
    np.testing.assert_array_equal(x_test, expected["x_test"])
    np.testing.assert_array_equal(y_test, expected["y_test"])


def write_idx_folder(folder: Path, d) -> None:
    """Keras's fashion-mnist cache: the four gzip IDX files (test data, written by hand)."""
    folder.mkdir(parents=True, exist_ok=True)
    for prefix, x, y in (("train", d["x_train"], d["y_train"]), ("t10k", d["x_test"], d["y_test"])):
        with gzip.open(folder / f"{prefix}-images-idx3-ubyte.gz", "wb") as f:
            f.write(struct.pack(">I3I", 0x803, *x.shape) + x.tobytes())
        with gzip.open(folder / f"{prefix}-labels-idx1-ubyte.gz", "wb") as f:
            f.write(struct.pack(">II", 0x801, len(y)) + y.tobytes())


def test_mnist_loads_keras_cache_file_with_keras_shapes_and_dtypes(home, expected):
    shutil.copy(MNIST_10K, keras_cache(home) / "mnist.npz")
    assert_keras_splits(keras.datasets.mnist.load_data(), expected)


def test_tf_keras_datasets_is_the_same_module():
    assert tf.keras.datasets.mnist is keras.datasets.mnist
    assert tf.keras.datasets.fashion_mnist.load_data is keras.datasets.fashion_mnist.load_data


def test_mnist_path_is_relative_to_the_keras_cache_as_in_keras(home, expected):
    (keras_cache(home) / "digits").mkdir()
    shutil.copy(MNIST_10K, keras_cache(home) / "digits" / "ten.npz")
    assert_keras_splits(keras.datasets.mnist.load_data(path="digits/ten.npz"), expected)
    with pytest.raises(keras.datasets.DatasetNotFoundError):
        keras.datasets.mnist.load_data()  # nothing at the default mnist.npz


def test_mnist_takes_an_absolute_path_as_is(home, tmp_path, expected):
    shutil.copy(MNIST_10K, tmp_path / "elsewhere.npz")
    assert_keras_splits(keras.datasets.mnist.load_data(str(tmp_path / "elsewhere.npz")), expected)


def test_keras_home_replaces_the_home_cache(home, tmp_path, monkeypatch, expected):
    (tmp_path / "kh" / "datasets").mkdir(parents=True)
    shutil.copy(MNIST_10K, tmp_path / "kh" / "datasets" / "mnist.npz")
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "kh"))
    assert_keras_splits(keras.datasets.mnist.load_data(), expected)


def test_crossover_data_comes_first(home, tmp_path, monkeypatch, expected):
    (keras_cache(home) / "mnist.npz").write_bytes(b"not a zip file")  # would fail if read
    monkeypatch.setenv("CROSSOVER_DATA", str(MNIST_10K))
    assert_keras_splits(keras.datasets.mnist.load_data(), expected)


def test_crossover_data_named_fashion_is_not_taken_for_digits(home, tmp_path, monkeypatch):
    shutil.copy(MNIST_10K, tmp_path / "fashion.npz")
    monkeypatch.setenv("CROSSOVER_DATA", str(tmp_path / "fashion.npz"))
    with pytest.raises(keras.datasets.DatasetNotFoundError, match="skipped: Fashion-MNIST"):
        keras.datasets.mnist.load_data()


def test_nothing_found_names_every_place_and_downloads_nothing(home):
    with pytest.raises(keras.datasets.DatasetNotFoundError) as e:
        keras.datasets.mnist.load_data()
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, OSError)
    message = str(e.value)
    assert "$CROSSOVER_DATA" in message
    assert str(home / ".keras" / "datasets" / "mnist.npz") in message
    assert "./data/mnist/" in message
    assert "downloads nothing" in message


def test_a_file_that_is_not_an_npz_is_the_library_error(home):
    (keras_cache(home) / "mnist.npz").write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match="mnist.npz"):
        keras.datasets.mnist.load_data()


def test_fashion_mnist_loads_keras_cache_folder(home, expected):
    write_idx_folder(keras_cache(home) / "fashion-mnist", expected)
    assert_keras_splits(keras.datasets.fashion_mnist.load_data(), expected)


def test_fashion_mnist_does_not_take_digits_from_crossover_data(home, monkeypatch, expected):
    write_idx_folder(keras_cache(home) / "fashion-mnist", expected)
    monkeypatch.setenv("CROSSOVER_DATA", str(MNIST_10K))  # digits: skipped, listed
    assert_keras_splits(keras.datasets.fashion_mnist.load_data(), expected)


DEBIAN_FASHION = Path("/usr/share/datasets/fashion-mnist")


def test_fashion_mnist_falls_back_to_debians_package_or_says_where_it_looked(home):
    if DEBIAN_FASHION.is_dir():
        (x_train, y_train), (x_test, y_test) = keras.datasets.fashion_mnist.load_data()
        assert x_train.shape == (60000, 28, 28) and x_train.dtype == np.uint8
        assert y_train.shape == (60000,) and x_test.shape == (10000, 28, 28)
        assert y_test.shape == (10000,) and y_test.max() == 9
    else:
        with pytest.raises(keras.datasets.DatasetNotFoundError, match=str(DEBIAN_FASHION)):
            keras.datasets.fashion_mnist.load_data()


def test_other_datasets_say_they_are_not_supported():
    with pytest.raises(AttributeError, match="cifar10 is not supported"):
        keras.datasets.cifar10


def test_the_loaded_arrays_own_their_memory(home):
    shutil.copy(MNIST_10K, keras_cache(home) / "mnist.npz")
    (x_train, _), _ = keras.datasets.mnist.load_data()
    x_train[0, 0, 0] = 7  # writable, and alive after the loader returned
    assert x_train[0, 0, 0] == 7
