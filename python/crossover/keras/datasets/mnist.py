"""keras.datasets.mnist: load_data() from a local copy (see keras.datasets)."""

from . import Splits, _load


def load_data(path: str = "mnist.npz") -> Splits:
    """((x_train, y_train), (x_test, y_test)): uint8 (N, 28, 28) images and uint8 (N,) labels.

    As in Keras, `path` is where the file is cached, relative to ~/.keras/datasets/ (or
    $KERAS_HOME/datasets); $CROSSOVER_DATA (a Keras mnist.npz or a folder of the four IDX files)
    comes first, ./data/mnist/ last. Raises DatasetNotFoundError naming every place looked at."""
    return _load(
        "mnist",
        str(path),
        "mnist.load_data",
        "Copy Keras's mnist.npz there (or the four IDX files into ./data/mnist/), or set "
        "CROSSOVER_DATA to such a file or folder.",
    )
