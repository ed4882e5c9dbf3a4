"""Conv2D and Conv2DTranspose with dilation_rate against Keras 3.15 itself: Keras builds a small
model of dilated convolutions ('valid' and 'same', dilation 2 and (2, 3), an even span that
TensorFlow pads unevenly, a dilated Conv2DTranspose) and saves its .weights.h5; crossover loads
that file into the same model and predicts the same values (within 1e-5); both then train it a few
steps (no shuffling, Adam, mean squared error) to the same losses and weights (within 1e-4); and
each side reads the other's model JSON, dilation_rate included. Keras runs in a subprocess with
the peers' Python ($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python); without one,
skipped with a message saying so."""

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
    model = keras.Sequential([keras.Input((11, 12, 2)),
                              layers.Conv2D(4, 3, dilation_rate=2, activation="relu"),
                              layers.Conv2D(3, (3, 2), dilation_rate=(2, 3), padding="same",
                                            activation="tanh"),
                              layers.Conv2DTranspose(2, (2, 3), dilation_rate=(3, 2)),
                              layers.Conv2D(1, 3, dilation_rate=(1, 2), padding="same",
                                            use_bias=False)])
    model.save_weights("keras.weights.h5")
    predicted = model.predict(x, verbose=0)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    h = model.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0).history
    print(json.dumps({"predicted": predicted.tolist(), "loss": h["loss"],
                      "weights": [w.tolist() for w in model.get_weights()],
                      "after": model.predict(x, verbose=0).tolist(),
                      "json": model.to_json()}))
"""


def dilated() -> keras.Sequential:
    return keras.Sequential(
        [
            keras.Input((11, 12, 2)),
            layers.Conv2D(4, 3, dilation_rate=2, activation="relu"),  # spans 5x5: (7, 8, 4)
            # spans 5x4: rows padded 2 and 2, columns 1 and 2 (TensorFlow's odd one after)
            layers.Conv2D(3, (3, 2), dilation_rate=(2, 3), padding="same", activation="tanh"),
            layers.Conv2DTranspose(2, (2, 3), dilation_rate=(3, 2)),  # spans 4x5: (10, 12, 2)
            layers.Conv2D(1, 3, dilation_rate=(1, 2), padding="same", use_bias=False),
        ]
    )


def test_keras_weights_give_keras_values_and_train_as_keras_does(tmp_path: Path) -> None:
    rs = np.random.RandomState(5)
    x = rs.rand(10, 11, 12, 2).astype(np.float32)
    y = rs.rand(10, 10, 12, 1).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    theirs = run_keras(KERAS, tmp_path)
    model = dilated()
    model.load_weights(str(tmp_path / "keras.weights.h5"))
    mine = model.predict(x, verbose=0)
    assert mine.shape == (10, 10, 12, 1)
    np.testing.assert_allclose(mine, np.array(theirs["predicted"]), rtol=1e-5, atol=1e-5)

    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="mse")
    h = model.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0).history
    np.testing.assert_allclose(h["loss"], theirs["loss"], atol=1e-4)
    for ours, keras_w in zip(model.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(ours, np.array(keras_w), atol=1e-4)
    np.testing.assert_allclose(model.predict(x, verbose=0), np.array(theirs["after"]), atol=1e-4)

    # Keras's JSON builds the same layers here, and ours writes Keras's fields.
    theirs_model = keras.models.model_from_json(theirs["json"])
    rates = [layer.dilation_rate for layer in theirs_model.layers]
    assert rates == [(2, 2), (2, 3), (3, 2), (1, 2)]
    ours_layers = json.loads(model.to_json())["config"]["layers"]
    keras_layers = json.loads(theirs["json"])["config"]["layers"]
    assert len(ours_layers) == len(keras_layers)
    for ours, keras_layer in zip(ours_layers, keras_layers):
        for field in ("filters", "kernel_size", "strides", "padding", "dilation_rate", "use_bias"):
            assert ours["config"].get(field) == keras_layer["config"].get(field), field
