"""optimizer.apply_gradients on tf.Variables (a from-scratch loop): the CPU backend's own update
through _core.ArrayOptimizer, Keras's rules for None gradients, its iteration count, a learning
rate set between steps; what it cannot update is refused by name."""

import numpy as np
import pytest

import crossover as tf


def test_sgd_updates_the_variables_by_keras_rule() -> None:
    w, b = tf.Variable([1.0, 2.0]), tf.Variable(0.5)
    optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)
    read_before = w.read_value()
    assert int(optimizer.apply_gradients([(tf.constant([1.0, -1.0]), w), (2.0, b)])) == 1
    np.testing.assert_allclose(w.numpy(), [0.9, 2.1], rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), 0.3, rtol=1e-6)
    np.testing.assert_array_equal(read_before, [1.0, 2.0])  # a value read keeps its numbers
    optimizer.learning_rate = 1.0
    optimizer.apply_gradients([(tf.constant([1.0, 1.0]), w)])
    np.testing.assert_allclose(w.numpy(), [-0.1, 1.1], rtol=1e-6)
    assert int(optimizer.iterations) == 2


def test_adam_keeps_its_state_per_variable() -> None:
    w = tf.Variable([0.0])
    optimizer = tf.keras.optimizers.Adam(learning_rate=0.1)
    for _ in range(3):
        optimizer.apply_gradients([(tf.constant([1.0]), w)])
    # Adam with a constant gradient moves by the learning rate each step (m / sqrt(v) = 1).
    np.testing.assert_allclose(w.numpy(), [-0.3], rtol=1e-4)
    assert int(optimizer.iterations) == 3


def test_none_gradients_are_skipped_and_what_cannot_be_updated_is_refused() -> None:
    w, unused = tf.Variable([1.0]), tf.Variable([5.0])
    optimizer = tf.keras.optimizers.SGD(learning_rate=1.0)
    with pytest.warns(UserWarning, match="Gradients do not exist"):
        optimizer.apply_gradients([(tf.constant([1.0]), w), (None, unused)])
    assert w.numpy().tolist() == [0.0] and unused.numpy().tolist() == [5.0]
    with pytest.raises(ValueError, match="No gradients provided"):
        optimizer.apply_gradients([(None, w)])
    with pytest.raises(NotImplementedError, match="float64"):
        optimizer.apply_gradients([(np.zeros(2), tf.Variable(np.zeros(2)))])
    with pytest.raises(ValueError, match="shape"):
        optimizer.apply_gradients([(tf.zeros([3]), w)])
