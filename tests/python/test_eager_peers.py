"""TensorFlow's eager ops and a from-scratch MLP (tf.Variable, tf.GradientTape,
optimizer.apply_gradients) against TensorFlow 2.21: one script, run by TensorFlow in a
subprocess with the peers' Python ($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python)
and here on crossover; the ops' values and gradients and the weights after a few training steps
of each optimizer agree. Without the peers' Python, skipped."""

import json
from pathlib import Path

import numpy as np
import pytest

from test_keras_archive_peers import run_keras

SCRIPT = """
import json
import numpy as np
{imports}

rs = np.random.RandomState(7)
x = rs.uniform(-1, 1, (6, 5)).astype(np.float32)
labels = rs.randint(0, 3, 6).astype(np.int32)
dense = rs.dirichlet(np.ones(5), 6).astype(np.float32)
other = rs.uniform(-1, 1, (4, 5)).astype(np.float32)
X = tf.constant(x)
OPS = {{
    "relu": lambda a: tf.nn.relu(a),
    "sigmoid": lambda a: tf.nn.sigmoid(a),
    "tanh": lambda a: tf.nn.tanh(a),
    "softmax": lambda a: tf.nn.softmax(a),
    "log_softmax": lambda a: tf.nn.log_softmax(a, axis=0),
    "leaky_relu": lambda a: tf.nn.leaky_relu(a, alpha=0.1),
    "elu": lambda a: tf.nn.elu(a),
    "softplus": lambda a: tf.nn.softplus(a),
    "exp": lambda a: tf.exp(a),
    "log": lambda a: tf.math.log(a * a + 1.0),
    "sqrt": lambda a: tf.sqrt(a * a + 1.0),
    "square abs": lambda a: tf.square(a) + tf.abs(a),
    "pow": lambda a: tf.pow(a * a + 1.0, 1.5) - 2.0 ** a,
    "divide": lambda a: tf.divide(a, a * a + 1.0) / 3.0,
    "max min": lambda a: tf.maximum(a, 0.2) * tf.minimum(a, -0.1),
    "reduce_sum": lambda a: tf.reduce_sum(a * a, axis=1, keepdims=True),
    "reduce_mean": lambda a: tf.reduce_mean(a, axis=0),
    "reduce_max": lambda a: tf.reduce_max(a, axis=1),
    "reduce_min": lambda a: tf.reduce_min(a),
    "sin cos": lambda a: tf.sin(a) * tf.cos(2.0 * a),
    "tile": lambda a: tf.tile(a, [2, 3]) * 1.5,
    "where": lambda a: tf.where(a > 0.1, a * a, -a),
    "floor round": lambda a: a * tf.floor(a * 3.0) + tf.round(a * 2.0),
    "matmul": lambda a: tf.matmul(a, other, transpose_b=True),
    "matmul ta": lambda a: tf.matmul(a, tf.constant(dense), transpose_a=True),
    "slices": lambda a: a[:, 0, None] * a[1:3, 2:4][0, 1] + a[-1],
    "reshape transpose": lambda a: tf.transpose(tf.reshape(a, [3, 10])) * tf.range(3.0),
    "clip": lambda a: tf.clip_by_value(a, -0.3, 0.4),
    "concat stack": lambda a: tf.concat([a, tf.stack([a[0], a[1]])], axis=0) ** 2,
    "cast": lambda a: tf.cast(tf.cast(a, tf.float64) * 2.0, tf.float32),
    "sparse xent": lambda a: tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=a
    ),
    "xent": lambda a: tf.nn.softmax_cross_entropy_with_logits(labels=dense, logits=a),
    "sigmoid xent": lambda a: tf.nn.sigmoid_cross_entropy_with_logits(labels=dense, logits=a),
    "l2_loss": lambda a: tf.nn.l2_loss(a),
    "one_hot argmax": lambda a: a * tf.one_hot(tf.argmax(a, axis=1), 5),
    "equal": lambda a: a * tf.cast(tf.equal(tf.argmin(a, axis=1), 2), tf.float32)[:, None],
}}
out = {{}}
for name, f in OPS.items():
    with tf.GradientTape() as tape:
        tape.watch(X)
        v = f(X)
    g = tape.gradient(v, X)
    out[name] = [np.asarray(v).tolist(), None if g is None else np.asarray(g).tolist()]

weights = [rs.uniform(-0.5, 0.5, s).astype(np.float32) for s in [(5, 8), (8,), (8, 3), (3,)]]
OPTIMIZERS = {{
    "sgd": lambda: tf.keras.optimizers.SGD(0.1),
    "sgd nesterov": lambda: tf.keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True),
    "adam": lambda: tf.keras.optimizers.Adam(0.01),
    "rmsprop": lambda: tf.keras.optimizers.RMSprop(0.01, momentum=0.5),
    "adagrad": lambda: tf.keras.optimizers.Adagrad(0.1),
    "adamw clipnorm": lambda: tf.keras.optimizers.AdamW(0.01, clipnorm=0.5),
}}
for name, make in OPTIMIZERS.items():
    W1, b1, W2, b2 = variables = [tf.Variable(w) for w in weights]
    optimizer = make()
    losses = []
    for step in range(5):
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.matmul(X, W1) + b1)
            logits = tf.matmul(h, W2) + b2
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
            )
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables))
        losses.append(float(loss))
    out[name] = {{
        "losses": losses,
        "weights": [v.numpy().tolist() for v in variables],
        "iterations": int(optimizer.iterations),
    }}
print(json.dumps(out))
"""


def test_eager_ops_and_a_from_scratch_mlp_match_tensorflow(tmp_path: Path) -> None:
    theirs = run_keras(SCRIPT.format(imports="import tensorflow as tf"), tmp_path)
    scope: dict = {}
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(SCRIPT.format(imports="import crossover as tf"), scope)
    ours = json.loads(printed.getvalue().strip().splitlines()[-1])
    assert list(ours) == list(theirs)
    for name, value in theirs.items():
        if isinstance(value, dict):  # a training run
            assert ours[name]["iterations"] == value["iterations"] == 5
            np.testing.assert_allclose(ours[name]["losses"], value["losses"], rtol=1e-5)
            for mine, tf_weights in zip(ours[name]["weights"], value["weights"]):
                np.testing.assert_allclose(mine, tf_weights, rtol=1e-4, atol=1e-5, err_msg=name)
            continue
        np.testing.assert_allclose(ours[name][0], value[0], rtol=1e-5, atol=1e-6, err_msg=name)
        if value[1] is None:
            assert ours[name][1] is None, name
        else:
            np.testing.assert_allclose(ours[name][1], value[1], rtol=1e-5, atol=1e-6, err_msg=name)
