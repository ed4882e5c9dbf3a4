"""keras.datasets.fashion_mnist: load_data() from a local copy (see keras.datasets)."""

from . import Splits, _load


def load_data() -> Splits:
    """((x_train, y_train), (x_test, y_test)): uint8 (N, 28, 28) images and uint8 (N,) labels.

    Looks at $CROSSOVER_DATA (when its name says fashion), Keras's cache
    ~/.keras/datasets/fashion-mnist/ (the four IDX .gz files) and Debian's
    /usr/share/datasets/fashion-mnist. Raises DatasetNotFoundError naming every place looked at."""
    return _load(
        "fashion-mnist",
        "",
        "fashion_mnist.load_data",
        "Install Debian's dataset-fashion-mnist, or copy the four IDX .gz files into "
        "~/.keras/datasets/fashion-mnist/.",
    )
