"""A model whose output is an image (a convolutional autoencoder, the functional API as keras.io
writes it) against Keras 3.15 itself: from the same Keras-written .weights.h5, the same
predictions of shape (N, H, W, C), then a few training steps with binary cross-entropy and with
mean squared error (targets of the output's shape, and without its last axis of 1, which Keras
expands), validation data and evaluate, to the same losses and metrics. Keras runs in a
subprocess with the peers' Python ($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python);
without one, skipped with a message saying so."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import run_keras

KERAS = """
    import json
    import numpy as np
    import keras
    from keras import layers
    keras.utils.set_random_seed(1)
    x, y = np.load("x.npy"), np.load("y.npy")
    def autoencoder():
        inputs = keras.Input((8, 8, 1))
        h = layers.Conv2D(4, 3, activation="relu", padding="same")(inputs)
        h = layers.MaxPooling2D(2, padding="same")(h)
        h = layers.Conv2D(4, 3, activation="relu", padding="same")(h)
        h = layers.UpSampling2D(2)(h)
        outputs = layers.Conv2D(1, 3, activation="sigmoid", padding="same")(h)
        return keras.Model(inputs, outputs)
    model = autoencoder()
    model.save_weights("keras.weights.h5")
    out = {"predicted": model.predict(x, verbose=0).tolist()}
    for loss, targets in (("binary_crossentropy", y), ("mean_squared_error", y[..., 0])):
        model.load_weights("keras.weights.h5")
        model.compile(optimizer=keras.optimizers.Adam(0.01), loss=loss, metrics=["mae"])
        h = model.fit(x, targets, epochs=2, batch_size=4, shuffle=False, verbose=0,
                      validation_data=(x[:6], targets[:6])).history
        out[loss] = {"history": h, "evaluate": model.evaluate(x, targets, verbose=0)}
    print(json.dumps(out))
"""


def autoencoder() -> keras.Model:
    inputs = keras.Input((8, 8, 1))
    h = layers.Conv2D(4, 3, activation="relu", padding="same")(inputs)
    h = layers.MaxPooling2D(2, padding="same")(h)
    h = layers.Conv2D(4, 3, activation="relu", padding="same")(h)
    h = layers.UpSampling2D(2)(h)
    outputs = layers.Conv2D(1, 3, activation="sigmoid", padding="same")(h)
    return keras.Model(inputs, outputs)


def test_an_image_output_predicts_and_trains_as_keras(tmp_path: Path) -> None:
    rs = np.random.RandomState(5)
    x = rs.rand(12, 8, 8, 1).astype(np.float32)
    y = rs.rand(12, 8, 8, 1).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    theirs = run_keras(KERAS, tmp_path)
    model = autoencoder()
    model.load_weights(str(tmp_path / "keras.weights.h5"))
    mine = model.predict(x, verbose=0)
    assert mine.shape == (12, 8, 8, 1)
    np.testing.assert_allclose(mine, np.array(theirs["predicted"]), atol=1e-5)
    for loss, targets in (("binary_crossentropy", y), ("mean_squared_error", y[..., 0])):
        model.load_weights(str(tmp_path / "keras.weights.h5"))
        model.compile(optimizer=keras.optimizers.Adam(0.01), loss=loss, metrics=["mae"])
        h = model.fit(
            x,
            targets,
            epochs=2,
            batch_size=4,
            shuffle=False,
            verbose=0,
            validation_data=(x[:6], targets[:6]),
        ).history
        want = theirs[loss]
        for key in ("loss", "mae", "val_loss", "val_mae"):
            np.testing.assert_allclose(h[key], want["history"][key], atol=1e-4, err_msg=key)
        got = model.evaluate(x, targets, verbose=0)
        np.testing.assert_allclose(got, want["evaluate"], atol=1e-4, err_msg=loss)
