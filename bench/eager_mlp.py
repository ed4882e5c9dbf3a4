"""The low-level "MLP from scratch" script (tf.Variable, tf.GradientTape, tf.nn ops,
optimizer.apply_gradients) on MNIST-10k, timed per epoch. The same file runs on TensorFlow
(`python bench/eager_mlp.py`) and on crossover (`python -m crossover bench/eager_mlp.py`):

    build/venv/bin/python -m crossover bench/eager_mlp.py [epochs]
    bench/peers/.venv/bin/python bench/eager_mlp.py [epochs]

It prints one line per epoch: the seconds, the mean loss and the accuracy on the training set."""

import os
import sys
import time

import numpy as np
import tensorflow as tf

here = os.path.dirname(os.path.abspath(__file__))
with np.load(os.path.join(here, "..", "data", "mnist-10k", "mnist-10k.npz")) as d:
    x_train = (d["x_train"].reshape(-1, 784) / 255.0).astype(np.float32)
    y_train = d["y_train"].astype(np.int32)
epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
batch = 32

tf.random.set_seed(1)
W1 = tf.Variable(tf.random.normal([784, 128], stddev=0.05))
b1 = tf.Variable(tf.zeros([128]))
W2 = tf.Variable(tf.random.normal([128, 10], stddev=0.05))
b2 = tf.Variable(tf.zeros([10]))
variables = [W1, b1, W2, b2]
optimizer = tf.keras.optimizers.Adam(learning_rate=0.001)

for epoch in range(epochs):
    start = time.perf_counter()
    losses = []
    for i in range(0, len(x_train), batch):
        x, y = x_train[i : i + batch], y_train[i : i + batch]
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.matmul(x, W1) + b1)
            logits = tf.matmul(h, W2) + b2
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            )
        grads = tape.gradient(loss, variables)
        optimizer.apply_gradients(zip(grads, variables))
        losses.append(float(loss))
    seconds = time.perf_counter() - start
    logits = tf.matmul(tf.nn.relu(tf.matmul(x_train, W1) + b1), W2) + b2
    accuracy = float(tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y_train), tf.float32)))
    print(
        f"epoch {epoch + 1}: {seconds:.3f} s, loss {np.mean(losses):.4f}, accuracy {accuracy:.4f}"
    )
