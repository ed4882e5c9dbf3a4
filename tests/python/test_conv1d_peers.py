"""Conv1D and the 1-D poolings against Keras 3.15 itself: Keras builds a model of Conv1D layers (first, strided with
'same' padding, dilated) over (steps, channels) samples and saves its .weights.h5 (each kernel
(kernel_size, in_channels, filters)); crossover loads that file into the same model, predicts the
same values and trains one epoch to the same loss and weights; Keras's JSON reads back as the
same layers. The same for MaxPooling1D, AveragePooling1D and the global 1-D poolings. Keras runs in a subprocess with the peers' Python ($CROSSOVER_PEERS_PYTHON, else
bench/peers/.venv/bin/python); without one, skipped with a message saying so."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import (
    KERAS_TRAINS_ONE_EPOCH,
    predicts_and_trains_as_keras_did,
    run_keras,
)

LAYERS = (
    "keras.Input((12, 3)), layers.Conv1D(4, 3, activation='relu'), "
    "layers.Conv1D(5, 2, strides=2, padding='same'), "
    "layers.Conv1D(3, 3, dilation_rate=2, padding='same', activation='tanh'), "
    "layers.Flatten(), layers.Dense(3, activation='softmax')"
)


def model() -> keras.Sequential:
    return keras.Sequential(
        [
            keras.Input((12, 3)),
            layers.Conv1D(4, 3, activation="relu"),
            layers.Conv1D(5, 2, strides=2, padding="same"),
            layers.Conv1D(3, 3, dilation_rate=2, padding="same", activation="tanh"),
            layers.Flatten(),
            layers.Dense(3, activation="softmax"),
        ]
    )


def test_keras_weights_give_keras_values_and_train_as_keras_does(tmp_path: Path) -> None:
    rs = np.random.RandomState(11)
    x = rs.standard_normal((16, 12, 3)).astype(np.float32)
    y = rs.randint(0, 3, size=16).astype(np.int64)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    theirs = run_keras(KERAS_TRAINS_ONE_EPOCH.format(layers=LAYERS), tmp_path)
    ours = model()
    assert [l.output.shape for l in ours.layers[:3]] == [(None, 10, 4), (None, 5, 5), (None, 5, 3)]
    predicts_and_trains_as_keras_did(ours, tmp_path, x, y, theirs)
    back = keras.models.model_from_json(theirs["json"])
    assert [type(l).__name__ for l in back.layers[:3]] == ["Conv1D"] * 3
    assert back.layers[1].strides == (2,) and back.layers[2].dilation_rate == (2,)


def test_what_keras_refuses_or_crossover_lacks_is_an_error() -> None:
    with pytest.raises(ValueError, match="padding 'causal' is not supported|causal"):
        layers.Conv1D(2, 3, padding="causal")
    with pytest.raises(ValueError, match="kernel_size"):
        layers.Conv1D(2, (3, 3))


POOLING = (
    "keras.Input((12, 3)), layers.Conv1D(4, 3, activation='relu'), layers.MaxPooling1D(2), "
    "layers.AveragePooling1D(3, strides=1, padding='same'), layers.Conv1D(5, 2), "
    "layers.GlobalMaxPooling1D(), layers.Dense(3, activation='softmax')"
)


def test_the_1d_poolings_give_keras_values_and_train_as_keras_does(tmp_path: Path) -> None:
    rs = np.random.RandomState(12)
    x = rs.standard_normal((16, 12, 3)).astype(np.float32)
    y = rs.randint(0, 3, size=16).astype(np.int64)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    theirs = run_keras(KERAS_TRAINS_ONE_EPOCH.format(layers=POOLING), tmp_path)
    ours = keras.Sequential(
        [
            keras.Input((12, 3)),
            layers.Conv1D(4, 3, activation="relu"),
            layers.MaxPooling1D(2),
            layers.AveragePooling1D(3, strides=1, padding="same"),
            layers.Conv1D(5, 2),
            layers.GlobalMaxPooling1D(),
            layers.Dense(3, activation="softmax"),
        ]
    )
    shapes = [l.output.shape for l in ours.layers[:5]]
    assert shapes == [(None, 10, 4), (None, 5, 4), (None, 5, 4), (None, 4, 5), (None, 5)]
    predicts_and_trains_as_keras_did(ours, tmp_path, x, y, theirs)
    back = keras.models.model_from_json(theirs["json"])
    assert [type(l).__name__ for l in back.layers[1:5]] == [
        "MaxPooling1D",
        "AveragePooling1D",
        "Conv1D",
        "GlobalMaxPooling1D",
    ]
    average = keras.Sequential([keras.Input((12, 3)), layers.GlobalAveragePooling1D()])
    np.testing.assert_allclose(average.predict(x, verbose=0), x.mean(axis=1), rtol=1e-6)
