"""keras.preprocessing, as tf.keras serves it: `image`, Keras 3.15's legacy ImageDataGenerator,
its iterators and the image augmentation functions (preprocessing/image.py). `sequence`, `text`
and the *_dataset_from_* functions are not supported (yet)."""

from typing import Any

from ..._args import unsupported_attribute
from . import image


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "keras.preprocessing", name, "image (ImageDataGenerator and the augmentation functions)"
    )


__all__ = ["image"]
