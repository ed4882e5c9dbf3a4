"""Permute and RepeatVector against Keras 3.15 itself: Keras builds a small model with both and
saves its .weights.h5, crossover loads it into the same model and predicts the same values; both
train it for one epoch (no shuffling, Adam) to the same loss and weights; each side's model JSON
has the same layer configs, and each layer's get_config() is Keras's. Keras runs in a subprocess
with the peers' Python (test_keras_archive_peers.run_keras); without one, skipped with a message
saying so."""

import json
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import run_keras

LAYERS = """[keras.Input((6, 4, 3)),
             layers.Permute((2, 3, 1)),
             layers.Conv2D(3, 2, activation="tanh"),
             layers.Permute((3, 1, 2)),
             layers.Flatten(),
             layers.Dense(5, activation="tanh"),
             layers.RepeatVector(3),
             layers.Permute((2, 1)),
             layers.Flatten(),
             layers.Dense(4, activation="softmax")]"""

KERAS = """
    import json
    import numpy as np
    import keras
    from keras import layers
    keras.utils.set_random_seed(1)
    x, y = np.load("x.npy"), np.load("y.npy")
    model = keras.Sequential({layers})
    model.save_weights("keras.weights.h5")
    predicted = model.predict(x, verbose=0)
    configs = [l.get_config() for l in model.layers
               if type(l).__name__ in ("Permute", "RepeatVector")]
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    h = model.fit(x, y, epochs=1, batch_size=4, shuffle=False, verbose=0).history
    print(json.dumps({{"predicted": predicted.tolist(), "loss": h["loss"][0],
                      "weights": [w.tolist() for w in model.get_weights()],
                      "configs": configs, "json": model.to_json()}}))
"""


def test_keras_weights_give_keras_values_and_train_as_keras_does(tmp_path: Path) -> None:
    rs = np.random.RandomState(5)
    x = rs.rand(12, 6, 4, 3).astype(np.float32)
    y = rs.randint(0, 4, 12)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    theirs = run_keras(KERAS.format(layers=LAYERS), tmp_path)
    model = keras.Sequential(eval(LAYERS, {"keras": keras, "layers": layers}))
    model.load_weights(str(tmp_path / "keras.weights.h5"))
    np.testing.assert_allclose(
        model.predict(x, verbose=0), np.array(theirs["predicted"]), rtol=1e-5, atol=1e-6
    )
    ours_configs = [
        json.loads(json.dumps(layer.get_config()))
        for layer in model.layers
        if type(layer).__name__ in ("Permute", "RepeatVector")
    ]
    assert ours_configs == theirs["configs"]
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    h = model.fit(x, y, epochs=1, batch_size=4, shuffle=False, verbose=0).history
    assert h["loss"][0] == pytest.approx(theirs["loss"], abs=1e-5)
    for ours, keras_w in zip(model.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(ours, np.array(keras_w), atol=1e-4)

    def entries(text: str) -> list:
        return [
            (entry["class_name"], {k: v for k, v in entry["config"].items() if k in ("dims", "n")},
             entry.get("build_config"))
            for entry in json.loads(text)["config"]["layers"]
            if entry["class_name"] in ("Permute", "RepeatVector")
        ]

    assert entries(model.to_json()) == entries(theirs["json"])
    # Keras's JSON read here gives the same model.
    again = keras.models.model_from_json(theirs["json"])
    again.set_weights(model.get_weights())
    np.testing.assert_allclose(again.predict(x, verbose=0), model.predict(x, verbose=0))
