"""A model whose output is an image: predict gives (N, H, W, C), fit and evaluate take targets of
that shape (or without its last axis of 1), and refuse in one line what they cannot compute.
(Against Keras itself: test_image_output_peers.py.)"""

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers


def autoencoder() -> keras.Model:
    inputs = keras.Input((4, 4, 1))
    h = layers.Conv2D(2, 3, activation="relu", padding="same")(inputs)
    h = layers.MaxPooling2D(2)(h)
    h = layers.UpSampling2D(2)(h)
    outputs = layers.Conv2D(1, 3, activation="sigmoid", padding="same")(h)
    return keras.Model(inputs, outputs)


def test_predict_fit_and_evaluate_take_images() -> None:
    x = np.random.RandomState(0).rand(8, 4, 4, 1).astype(np.float32)
    model = autoencoder()
    model.compile(optimizer="adam", loss="binary_crossentropy")
    assert model.predict(x, verbose=0).shape == (8, 4, 4, 1)
    assert model(x).shape == (8, 4, 4, 1)
    h = model.fit(x, x, epochs=1, batch_size=4, validation_data=(x, x), verbose=0).history
    assert set(h) == {"loss", "val_loss"}
    assert model.evaluate(x, x[..., 0], verbose=0) == pytest.approx(model.evaluate(x, x, verbose=0))
    with pytest.raises(ValueError, match=r"y must have shape \(8, 4, 4, 1\) for binary_cross"):
        model.fit(x, x.reshape(8, 16), verbose=0)


def test_the_losses_that_read_classes_per_position_are_refused() -> None:
    model = autoencoder()
    x = np.zeros((2, 4, 4, 1), np.float32)
    model.predict(x, verbose=0)
    with pytest.raises(ValueError, match="sparse_categorical_crossentropy on an output of shape"):
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
