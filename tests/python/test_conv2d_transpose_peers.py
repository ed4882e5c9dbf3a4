"""Conv2DTranspose against Keras 3.15 itself: Keras builds a small decoder with it (valid and same
padding, strides 1, 2 and 3, with and without bias) and saves its .weights.h5; crossover loads that
file into the same model and predicts the same values (within 1e-5); both then train it a few
steps (no shuffling, Adam, mean squared error on the image output) to the same losses and weights
(within 1e-4); and each side reads the other's model JSON. Keras runs in a subprocess with the
peers' Python ($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python); without one, skipped
with a message saying so."""

import json
from pathlib import Path

import numpy as np

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
    model = keras.Sequential([keras.Input((3, 3, 2)),
                              layers.Conv2DTranspose(4, 3, activation="relu"),
                              layers.Conv2DTranspose(3, 2, strides=3, use_bias=False),
                              layers.Conv2DTranspose(2, (3, 4), strides=2, padding="same",
                                                     activation="tanh"),
                              layers.Conv2D(1, 5, strides=2, activation="sigmoid")])
    model.save_weights("keras.weights.h5")
    predicted = model.predict(x, verbose=0)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    h = model.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0).history
    print(json.dumps({"predicted": predicted.tolist(), "loss": h["loss"],
                      "weights": [w.tolist() for w in model.get_weights()],
                      "after": model.predict(x, verbose=0).tolist(),
                      "json": model.to_json()}))
"""


def decoder() -> keras.Sequential:
    return keras.Sequential(
        [
            keras.Input((3, 3, 2)),
            layers.Conv2DTranspose(4, 3, activation="relu"),  # (5, 5, 4)
            layers.Conv2DTranspose(3, 2, strides=3, use_bias=False),  # (15, 15, 3)
            layers.Conv2DTranspose(2, (3, 4), strides=2, padding="same", activation="tanh"),
            layers.Conv2D(1, 5, strides=2, activation="sigmoid"),  # (30, 30) -> (13, 13, 1)
        ]
    )


def test_keras_weights_give_keras_values_and_train_as_keras_does(tmp_path: Path) -> None:
    rs = np.random.RandomState(3)
    x = rs.rand(10, 3, 3, 2).astype(np.float32)
    y = rs.rand(10, 13, 13, 1).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    theirs = run_keras(KERAS, tmp_path)
    model = decoder()
    model.load_weights(str(tmp_path / "keras.weights.h5"))
    mine = model.predict(x, verbose=0)
    assert mine.shape == (10, 13, 13, 1)
    np.testing.assert_allclose(mine, np.array(theirs["predicted"]), rtol=1e-5, atol=1e-5)

    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    h = model.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0).history
    np.testing.assert_allclose(h["loss"], theirs["loss"], atol=1e-4)
    for ours, keras_w in zip(model.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(ours, np.array(keras_w), atol=1e-4)
    np.testing.assert_allclose(model.predict(x, verbose=0), np.array(theirs["after"]), atol=1e-4)

    # Keras's JSON builds the same layers here, and ours reads back with Keras's fields.
    theirs_model = keras.models.model_from_json(theirs["json"])
    assert [type(layer).__name__ for layer in theirs_model.layers] == [
        "Conv2DTranspose",
        "Conv2DTranspose",
        "Conv2DTranspose",
        "Conv2D",
    ]
    config = json.loads(model.to_json())["config"]["layers"][3]["config"]
    keras_config = json.loads(theirs["json"])["config"]["layers"][3]["config"]
    for field in ("filters", "kernel_size", "strides", "padding", "output_padding", "use_bias"):
        assert config[field] == keras_config[field], field
