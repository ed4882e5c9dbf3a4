"""UpSampling2D against Keras 3.15 itself: Keras builds a small convolutional autoencoder with it
and saves its .weights.h5, crossover loads that file into the same model and predicts the same
values; both then train it for one epoch (no shuffling, Adam, binary cross-entropy) to the same
loss and weights; and each side reads the other's model JSON. Keras runs in a subprocess with the
peers' Python ($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python); without one,
skipped with a message saying so."""

import json
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
    x = np.load("x.npy")
    model = keras.Sequential([keras.Input((6, 6, 2)),
                              layers.Conv2D(4, 3, activation="relu", padding="same"),
                              layers.MaxPooling2D(2, padding="same"),
                              layers.UpSampling2D((2, 3)),
                              layers.Conv2D(3, 3, activation="tanh", padding="same"),
                              layers.UpSampling2D(),
                              layers.Conv2D(1, (3, 2), activation="sigmoid", strides=(2, 3)),
                              layers.Flatten()])
    model.save_weights("keras.weights.h5")
    predicted = model.predict(x, verbose=0)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy")
    target = np.load("target.npy")
    h = model.fit(x, target, epochs=1, batch_size=4, shuffle=False, verbose=0).history
    print(json.dumps({"predicted": predicted.tolist(), "loss": h["loss"][0],
                      "weights": [w.tolist() for w in model.get_weights()],
                      "after": model.predict(x, verbose=0).tolist(),
                      "json": model.to_json()}))
"""


def autoencoder() -> keras.Sequential:
    return keras.Sequential(
        [
            keras.Input((6, 6, 2)),
            layers.Conv2D(4, 3, activation="relu", padding="same"),
            layers.MaxPooling2D(2, padding="same"),
            layers.UpSampling2D((2, 3)),
            layers.Conv2D(3, 3, activation="tanh", padding="same"),
            layers.UpSampling2D(),
            layers.Conv2D(1, (3, 2), activation="sigmoid", strides=(2, 3)),
            layers.Flatten(),  # the engine's outputs are flat; Keras's the same values
        ]
    )


def test_keras_weights_give_keras_values_and_train_as_keras_does(tmp_path: Path) -> None:
    rs = np.random.RandomState(3)
    x = rs.rand(12, 6, 6, 2).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    model = autoencoder()
    # (6, 6) -> pool (3, 3) -> up (6, 9) -> up (12, 18) -> conv (3, 2) strides (2, 3): (5, 6).
    target = rs.rand(12, 5 * 6).astype(np.float32)
    np.save(tmp_path / "target.npy", target)
    theirs = run_keras(KERAS, tmp_path)
    model.load_weights(str(tmp_path / "keras.weights.h5"))
    mine = model.predict(x, verbose=0)
    assert mine.shape == (12, 5 * 6)
    np.testing.assert_allclose(mine, np.array(theirs["predicted"]), rtol=1e-5, atol=1e-5)

    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="binary_crossentropy")
    h = model.fit(x, target, epochs=1, batch_size=4, shuffle=False, verbose=0).history
    assert h["loss"][0] == pytest.approx(theirs["loss"], abs=1e-5)
    for ours, keras_w in zip(model.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(ours, np.array(keras_w), atol=1e-4)
    np.testing.assert_allclose(model.predict(x, verbose=0), np.array(theirs["after"]), atol=1e-4)

    # Keras 3's JSON of this model reads here, with the same sizes.
    back = keras.models.model_from_json(theirs["json"])
    assert [l.size for l in back.layers if isinstance(l, layers.UpSampling2D)] == [(2, 3), (2, 2)]
    theirs_cfg = json.loads(theirs["json"])["config"]["layers"][3]["config"]
    ours_cfg = json.loads(model.to_json())["config"]["layers"][3]["config"]
    for key in ("size", "data_format", "interpolation"):
        assert ours_cfg[key] == theirs_cfg[key], key


KERAS_READ = """
    import json
    import numpy as np
    import keras
    model = keras.models.model_from_json(open("model.json").read())
    model.load_weights("ours.weights.h5")
    up = model.layers[2]
    print(json.dumps({"class": type(up).__name__, "size": list(up.size),
                      "interpolation": up.interpolation,
                      "predicted": model.predict(np.load("x.npy"), verbose=0).tolist()}))
"""


def test_keras_reads_the_json_and_weights_crossover_writes(tmp_path: Path) -> None:
    model = autoencoder()
    x = np.random.RandomState(4).rand(5, 6, 6, 2).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "model.json").write_text(model.to_json())
    model.save_weights(str(tmp_path / "ours.weights.h5"))
    theirs = run_keras(KERAS_READ, tmp_path)
    assert theirs["class"] == "UpSampling2D"
    assert theirs["size"] == [2, 3]
    assert theirs["interpolation"] == "nearest"
    np.testing.assert_allclose(
        model.predict(x, verbose=0), np.array(theirs["predicted"]), rtol=1e-5, atol=1e-5
    )
