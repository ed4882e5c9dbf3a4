"""Losses the engine has no op for, against Keras 3.15 on TensorFlow 2.21, from the same initial
weights and batches in order (no shuffling, no dropout):
- compile(loss=<a Python function>) / a keras.losses.Loss subclass / "mae", or metrics of the
  user's (a Metric subclass with add_weight, a function), then fit and evaluate: fit steps in
  Python (keras/_python_step.py) through the engine's passes;
- a GradientTape loop whose loss is eager ops on the model's outputs (tf.reduce_mean,
  tf.square, keras.losses functions), differentiated through training_backward_outputs.
The same code runs on both sides (executed here with crossover as `tf` and `keras`); the weights
after training agree within 1e-5, the History, evaluate's values and the losses within 1e-5.
Keras runs in a subprocess with the peers' Python; without one, skipped."""

import textwrap
from pathlib import Path

import numpy as np
import pytest

import crossover as tf
from crossover import keras
from test_keras_archive_peers import run_keras

MODEL = """
model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="tanh"),
                          keras.layers.Dense(3, activation="softmax")])
model.set_weights(weights)
"""

FIT = """
def cubed_error(y_true, y_pred):
    return tf.reduce_mean(tf.abs(y_true - y_pred) ** 3, axis=-1)

class Weighted(keras.losses.Loss):
    def call(self, y_true, y_pred):
        return tf.reduce_sum(tf.square(y_true - y_pred) * [1.0, 2.0, 3.0], axis=-1)

class Hits(keras.metrics.Metric):
    def __init__(self, name="hits", **kwargs):
        super().__init__(name=name, **kwargs)
        self.hits = self.add_weight(name="hits", initializer="zeros")

    def update_state(self, y_true, y_pred, sample_weight=None):
        right = tf.argmax(y_true, axis=1) == tf.argmax(y_pred, axis=1)
        self.hits.assign_add(tf.reduce_sum(tf.cast(right, "float32")))

    def result(self):
        return self.hits

def top_probability(y_true, y_pred):
    return tf.reduce_max(y_pred, axis=-1)

loss = {"function": cubed_error, "subclass": Weighted(), "mae": "mae",
        "metrics": "categorical_crossentropy", "kld": keras.losses.KLDivergence()}[KIND]
metrics = ["accuracy"] + ([Hits(), top_probability] if KIND == "metrics" else [])
model.compile(optimizer=keras.optimizers.SGD(0.5), loss=loss, metrics=metrics)
history = model.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0,
                    validation_data=(x[:16], y[:16]))
evaluated = model.evaluate(x, y, batch_size=8, verbose=0)
result = {"weights": [w.tolist() for w in model.get_weights()],
          "history": {k: [float(v) for v in vs] for k, vs in history.history.items()},
          "evaluate": [float(v) for v in evaluated]}
"""

TAPE = """
optimizer = keras.optimizers.Adam(learning_rate=0.02)
losses = []
for step in range(5):
    xb, yb = x[step * 8:(step + 1) * 8], y[step * 8:(step + 1) * 8]
    with tf.GradientTape() as tape:
        p = model(xb, training=True)
        loss = tf.reduce_mean(keras.losses.categorical_crossentropy(yb, p))
        loss = loss + 0.1 * tf.reduce_mean(tf.square(p - 1.0 / 3))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    losses.append(float(loss))
result = {"weights": [w.tolist() for w in model.get_weights()], "losses": losses}
"""

KERAS = """
import json
import numpy as np
import tensorflow as tf
import keras
x, y = np.load("x.npy"), np.load("y.npy")
weights = [np.load(f"w{i}.npy") for i in range(4)]
"""


def data(folder: Path) -> dict:
    rs = np.random.RandomState(31)
    x = rs.rand(40, 6).astype(np.float32)
    y = np.eye(3, dtype=np.float32)[rs.randint(0, 3, 40)]
    weights = [rs.uniform(-0.6, 0.6, s).astype(np.float32) for s in [(6, 8), (8,), (8, 3), (3,)]]
    np.save(folder / "x.npy", x)
    np.save(folder / "y.npy", y)
    for i, w in enumerate(weights):
        np.save(folder / f"w{i}.npy", w)
    return {"np": np, "tf": tf, "keras": keras, "x": x, "y": y, "weights": weights}


def both(code: str, folder: Path) -> tuple[dict, dict]:
    """`code` (after the shared model) run here with crossover, and by Keras: their results."""
    names = data(folder)
    theirs = run_keras(KERAS + MODEL + code + "\nprint(json.dumps(result))\n", folder)
    exec(textwrap.dedent(MODEL + code), names)
    return names["result"], theirs


def assert_same_weights(ours: list, theirs: list) -> None:
    for o, t in zip(ours, theirs):
        np.testing.assert_allclose(np.asarray(o, np.float32), np.asarray(t, np.float32), atol=1e-5)


@pytest.mark.parametrize("kind", ["function", "subclass", "mae", "metrics", "kld"])
def test_fit_with_a_loss_the_engine_has_no_op_for(kind: str, tmp_path: Path) -> None:
    ours, theirs = both(FIT.replace("KIND", repr(kind)), tmp_path)
    assert_same_weights(ours["weights"], theirs["weights"])
    assert sorted(ours["history"]) == sorted(theirs["history"])
    for key, values in theirs["history"].items():
        assert ours["history"][key] == pytest.approx(values, abs=1e-5), key
    assert ours["evaluate"] == pytest.approx(theirs["evaluate"], abs=1e-5)


def test_a_tape_loop_with_eager_ops_on_the_outputs(tmp_path: Path) -> None:
    ours, theirs = both(TAPE, tmp_path)
    assert_same_weights(ours["weights"], theirs["weights"])
    assert ours["losses"] == pytest.approx(theirs["losses"], abs=1e-5)


COMPUTE_LOSS = """
class Weighted(keras.Model):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, allow_empty=False):
        return tf.reduce_mean(tf.reduce_sum(tf.square(y - y_pred) * [1.0, 2.0, 3.0], axis=-1))

    def call(self, x):
        return self.inner(x)

wrapper = Weighted(model)
wrapper.compile(optimizer=keras.optimizers.SGD(0.5), metrics=["categorical_accuracy"])
history = wrapper.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
result = {"weights": [w.tolist() for w in model.get_weights()],
          "history": {k: [float(v) for v in vs] for k, vs in history.history.items()}}
"""


def test_a_models_own_compute_loss_under_kerass_train_step(tmp_path: Path) -> None:
    """compile() without a loss for a model that overrides compute_loss (knowledge
    distillation's pattern): Keras's train_step calls it."""
    ours, theirs = both(COMPUTE_LOSS, tmp_path)
    assert_same_weights(ours["weights"], theirs["weights"])
    assert sorted(ours["history"]) == sorted(theirs["history"])
    for key, values in theirs["history"].items():
        assert ours["history"][key] == pytest.approx(values, abs=1e-5), key
