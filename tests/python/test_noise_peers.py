"""GaussianNoise, GaussianDropout and SpatialDropout2D against Keras 3.15 itself. Keras builds a
small convnet with the three and saves its .weights.h5; crossover loads it. At stddev and rates 0
the layers draw nothing, so both sides train it for one epoch (no shuffling, Adam) to the same
loss and weights. At nonzero stddev and rates the noise differs (each side draws its own), so
both predict the same values (no noise outside training), train it for several epochs to a loss
that falls on both sides, within a factor of each other, and each side's model JSON has the same
layer configs (the same keys and values). Keras runs in a subprocess with the peers' Python
(test_keras_archive_peers.run_keras); without one, skipped with a message saying so."""

import json
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import run_keras

LAYERS = """[keras.Input((6, 6, 2)),
             layers.GaussianNoise({stddev}),
             layers.Conv2D(4, 3, activation="tanh"),
             layers.SpatialDropout2D({spatial}),
             layers.Flatten(),
             layers.Dense(8, activation="relu"),
             layers.GaussianDropout({rate}),
             layers.Dense(3, activation="softmax")]"""

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
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    h = model.fit(x, y, epochs={epochs}, batch_size=8, shuffle=False, verbose=0).history
    print(json.dumps({{"predicted": predicted.tolist(), "losses": h["loss"],
                      "weights": [w.tolist() for w in model.get_weights()],
                      "json": model.to_json()}}))
"""

NOISE = ("GaussianNoise", "GaussianDropout", "SpatialDropout2D")


def data(folder: Path):
    rs = np.random.RandomState(5)
    x = rs.rand(48, 6, 6, 2).astype(np.float32)
    y = (x.mean(axis=(1, 2, 3)) * 9).astype(np.int64) % 3
    np.save(folder / "x.npy", x)
    np.save(folder / "y.npy", y)
    return x, y


def both(folder: Path, epochs: int, **amounts):
    x, y = data(folder)
    text = LAYERS.format(**amounts)
    theirs = run_keras(KERAS.format(layers=text, epochs=epochs), folder)
    model = keras.Sequential(eval(text, {"keras": keras, "layers": layers}))
    model.load_weights(str(folder / "keras.weights.h5"))
    np.testing.assert_allclose(
        model.predict(x, verbose=0), np.array(theirs["predicted"]), rtol=1e-5, atol=1e-6
    )
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    ours = model.fit(x, y, epochs=epochs, batch_size=8, shuffle=False, verbose=0).history["loss"]
    return model, ours, theirs, x


def configs(text: str) -> list:
    return [
        (entry["class_name"], entry["config"], "build_config" in entry)
        for entry in json.loads(text)["config"]["layers"]
        if entry["class_name"] in NOISE
    ]


def test_at_zero_both_train_the_same(tmp_path: Path) -> None:
    model, ours, theirs, _ = both(tmp_path, 1, stddev=0.0, spatial=0.0, rate=0.0)
    assert ours[0] == pytest.approx(theirs["losses"][0], abs=1e-5)
    for w, keras_w in zip(model.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(w, np.array(keras_w), atol=1e-4)


def test_with_noise_both_predict_the_same_and_train_comparably(tmp_path: Path) -> None:
    model, ours, theirs, x = both(tmp_path, 12, stddev=0.1, spatial=0.2, rate=0.2)
    keras_losses = theirs["losses"]
    # Each side's loss falls, and the two ends are within a factor of each other (the noise is
    # each side's own: the same distribution, other draws).
    assert ours[-1] < ours[0] and keras_losses[-1] < keras_losses[0]
    assert ours[0] == pytest.approx(keras_losses[0], rel=0.1)
    assert 0.5 < ours[-1] / keras_losses[-1] < 2.0
    # The same configs as Keras writes them (keys and values; no build_config), and Keras's JSON
    # read here gives a model that predicts as ours.
    assert configs(model.to_json()) == configs(theirs["json"])
    again = keras.models.model_from_json(theirs["json"])
    again.set_weights(model.get_weights())
    np.testing.assert_allclose(again.predict(x, verbose=0), model.predict(x, verbose=0))


KERAS_READS = """
    import json
    import keras
    model = keras.models.model_from_json(open("ours.json").read())
    print(json.dumps({"classes": [type(l).__name__ for l in model.layers],
                      "configs": [l.get_config() for l in model.layers]}))
"""


def test_keras_reads_our_json(tmp_path: Path) -> None:
    model = keras.Sequential(
        eval(LAYERS.format(stddev=0.3, spatial=0.1, rate=0.4), {"keras": keras, "layers": layers})
    )
    (tmp_path / "ours.json").write_text(model.to_json())
    theirs = run_keras(KERAS_READS, tmp_path)
    assert theirs["classes"][0] == "GaussianNoise" and theirs["configs"][0]["stddev"] == 0.3
    assert theirs["classes"][2] == "SpatialDropout2D" and theirs["configs"][2]["rate"] == 0.1
    assert theirs["classes"][5] == "GaussianDropout" and theirs["configs"][5]["rate"] == 0.4
    for layer, config in zip(model.layers, theirs["configs"]):
        if type(layer).__name__ in NOISE:
            assert layer.get_config() == config
