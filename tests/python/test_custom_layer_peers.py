"""Custom layers (a keras.layers.Layer subclass with add_weight and a call() of ops) against Keras
3.15 itself: crossover traces call() into engine ops (keras/_trace.py); the same model from the
same initial weights, one epoch on a few hundred rows without shuffling and without dropout, gives
Keras's loss and weights. Keras runs in a subprocess with the peers' Python
($CROSSOVER_PEERS_PYTHON); without one, skipped with a message saying so."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers, ops
from test_keras_archive_peers import run_keras

# The two layers, written once and run by both: crossover's keras and Keras's.
LAYERS = """
class CenteredSplit(layers.Layer):
    # x - mean(x), its positive and negative parts side by side, mixed back by a kernel.
    def build(self, input_shape):
        width = input_shape[-1]
        self.kernel = self.add_weight(shape=(2 * width, width), initializer="he_normal",
                                      name="kernel", trainable=True)

    def call(self, inputs):
        inputs -= tf_ops.mean(inputs, axis=-1, keepdims=True)
        pos = tf_ops.relu(inputs)
        neg = tf_ops.relu(-inputs)
        both = tf_ops.concatenate([pos, neg], axis=-1)
        return tf_ops.matmul(both, self.kernel)


class Affine(layers.Layer):
    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units),
                                 initializer=keras.initializers.GlorotNormal(), name="kernel")
        self.b = self.add_weight(shape=(self.units,), initializer="zeros", name="bias")

    def call(self, inputs):
        return tf_ops.matmul(inputs, self.w) + self.b


class TwoBranches(keras.Model):
    def __init__(self):
        super().__init__()
        self.a = Affine(6)
        self.b = Affine(5)
        self.out = Affine(3)

    def call(self, x):
        joined = tf_ops.concatenate([self.a(x), self.b(x)], axis=-1)
        return self.out(joined * 0.5 - 1.0)
"""

KERAS_TRAIN = """
import json
import numpy as np
import keras
from keras import layers
from keras import ops as tf_ops
{layers}
x, y, t = np.load("x.npy"), np.load("y.npy"), np.load("t.npy")
count = int(np.load("count.npy"))
weights = [np.load(f"w{{i}}.npy") for i in range(count)]
if "{which}" == "split":
    model = keras.Sequential([keras.Input((10,)), layers.Dense(8), CenteredSplit(),
                              layers.Dense(4, activation="softmax")])
    loss, target = "sparse_categorical_crossentropy", y
else:
    model = TwoBranches()
    model(x[:1])  # Keras builds a subclassed model by calling it
    loss, target = "mean_squared_error", t
model.set_weights(weights)
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss=loss)
h = model.fit(x, target, epochs=1, batch_size=32, shuffle=False, verbose=0).history
print(json.dumps({{"loss": h["loss"], "weights": [w.tolist() for w in model.get_weights()],
                  "params": model.count_params()}}))
"""

tf_ops = ops
exec(LAYERS)  # the same classes on crossover's keras (layers, keras, tf_ops in this module)


def data(folder: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rs = np.random.RandomState(5)
    x = rs.rand(320, 10).astype(np.float32)
    y = rs.randint(0, 4, 320).astype(np.float32)
    t = rs.rand(320, 3).astype(np.float32)
    for name, a in (("x", x), ("y", y), ("t", t)):
        np.save(folder / f"{name}.npy", a)
    return x, y, t


@pytest.mark.parametrize("which", ["split", "branches"])
def test_a_custom_layer_trains_as_keras_does(which: str, tmp_path: Path) -> None:
    x, y, t = data(tmp_path)
    if which == "split":
        model = keras.Sequential(
            [
                keras.Input((10,)),
                layers.Dense(8),
                CenteredSplit(),  # noqa: F821 (made by exec above)
                layers.Dense(4, activation="softmax"),
            ]
        )
        loss, target = "sparse_categorical_crossentropy", y
    else:
        model = TwoBranches()  # noqa: F821
        model.build((None, 10))
        loss, target = "mean_squared_error", t
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss=loss)
    initial = model.get_weights()
    np.save(tmp_path / "count.npy", np.array(len(initial)))
    for i, w in enumerate(initial):
        np.save(tmp_path / f"w{i}.npy", w)
    theirs = run_keras(KERAS_TRAIN.format(layers=LAYERS, which=which), tmp_path)
    h = model.fit(x, target, epochs=1, batch_size=32, shuffle=False, verbose=0).history
    assert model.count_params() == theirs["params"]
    np.testing.assert_allclose(h["loss"], theirs["loss"], rtol=1e-4, atol=1e-4)
    mine = model.get_weights()
    assert len(mine) == len(theirs["weights"])
    for m, k, start in zip(mine, theirs["weights"], initial):
        k = np.array(k, dtype=np.float32)
        assert m.shape == k.shape
        assert np.abs(k - start).max() > 1e-4  # the epoch moved every weight
        np.testing.assert_allclose(m, k, rtol=1e-4, atol=1e-4)
