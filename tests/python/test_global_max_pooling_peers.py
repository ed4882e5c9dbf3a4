"""GlobalMaxPooling2D against Keras 3.15 itself: Keras builds a small convnet ending in it and saves
its .weights.h5; crossover loads that file into the same model and predicts the same values; both
train it for one epoch (no shuffling, Adam, sparse categorical cross-entropy) to the same loss and
weights; Keras reads crossover's JSON and weights back. Keras runs in a subprocess with the peers'
Python ($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python); without one, skipped with a
message saying so."""

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

KERAS = KERAS_TRAINS_ONE_EPOCH.format(
    layers='keras.Input((7, 6, 2)), layers.Conv2D(5, 3, activation="tanh", padding="same"), '
    'layers.GlobalMaxPooling2D(), layers.Dense(3, activation="softmax")'
)


def convnet() -> keras.Sequential:
    return keras.Sequential(
        [
            keras.Input((7, 6, 2)),
            layers.Conv2D(5, 3, activation="tanh", padding="same"),
            layers.GlobalMaxPooling2D(),
            layers.Dense(3, activation="softmax"),
        ]
    )


def data(tmp_path: Path) -> tuple[np.ndarray, np.ndarray]:
    rs = np.random.RandomState(5)
    x = rs.randn(16, 7, 6, 2).astype(np.float32)
    y = rs.randint(0, 3, size=16).astype(np.int64)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    return x, y


def test_keras_weights_give_keras_values_and_train_as_keras_does(tmp_path: Path) -> None:
    x, y = data(tmp_path)
    theirs = run_keras(KERAS, tmp_path)
    model = convnet()
    predicts_and_trains_as_keras_did(model, tmp_path, x, y, theirs)
    # Keras 3's JSON of the model reads here as the same layers.
    back = keras.models.model_from_json(theirs["json"])
    assert [type(l).__name__ for l in back.layers] == ["Conv2D", "GlobalMaxPooling2D", "Dense"]
    ours = json.loads(model.to_json())["config"]["layers"][2]
    keras_cfg = json.loads(theirs["json"])["config"]["layers"][2]
    assert ours["class_name"] == keras_cfg["class_name"] == "GlobalMaxPooling2D"
    for key in ("data_format", "keepdims"):
        assert ours["config"][key] == keras_cfg["config"][key], key


KERAS_READ = """
    import json
    import numpy as np
    import keras
    model = keras.models.model_from_json(open("model.json").read())
    model.load_weights("ours.weights.h5")
    print(json.dumps({"classes": [type(l).__name__ for l in model.layers],
                      "predicted": model.predict(np.load("x.npy"), verbose=0).tolist()}))
"""


def test_keras_reads_the_json_and_weights_crossover_writes(tmp_path: Path) -> None:
    x, _ = data(tmp_path)
    model = convnet()
    (tmp_path / "model.json").write_text(model.to_json())
    model.save_weights(str(tmp_path / "ours.weights.h5"))
    theirs = run_keras(KERAS_READ, tmp_path)
    assert theirs["classes"] == ["Conv2D", "GlobalMaxPooling2D", "Dense"]
    np.testing.assert_allclose(
        model.predict(x, verbose=0), np.array(theirs["predicted"]), rtol=1e-5, atol=1e-6
    )


def test_keepdims_and_channels_first_are_refused_naming_the_argument() -> None:
    with pytest.raises(ValueError, match="keepdims"):
        layers.GlobalMaxPooling2D(keepdims=True)
    with pytest.raises(ValueError, match="channels_first|data_format"):
        layers.GlobalMaxPooling2D(data_format="channels_first")
    assert layers.GlobalMaxPool2D is layers.GlobalMaxPooling2D
