"""ZeroPadding2D and Cropping2D (and their 1D siblings) against Keras 3.15 itself: Keras builds a
small model with them and saves its .weights.h5, crossover loads it into the same model and predicts the same values;
both train it for one epoch (no shuffling, Adam) to the same loss and weights; and each side's
model JSON has the same layer configs. Keras runs in a subprocess with the peers' Python
(test_keras_archive_peers.run_keras); without one, skipped with a message saying so."""

import json
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

LAYERS = """keras.Input((7, 6, 2)),
             layers.ZeroPadding2D(((1, 2), (0, 3))),
             layers.Conv2D(4, 3, activation="tanh"),
             layers.Cropping2D(((2, 0), (1, 2))),
             layers.ZeroPadding2D(1),
             layers.Conv2D(3, 2, activation="relu"),
             layers.Cropping2D(1),
             layers.Flatten(),
             layers.Dense(5, activation="softmax")"""

# ZeroPadding1D and Cropping1D on (steps, features) samples, around weights (Dense on flat
# samples, reshaped back into steps).
LAYERS_1D = """keras.Input((9, 4)),
                layers.ZeroPadding1D((1, 2)),
                layers.Cropping1D((2, 0)),
                layers.ZeroPadding1D(1),
                layers.Flatten(),
                layers.Dense(8, activation="tanh"),
                layers.Reshape((4, 2)),
                layers.Cropping1D(1),
                layers.ZeroPadding1D((0, 3)),
                layers.Flatten(),
                layers.Dense(5, activation="softmax")"""


@pytest.mark.parametrize(
    "stack,sample,classes",
    [
        (LAYERS, (7, 6, 2), ("ZeroPadding2D", "Cropping2D")),
        (LAYERS_1D, (9, 4), ("ZeroPadding1D", "Cropping1D")),
    ],
    ids=["2d", "1d"],
)
def test_keras_weights_give_keras_values_and_train_as_keras_does(
    tmp_path: Path, stack: str, sample: tuple, classes: tuple
) -> None:
    rs = np.random.RandomState(5)
    x = rs.rand(12, *sample).astype(np.float32)
    y = rs.randint(0, 5, 12)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    theirs = run_keras(KERAS_TRAINS_ONE_EPOCH.format(layers=stack), tmp_path)
    model = keras.Sequential(eval(f"[{stack}]", {"keras": keras, "layers": layers}))
    predicts_and_trains_as_keras_did(model, tmp_path, x, y, theirs)

    def configs(text: str, cls: str) -> list:
        layer_list = json.loads(text)["config"]["layers"]
        fields = ("padding", "cropping", "data_format")
        return [
            {k: v for k, v in entry["config"].items() if k in fields}
            for entry in layer_list
            if entry["class_name"] == cls
        ]

    for cls in classes:
        assert configs(model.to_json(), cls) == configs(theirs["json"], cls)
    # Keras's JSON read here gives the same model.
    again = keras.models.model_from_json(theirs["json"])
    again.set_weights(model.get_weights())
    np.testing.assert_allclose(again.predict(x, verbose=0), model.predict(x, verbose=0))
