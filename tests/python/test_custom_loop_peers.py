"""A custom training loop (tf.GradientTape, tape.gradient, optimizer.apply_gradients, metric
objects called directly) against Keras 3.15 on TensorFlow 2.21: the same small MLP from the same
initial weights, a few batches in order, no dropout; the weights after the steps agree within
1e-5 and the metrics' results match. Keras runs in a subprocess with the peers' Python
($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python); without one, skipped."""

from pathlib import Path

import numpy as np
import pytest

import crossover as tf
from crossover import keras
from test_keras_archive_peers import run_keras

KERAS_LOOP = """
    import json
    import numpy as np
    import tensorflow as tf
    import keras
    x, y = np.load("x.npy"), np.load("y.npy")
    weights = [np.load(f"w{{i}}.npy") for i in range(4)]
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(3)])
    model.set_weights(weights)
    loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = keras.optimizers.Adam(learning_rate=0.01)
    mean, accuracy = keras.metrics.Mean(), keras.metrics.SparseCategoricalAccuracy()
    losses = []
    for step in range(5):
        xb, yb = x[step * 8:(step + 1) * 8], y[step * 8:(step + 1) * 8]
        with tf.GradientTape() as tape:
            predictions = model(xb, training=True)
            loss = loss_object(yb, predictions)
        grads = tape.gradient(loss, model.trainable_variables)
        if {clip}:
            grads = [tf.clip_by_value(g, -0.05, 0.05) for g in grads]
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        mean(loss)
        accuracy(yb, predictions)
        losses.append(float(loss))
    print(json.dumps({{"weights": [w.tolist() for w in model.get_weights()], "losses": losses,
                      "mean": float(mean.result()), "accuracy": float(accuracy.result()),
                      "iterations": int(optimizer.iterations)}}))
"""


def data(folder: Path) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    rs = np.random.RandomState(23)
    x = rs.rand(40, 6).astype(np.float32)
    y = rs.randint(0, 3, 40).astype(np.float32)
    weights = [rs.uniform(-0.6, 0.6, s).astype(np.float32) for s in [(6, 8), (8,), (8, 3), (3,)]]
    np.save(folder / "x.npy", x)
    np.save(folder / "y.npy", y)
    for i, w in enumerate(weights):
        np.save(folder / f"w{i}.npy", w)
    return x, y, weights


@pytest.mark.parametrize("clip", [False, True])
def test_gradient_tape_loop_trains_as_keras_does(clip: bool, tmp_path: Path) -> None:
    x, y, weights = data(tmp_path)
    theirs = run_keras(KERAS_LOOP.format(clip=clip), tmp_path)

    model = keras.Sequential(
        [keras.Input((6,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)]
    )
    model.set_weights(weights)  # never compiled, as the tutorials' loops leave it
    loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = keras.optimizers.Adam(learning_rate=0.01)
    mean, accuracy = keras.metrics.Mean(), keras.metrics.SparseCategoricalAccuracy()
    losses = []

    @tf.function
    def train_step(xb: np.ndarray, yb: np.ndarray) -> float:
        with tf.GradientTape() as tape:
            predictions = model(xb, training=True)
            loss = loss_object(yb, predictions)
        grads = tape.gradient(loss, model.trainable_variables)
        if clip:  # arrays made from the tape's gradients
            grads = [np.clip(g, -0.05, 0.05) for g in grads]
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        mean(loss)
        accuracy(yb, predictions)
        return float(loss)

    for step in range(5):
        losses.append(train_step(x[step * 8 : (step + 1) * 8], y[step * 8 : (step + 1) * 8]))
    for ours, want in zip(model.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(ours, np.asarray(want, np.float32), atol=1e-5)
    assert losses == pytest.approx(theirs["losses"], abs=1e-5)
    assert float(mean.result()) == pytest.approx(theirs["mean"], abs=1e-5)
    assert float(accuracy.result()) == theirs["accuracy"]
    assert int(optimizer.iterations) == theirs["iterations"] == 5


KERAS_TRAINER = """
    import json
    import numpy as np
    import tensorflow as tf
    import keras
    x, y = np.load("x.npy"), np.load("y.npy")
    weights = [np.load(f"w{i}.npy") for i in range(4)]

    class Trainer(keras.Model):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
            self.accuracy = keras.metrics.SparseCategoricalAccuracy()

        @property
        def metrics(self):
            return [self.accuracy]

        def train_step(self, data):
            x, y = data
            with tf.GradientTape() as tape:
                y_pred = self.inner(x, training=True)
                loss = self.loss_fn(y, y_pred)
            variables = self.trainable_variables
            self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
            self.accuracy.update_state(y, y_pred)
            return {self.accuracy.name: self.accuracy.result()}

        def test_step(self, data):
            x, y = data
            self.accuracy.update_state(y, self.inner(x, training=False))
            return {self.accuracy.name: self.accuracy.result()}

        def call(self, x):
            return self.inner(x)

    inner = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(3)])
    inner.set_weights(weights)
    trainer = Trainer(inner)
    trainer.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01))
    h = trainer.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0,
                    validation_data=(x[:16], y[:16])).history
    print(json.dumps({"weights": [w.tolist() for w in inner.get_weights()],
                      "history": {k: [float(v) for v in vs] for k, vs in h.items()}}))
"""


class Trainer(keras.Model):
    def __init__(self, inner: keras.Model) -> None:
        super().__init__()
        self.inner = inner
        self.loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        self.accuracy = keras.metrics.SparseCategoricalAccuracy()

    @property
    def metrics(self) -> list:
        return [self.accuracy]

    def train_step(self, data):
        x, y = data
        with tf.GradientTape() as tape:
            y_pred = self.inner(x, training=True)
            loss = self.loss_fn(y, y_pred)
        variables = self.trainable_variables
        self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        self.accuracy.update_state(y, y_pred)
        return {self.accuracy.name: self.accuracy.result()}

    def test_step(self, data):
        x, y = data
        self.accuracy.update_state(y, self.inner(x, training=False))
        return {self.accuracy.name: self.accuracy.result()}

    def call(self, x):
        return self.inner(x)


def test_a_models_own_train_step_trains_as_keras_does(tmp_path: Path) -> None:
    x, y, weights = data(tmp_path)
    theirs = run_keras(KERAS_TRAINER, tmp_path)

    inner = keras.Sequential(
        [keras.Input((6,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(3)]
    )
    inner.set_weights(weights)
    trainer = Trainer(inner)
    trainer.compile(optimizer=keras.optimizers.Adam(learning_rate=0.01))
    h = trainer.fit(
        x, y, epochs=2, batch_size=8, shuffle=False, verbose=0, validation_data=(x[:16], y[:16])
    ).history
    for ours, want in zip(inner.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(ours, np.asarray(want, np.float32), atol=1e-5)
    assert h == theirs["history"]
