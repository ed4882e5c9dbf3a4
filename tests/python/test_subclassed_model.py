"""Subclassed keras.Model (layers made in __init__, applied in call()), traced into a graph of
its layers when it first meets data: trained against Keras 3.15 itself from the same initial
weights (the peers' Python, skipped without it), and the tracing's rules checked here."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import run_keras

# Written once for both sides (`keras` and `layers` are each side's).
BUILD = """
class Residual(keras.Model):
    def __init__(self, hidden, classes, **kwargs):
        super().__init__(**kwargs)
        self.dense1 = layers.Dense(hidden, activation="relu")
        self.dense2 = layers.Dense(hidden, activation="tanh")
        self.join = layers.Add()
        self.head = keras.Sequential([layers.Dense(hidden, activation="relu"),
                                      layers.Dense(classes, activation="softmax")])

    def call(self, inputs, training=False):
        h = self.dense1(inputs)
        return self.head(self.join([self.dense2(h), h]), training=training)

model = Residual(8, 3)
model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
"""

KERAS_SIDE = """
import json
import numpy as np
import keras
from keras import layers
keras.utils.set_random_seed(5)
{build}
x, y = np.load("x.npy"), np.load("y.npy")
model(x[:1])  # builds its weights (Keras 3's build() would not: no build method)
for i, w in enumerate(model.get_weights()):
    np.save(f"w{{i}}.npy", w)
h = model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0).history
ev = model.evaluate(x, y, verbose=0)
print(json.dumps({{"history": h, "eval": ev, "n": len(model.get_weights()), "name": model.name,
                  "predict": model.predict(x[:4], verbose=0).tolist(),
                  "weights": [w.tolist() for w in model.get_weights()]}}))
"""


def test_a_subclassed_model_trains_as_keras_does(tmp_path: Path) -> None:
    rs = np.random.RandomState(2)
    x = rs.rand(44, 6).astype(np.float32)  # 44 = 5 batches of 8 and a partial one
    y = rs.randint(0, 3, 44).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    theirs = run_keras(KERAS_SIDE.format(build=BUILD), tmp_path)

    scope = {"keras": keras, "layers": layers}
    exec(BUILD, scope)
    model = scope["model"]
    assert model.name == theirs["name"] == "residual"
    model.build((None, 6))
    initial = [np.load(tmp_path / f"w{i}.npy") for i in range(theirs["n"])]
    assert [w.shape for w in model.get_weights()] == [w.shape for w in initial]
    model.set_weights(initial)
    h = model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0).history
    assert list(h) == list(theirs["history"])
    for key, values in theirs["history"].items():
        np.testing.assert_allclose(h[key], values, atol=1e-4, err_msg=key)
    np.testing.assert_allclose(model.evaluate(x, y, verbose=0), theirs["eval"], atol=1e-4)
    np.testing.assert_allclose(model.predict(x[:4], verbose=0), theirs["predict"], atol=1e-4)
    for mine, keras_w in zip(model.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(mine, np.array(keras_w), atol=1e-4)


class Autoencoder(keras.Model):
    def __init__(self, latent):
        super().__init__()
        self.encoder = keras.Sequential([layers.Flatten(), layers.Dense(latent, activation="relu")])
        self.decoder = keras.Sequential([layers.Dense(16, activation="sigmoid")])
        self.drop = layers.Dropout(0.5)

    def call(self, x, training=None):
        z = self.encoder(x)
        if training:
            z = self.drop(z, training=training)
        return self.decoder(z)


def test_compile_waits_for_the_first_data_and_the_graph_is_its_layer_calls() -> None:
    keras.utils.set_random_seed(1)
    model = Autoencoder(8)
    assert not model.built
    model.summary(print_fn=lambda text: None)  # Keras's table of unbuilt layers (no error)
    assert not model.built
    model.compile(optimizer="adam", loss="mse")  # before the model knows its input
    x = np.random.RandomState(0).rand(64, 4, 4).astype(np.float32)
    h = model.fit(x, x.reshape(64, 16), epochs=2, batch_size=16, verbose=0).history
    assert model.built and len(h["loss"]) == 2 and h["loss"][1] < h["loss"][0]
    # The nested Sequentials' layers are the graph's; the Dropout that call() applies in
    # training is in it too (the engine runs it in fit only).
    assert [type(l).__name__ for l in model.layers] == [
        "Flatten", "Dense", "Dropout", "Dense"
    ]
    out = model(x[:3])
    assert out.shape == (3, 16)
    np.testing.assert_allclose(out.numpy(), model.predict(x[:3], verbose=0))
    # The encoder alone shares the trained weights with the model (a model used as a layer).
    np.testing.assert_allclose(
        model.encoder.predict(x[:3], verbose=0),
        np.maximum(x[:3].reshape(3, 16) @ model.encoder.layers[1].get_weights()[0]
                   + model.encoder.layers[1].get_weights()[1], 0),
        atol=1e-5,
    )
    with pytest.raises(ValueError, match="input shape is"):
        model.build((None, 5, 5))


def test_tracing_rules() -> None:
    class NoLayers(keras.Model):
        def call(self, x):
            return 3

    with pytest.raises(TypeError, match="not the output of a layer"):
        NoLayers().build((None, 2))

    class Fine(keras.Model):
        def __init__(self):
            super().__init__(name="fine")
            self.d = layers.Dense(2)

        def call(self, x):
            return self.d(x)

    m = Fine()
    with pytest.raises(ValueError, match="You must call `compile\\(\\)`"):
        m.fit(np.zeros((4, 3), np.float32), np.zeros((4, 2), np.float32), verbose=0)
    assert m.name == "fine" and m.built  # fit traced it before refusing
    with pytest.raises(TypeError, match=r"takes \(inputs, outputs\) or name= only"):
        Fine.__bases__[0].__init__(m, 5)
