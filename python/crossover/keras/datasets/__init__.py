"""keras.datasets: MNIST and Fashion-MNIST from a copy on this machine (crossover downloads nothing).

The places looked at are the library's (data::find_keras_dataset, the CLI's discovery): Keras's own
cache (~/.keras/datasets, or $KERAS_HOME/datasets), $CROSSOVER_DATA, ./data/mnist/ and Debian's
dataset-fashion-mnist. See docs/PYTHON.md."""

from typing import Any

import numpy as np

from ... import _core
from ..._args import unsupported_attribute


class DatasetNotFoundError(FileNotFoundError):
    """No copy of the data set on this machine; the message lists every place looked at.

    A FileNotFoundError (so an OSError), where Keras raises when its download fails."""


Splits = tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def _load(kind: str, file: str, who: str, put_it: str) -> Splits:
    found, looked = _core.find_keras_dataset(kind, file)
    if found is None:
        raise DatasetNotFoundError(
            f"{who}: no copy found on this machine, and crossover downloads nothing: looked at "
            f"{', '.join(looked)}. {put_it}"
        )
    return found["train"], found["test"]


from . import fashion_mnist, mnist  # noqa: E402  (they use _load)


def __getattr__(name: str) -> Any:
    raise unsupported_attribute("keras.datasets", name, "mnist and fashion_mnist")


__all__ = ["mnist", "fashion_mnist", "DatasetNotFoundError"]
