"""Custom layers called on data (keras/_eager.py) against Keras 3.15 itself: the same layers,
from the same weights, give Keras's outputs (within 1e-6), the guide's assign_add layer its
running sums, and a nested layer Keras's weights list (order, names, paths, trainable) and
losses. Keras runs in a subprocess with the peers' Python ($CROSSOVER_PEERS_PYTHON); without
one, skipped with a message saying so."""

import json
from pathlib import Path

import numpy as np

from crossover import keras
from crossover.keras import layers, ops
from test_keras_archive_peers import run_keras

# Written once, run by both: crossover's keras and Keras's.
LAYERS = """
class Linear(layers.Layer):
    def __init__(self, units, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="random_normal")
        self.b = self.add_weight(shape=(self.units,), initializer="zeros")

    def call(self, inputs):
        return ops.matmul(inputs, self.w) + self.b


class ComputeSum(layers.Layer):
    def __init__(self, input_dim):
        super().__init__()
        self.total = self.add_weight(initializer="zeros", shape=(input_dim,), trainable=False)

    def call(self, inputs):
        self.total.assign_add(ops.sum(inputs, axis=0))
        return self.total


class Activity(layers.Layer):
    def call(self, inputs):
        self.add_loss(0.01 * ops.mean(ops.square(inputs)))
        return ops.tanh(inputs) - 0.5 * inputs


class Block(layers.Layer):
    def __init__(self):
        super().__init__()
        self.first = Linear(6)
        self.counter = ComputeSum(6)
        self.scale = self.add_weight(shape=(), initializer="ones", name="scale")
        self.rest = [Linear(3), Activity()]

    def call(self, inputs):
        h = keras.activations.relu(self.first(inputs)) * self.scale
        self.counter(h)
        return self.rest[1](self.rest[0](h))
"""

# Builds each layer with a first call, sets the weights given, then calls again.
CALLS = """
def run(x, weights=None):
    out = {}
    linear, block, total = Linear(4), Block(), ComputeSum(5)
    linear(x), block(x)
    if weights is not None:
        linear.set_weights(weights["linear"])
        block.set_weights(weights["block"])
    out["linear"] = np.asarray(linear(x)).tolist()
    out["block"] = np.asarray(block(x)).tolist()
    out["losses"] = [float(l) for l in block.losses]
    out["sums"] = [np.asarray(total(x)).tolist(), np.asarray(total(x)).tolist()]
    out["weights"] = [[w.name, w.path, bool(w.trainable), list(w.shape)] for w in block.weights]
    out["trainable"] = [w.path for w in block.trainable_weights]
    out["non_trainable"] = [w.path for w in block.non_trainable_weights]
    out["values"] = {"linear": [w.tolist() for w in linear.get_weights()],
                     "block": [w.tolist() for w in block.get_weights()]}
    return out
"""

KERAS = """
import json
import numpy as np
import keras
from keras import layers, ops
{layers}
{calls}
x = np.load("x.npy")
given = json.load(open("weights.json"))
given = {{k: [np.array(w, dtype=np.float32) for w in v] for k, v in given.items()}}
print(json.dumps(run(x, given)))
"""

exec(LAYERS + CALLS)  # the same classes and run() on crossover's keras (layers, ops, keras here)


def test_custom_layers_called_on_data_compute_as_keras_does(tmp_path: Path) -> None:
    x = np.random.RandomState(3).rand(7, 5).astype(np.float32) - 0.3
    np.save(tmp_path / "x.npy", x)
    mine = run(x)  # noqa: F821 (made by exec above)
    (tmp_path / "weights.json").write_text(json.dumps(mine["values"]))
    theirs = run_keras(KERAS.format(layers=LAYERS, calls=CALLS), tmp_path)
    for key in ("linear", "block", "sums"):
        np.testing.assert_allclose(mine[key], theirs[key], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(mine["losses"], theirs["losses"], rtol=1e-6, atol=1e-7)
    assert mine["weights"] == theirs["weights"]  # order, names, paths, trainable, shapes
    assert mine["trainable"] == theirs["trainable"]
    assert mine["non_trainable"] == theirs["non_trainable"]
    np.testing.assert_array_equal(mine["sums"][1], 2 * x.sum(axis=0))


# keras.io's first custom train_step: compute_loss, the optimizer's apply, model.metrics.
TRAINER = """
class CustomModel(keras.Model):
    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self(x, training=True)
            loss = self.compute_loss(y=y, y_pred=y_pred)
        trainable_vars = self.trainable_variables
        self.optimizer.apply(tape.gradient(loss, trainable_vars), trainable_vars)
        for metric in self.metrics:
            if metric.name == "loss":
                metric.update_state(loss)
            else:
                metric.update_state(y, y_pred)
        return {m.name: m.result() for m in self.metrics}
"""

KERAS_TRAINER = """
import json
import numpy as np
import tensorflow as tf
import keras
{trainer}
x, y = np.load("x.npy"), np.load("y.npy")
inputs = keras.Input(shape=(6,))
model = CustomModel(inputs, keras.layers.Dense(2)(inputs))
model.set_weights([np.load("k.npy"), np.load("b.npy")])
model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="mse", metrics=["mae"])
h = model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0).history
print(json.dumps({{"history": h, "metrics": [m.name for m in model.metrics],
                  "weights": [w.tolist() for w in model.get_weights()]}}))
"""


def test_a_model_subclass_made_with_inputs_and_outputs_trains_its_train_step_as_keras_does(
    tmp_path: Path,
) -> None:
    import crossover as tf

    scope = {"keras": keras, "tf": tf}
    exec(TRAINER, scope)
    rs = np.random.RandomState(4)
    x, y = rs.rand(80, 6).astype(np.float32), rs.rand(80, 2).astype(np.float32)
    inputs = keras.Input(shape=(6,))
    model = scope["CustomModel"](inputs, layers.Dense(2)(inputs))
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.05), loss="mse", metrics=["mae"])
    kernel, bias = model.get_weights()
    for name, a in (("x", x), ("y", y), ("k", kernel), ("b", bias)):
        np.save(tmp_path / f"{name}.npy", a)
    theirs = run_keras(KERAS_TRAINER.format(trainer=TRAINER), tmp_path)
    h = model.fit(x, y, epochs=2, batch_size=16, shuffle=False, verbose=0).history
    assert [m.name for m in model.metrics] == theirs["metrics"] == ["loss", "compile_metrics"]
    assert sorted(h) == sorted(theirs["history"]) == ["loss", "mae"]
    for key in h:
        np.testing.assert_allclose(h[key], theirs["history"][key], rtol=1e-5, atol=1e-6)
    assert np.abs(model.get_weights()[0] - kernel).max() > 1e-3  # it trained
    for mine, k in zip(model.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(mine, np.array(k, np.float32), rtol=1e-5, atol=1e-6)
