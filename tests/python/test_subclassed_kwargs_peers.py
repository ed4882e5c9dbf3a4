"""A subclassed model whose call() takes keyword arguments of its own, called as
model(x, is_training=True) (TensorFlow's examples: `if not is_training: x = tf.nn.softmax(x)`,
`self.dropout(x, training=is_training)`, `self.bn(x, training=is_training)`), against Keras 3.15
itself from the same weights: the values of each call, batch normalization's batch statistics and
moving averages, and a GradientTape step through the training call. call() is traced once per
distinct set of those values (functional.py, Subclassed._call_variant). Keras runs in a
subprocess with the peers' Python (skipped without one)."""

from pathlib import Path

import numpy as np
import pytest

import crossover as tf
from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import run_keras

# Written once for both sides (`tf`, `keras` and `layers` are each side's).
BUILD = """
class NeuralNet(keras.Model):
    def __init__(self):
        super().__init__()
        self.fc1 = layers.Dense(16, activation=tf.nn.relu)
        self.out = layers.Dense(4)

    def call(self, x, is_training=False):
        x = tf.reshape(x, [-1, 12])
        x = self.out(self.fc1(x))
        if not is_training:
            x = tf.nn.softmax(x)
        return x


class Normed(keras.Model):
    def __init__(self):
        super().__init__()
        self.fc = layers.Dense(6)
        self.bn = layers.BatchNormalization()
        self.head = layers.Dense(3)

    def call(self, x, is_training=False):
        x = tf.nn.leaky_relu(self.bn(self.fc(x), training=is_training))
        return self.head(x)


net, normed = NeuralNet(), Normed()
"""

KERAS_SIDE = """
import json
import numpy as np
import tensorflow as tf
import keras
from keras import layers
keras.utils.set_random_seed(4)
{build}
x, y = np.load("x.npy"), np.load("y.npy")
net(x[:1]), normed(x.reshape(-1, 12)[:1])
for name, model in (("net", net), ("normed", normed)):
    for i, w in enumerate(model.get_weights()):
        np.save(f"{{name}}{{i}}.npy", w)
out = {{"infer": np.asarray(net(x, is_training=False)).tolist(),
        "default": np.asarray(net(x)).tolist(),
        "train": np.asarray(net(x, is_training=True)).tolist()}}
flat = x.reshape(-1, 12)
out["bn_train"] = np.asarray(normed(flat, is_training=True)).tolist()
out["bn_moving"] = [np.asarray(v).tolist() for v in normed.bn.get_weights()[2:]]
out["bn_infer"] = np.asarray(normed(flat)).tolist()
loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
optimizer = keras.optimizers.SGD(0.1)
with tf.GradientTape() as tape:
    loss = loss_object(y, net(x, is_training=True))
grads = tape.gradient(loss, net.trainable_variables)
optimizer.apply_gradients(zip(grads, net.trainable_variables))
out["loss"] = float(loss)
out["grads"] = [np.asarray(g).tolist() for g in grads]
out["after"] = [w.tolist() for w in net.get_weights()]
out["infer_after"] = np.asarray(net(x, is_training=False)).tolist()
print(json.dumps(out))
"""


def _close(ours, theirs, what: str, tolerance: float = 1e-5) -> None:
    np.testing.assert_allclose(np.asarray(ours), np.asarray(theirs), rtol=tolerance,
                               atol=tolerance, err_msg=what)  # fmt: skip


def test_keywords_of_call_as_keras_passes_them(tmp_path: Path) -> None:
    rs = np.random.RandomState(3)
    x = rs.rand(10, 3, 4).astype(np.float32)
    y = rs.randint(0, 4, 10).astype(np.int32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    theirs = run_keras(KERAS_SIDE.format(build=BUILD), tmp_path)
    scope = {"tf": tf, "keras": keras, "layers": layers}
    exec(BUILD, scope)
    net, normed = scope["net"], scope["normed"]
    net(x[:1]), normed(x.reshape(-1, 12)[:1])
    for name, model in (("net", net), ("normed", normed)):
        count = len(model.get_weights())
        model.set_weights([np.load(tmp_path / f"{name}{i}.npy") for i in range(count)])
    _close(net(x, is_training=False), theirs["infer"], "is_training=False: the softmax")
    _close(net(x), theirs["default"], "call()'s default")
    _close(net(x, is_training=True), theirs["train"], "is_training=True: the logits")
    flat = x.reshape(-1, 12)
    _close(normed(flat, is_training=True), theirs["bn_train"], "the batch's statistics")
    _close(normed.bn.get_weights()[2:], theirs["bn_moving"], "the moving averages")
    _close(normed(flat), theirs["bn_infer"], "inference, after the moving averages moved")
    # A GradientTape step through model(x, is_training=True): Keras's loss, gradients, update.
    loss_object = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = keras.optimizers.SGD(0.1)
    with tf.GradientTape() as tape:
        loss = loss_object(y, net(x, is_training=True))
    grads = tape.gradient(loss, net.trainable_variables)
    optimizer.apply_gradients(zip(grads, net.trainable_variables))
    _close(float(loss), theirs["loss"], "loss")
    for i, (g, t) in enumerate(zip(grads, theirs["grads"])):
        _close(g, t, f"gradient {i}")
    for i, (w, t) in enumerate(zip(net.get_weights(), theirs["after"])):
        _close(w, t, f"weight {i} after the step")
    _close(net(x, is_training=False), theirs["infer_after"], "inference after the step")


class Dropped(keras.Model):
    def __init__(self):
        super().__init__()
        self.fc = layers.Dense(64)
        self.dropout = layers.Dropout(0.5)

    def call(self, x, is_training=False):
        return self.dropout(self.fc(x), training=is_training)


def test_dropout_follows_the_keyword() -> None:
    """Keras's meaning of `self.dropout(x, training=is_training)`: dropout on in
    model(x, is_training=True) (each value 0 or twice the inference one), off otherwise."""
    model = Dropped()
    x = np.random.RandomState(0).rand(32, 8).astype(np.float32)
    kept = model(x).numpy()
    np.testing.assert_allclose(model(x, is_training=False).numpy(), kept, rtol=1e-6)
    dropped = model(x, is_training=True).numpy()
    zero = dropped == 0
    assert 0.35 < zero.mean() < 0.65
    np.testing.assert_allclose(dropped[~zero], 2 * kept[~zero], rtol=1e-5)
    # training= itself still picks the mode where the keyword leaves it to the call.
    assert model.built and [l.name for l in model.layers] == ["dense", "dropout"]


def test_keyword_rules() -> None:
    class Mixed(keras.Model):
        def __init__(self):
            super().__init__()
            self.fc = layers.Dense(4)
            self.a, self.b = layers.Dropout(0.5), layers.Dropout(0.5)

        def call(self, x, flag=False):
            return self.b(self.a(self.fc(x), training=flag), training=not flag)

    x = np.ones((2, 3), np.float32)
    with pytest.raises(NotImplementedError, match="training mode and others in inference"):
        Mixed()(x, flag=True)
    model = Dropped()
    with pytest.raises(TypeError, match="got an unexpected keyword argument 'foo'"):
        model(x, foo=1)
    with pytest.raises(NotImplementedError, match="is_training=<ndarray>"):
        model(x, is_training=np.array([True, False]))
    model.compile("adam", "mse")  # fit's graph is call()'s with its defaults
    h = model.fit(x, np.zeros((2, 64), np.float32), epochs=1, verbose=0).history
    assert len(h["loss"]) == 1 and model(x, is_training=True).shape == (2, 64)
