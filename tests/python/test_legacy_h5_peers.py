"""The legacy whole-model `.h5` both ways with Keras 3.15 itself: Keras saves a trained MLP (compiled
with from_logits) and a small convnet with model.save('m.h5') and crossover loads them, predicting
the same and compiled as saved; crossover saves them and Keras's load_model reads them, predicting
the same. Keras runs in a subprocess with the peers' Python (test_keras_archive_peers.run_keras;
skipped with a message without one)."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import run_keras

TOLERANCE = 1e-5

MODELS = """
    def mlp():
        return keras.Sequential([keras.Input((6,)), layers.Dense(5, activation="relu"),
                                 layers.Dropout(0.2), layers.Dense(3)])

    def convnet():
        return keras.Sequential([keras.Input((8, 8, 1)), layers.Conv2D(4, 3, activation="relu"),
                                 layers.BatchNormalization(), layers.MaxPooling2D(),
                                 layers.Flatten(), layers.Dense(2, activation="softmax")])
"""

KERAS_SAVES = """
    import json
    import numpy as np
    import keras
    from keras import layers
    {models}
    x_mlp, x_conv = np.load("x_mlp.npy"), np.load("x_conv.npy")
    m = mlp()
    m.compile(optimizer=keras.optimizers.Adam(0.005),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
    m.fit(x_mlp, np.arange(32) % 3, epochs=1, batch_size=8, verbose=0)
    m.save("keras_mlp.h5")
    c = convnet()  # never compiled
    c.save("keras_conv.h5")
    print(json.dumps({{"mlp": m.predict(x_mlp, verbose=0).tolist(),
                      "conv": c.predict(x_conv, verbose=0).tolist()}}))
"""

KERAS_LOADS = """
    import json
    import numpy as np
    import keras
    x_mlp, x_conv = np.load("x_mlp.npy"), np.load("x_conv.npy")
    m = keras.models.load_model("crossover_mlp.h5")
    c = keras.models.load_model("crossover_conv.h5")
    print(json.dumps({{"mlp": m.predict(x_mlp, verbose=0).tolist(),
                      "conv": c.predict(x_conv, verbose=0).tolist(),
                      "loss": type(m.loss).__name__, "from_logits": m.loss.get_config().get(
                          "from_logits"),
                      "optimizer": type(m.optimizer).__name__,
                      "learning_rate": float(m.optimizer.learning_rate.numpy()),
                      "conv_compiled": c.compiled}}))
"""


def inputs(folder: Path):
    rs = np.random.RandomState(7)
    x_mlp, x_conv = rs.rand(32, 6).astype(np.float32), rs.rand(16, 8, 8, 1).astype(np.float32)
    np.save(folder / "x_mlp.npy", x_mlp)
    np.save(folder / "x_conv.npy", x_conv)
    return x_mlp, x_conv


def define_models():
    namespace = {"keras": keras, "layers": layers}
    exec(MODELS.replace("\n    ", "\n"), namespace)
    return namespace["mlp"], namespace["convnet"]


def test_keras_saves_and_crossover_loads(tmp_path: Path) -> None:
    x_mlp, x_conv = inputs(tmp_path)
    theirs = run_keras(KERAS_SAVES.format(models=MODELS), tmp_path)
    mlp = keras.models.load_model(tmp_path / "keras_mlp.h5")
    np.testing.assert_allclose(mlp.predict(x_mlp, verbose=0), theirs["mlp"], atol=TOLERANCE)
    assert type(mlp.loss).__name__ == "SparseCategoricalCrossentropy" and mlp.loss.from_logits
    assert float(mlp.optimizer.learning_rate) == pytest.approx(0.005)
    conv = keras.models.load_model(tmp_path / "keras_conv.h5")
    np.testing.assert_allclose(conv.predict(x_conv, verbose=0), theirs["conv"], atol=TOLERANCE)
    # Trained on: the loaded model fits (from a fresh optimizer, as crossover does for .keras).
    mlp.fit(x_mlp, np.arange(32) % 3, epochs=1, batch_size=8, verbose=0)


def test_crossover_saves_and_keras_loads(tmp_path: Path) -> None:
    x_mlp, x_conv = inputs(tmp_path)
    mlp_of, convnet_of = define_models()
    mlp = mlp_of()
    mlp.compile(
        optimizer=keras.optimizers.Adam(0.005),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    mlp.fit(x_mlp, (np.arange(32) % 3).astype(np.float32), epochs=1, batch_size=8, verbose=0)
    mlp.save(tmp_path / "crossover_mlp.h5")
    conv = convnet_of()
    conv.save(tmp_path / "crossover_conv.h5")
    theirs = run_keras(KERAS_LOADS.format(), tmp_path)
    np.testing.assert_allclose(theirs["mlp"], mlp.predict(x_mlp, verbose=0), atol=TOLERANCE)
    np.testing.assert_allclose(theirs["conv"], conv.predict(x_conv, verbose=0), atol=TOLERANCE)
    assert theirs["loss"] == "SparseCategoricalCrossentropy" and theirs["from_logits"] is True
    assert theirs["optimizer"] == "Adam"
    assert theirs["learning_rate"] == pytest.approx(0.005)
    assert theirs["conv_compiled"] is False
