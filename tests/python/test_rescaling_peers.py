"""Rescaling against Keras 3.15 itself: Keras builds a small model with Rescaling first and in the
middle and saves its .weights.h5; crossover loads that file into the same model and predicts the
same values; both train it for one epoch (no shuffling, Adam, sparse categorical cross-entropy) to
the same loss and weights; each reads the other's JSON. Keras runs in a subprocess with the
peers' Python ($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python); without one, skipped
with a message saying so."""

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
    layers='keras.Input((6,)), layers.Rescaling(1.0 / 255, offset=-0.5), '
    'layers.Dense(5, activation="tanh"), layers.Rescaling(2.5), '
    'layers.Dense(3, activation="softmax")'
)


def model() -> keras.Sequential:
    return keras.Sequential(
        [
            keras.Input((6,)),
            layers.Rescaling(1.0 / 255, offset=-0.5),
            layers.Dense(5, activation="tanh"),
            layers.Rescaling(2.5),
            layers.Dense(3, activation="softmax"),
        ]
    )


def data(tmp_path: Path) -> tuple[np.ndarray, np.ndarray]:
    rs = np.random.RandomState(5)
    x = rs.randint(0, 256, size=(16, 6)).astype(np.float32)  # pixels, as Rescaling gets them
    y = rs.randint(0, 3, size=16).astype(np.int64)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    return x, y


def test_keras_weights_give_keras_values_and_train_as_keras_does(tmp_path: Path) -> None:
    x, y = data(tmp_path)
    theirs = run_keras(KERAS, tmp_path)
    ours = model()
    predicts_and_trains_as_keras_did(ours, tmp_path, x, y, theirs)
    # Keras 3's JSON reads here as the same layers, and each Rescaling config is Keras's.
    back = keras.models.model_from_json(theirs["json"])
    assert [type(l).__name__ for l in back.layers] == ["Rescaling", "Dense", "Rescaling", "Dense"]
    assert back.layers[0].scale == 1.0 / 255 and back.layers[0].offset == -0.5
    for i in (1, 3):
        mine_cfg = json.loads(ours.to_json())["config"]["layers"][i]["config"]
        keras_cfg = json.loads(theirs["json"])["config"]["layers"][i]["config"]
        for key in ("scale", "offset"):
            assert mine_cfg[key] == keras_cfg[key], (i, key)


KERAS_READ = """
    import json
    import numpy as np
    import keras
    model = keras.models.model_from_json(open("model.json").read())
    model.load_weights("ours.weights.h5")
    print(json.dumps({"classes": [type(l).__name__ for l in model.layers],
                      "scale": model.layers[0].scale,
                      "predicted": model.predict(np.load("x.npy"), verbose=0).tolist()}))
"""


def test_keras_reads_the_json_and_weights_crossover_writes(tmp_path: Path) -> None:
    x, _ = data(tmp_path)
    ours = model()
    (tmp_path / "model.json").write_text(ours.to_json())
    ours.save_weights(str(tmp_path / "ours.weights.h5"))
    theirs = run_keras(KERAS_READ, tmp_path)
    assert theirs["classes"] == ["Rescaling", "Dense", "Rescaling", "Dense"]
    assert theirs["scale"] == 1.0 / 255
    np.testing.assert_allclose(
        ours.predict(x, verbose=0), np.array(theirs["predicted"]), rtol=1e-5, atol=1e-6
    )


def test_a_per_channel_scale_is_refused_and_bad_numbers_name_the_argument() -> None:
    with pytest.raises(ValueError, match=r"Rescaling: argument scale: an array \(per channel\)"):
        layers.Rescaling([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="Rescaling: argument scale"):
        layers.Rescaling(float("nan"))
