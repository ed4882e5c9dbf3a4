"""GradientTape through a model's outputs: a loss computed from model(x, training=True) with
TensorFlow's eager ops (tf.reduce_mean, tf.square, tf.nn.*, keras.losses functions, arithmetic),
differentiated with respect to model.trainable_variables by the eager ops' backward down to the
outputs, then the engine's backward pass from there (Sequential::training_backward_outputs).

References: the engine's own loss op where it computes the same loss (the gradients agree to
float32 rounding), and float64 finite differences of the model's predictions for a loss the
engine has no op for."""

import numpy as np
import pytest

import crossover as tf
from crossover import keras


def model_of(
    last_activation: str = "softmax", dropout: float = 0.0, inputs: int = 5
) -> keras.Sequential:
    layers = [keras.Input((inputs,)), keras.layers.Dense(7, activation="tanh")]
    if dropout:
        layers.append(keras.layers.Dropout(dropout))
    layers.append(keras.layers.Dense(3, activation=last_activation))
    return keras.Sequential(layers)


def data(n: int = 6, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    rs = np.random.RandomState(seed)
    return rs.rand(n, 5).astype(np.float32), rs.randint(0, 3, n)


def twin(model: keras.Sequential, last_activation: str) -> keras.Sequential:
    other = model_of(last_activation)
    other.set_weights(model.get_weights())
    return other


def engine_gradients(model: keras.Sequential, loss_object, x, y) -> list[np.ndarray]:
    """The gradients of the engine's loss op (a loss object applied to the outputs)."""
    with tf.GradientTape() as tape:
        loss = loss_object(y, model(x, training=True))
    return [np.asarray(g) for g in tape.gradient(loss, model.trainable_variables)]


def assert_close(got, want) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), w, rtol=2e-4, atol=2e-6)


@pytest.mark.parametrize(
    "activation, eager_loss, engine_loss",
    [
        (
            "softmax",
            lambda y, p: tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, p)),
            keras.losses.SparseCategoricalCrossentropy(),
        ),
        (
            "softmax",
            lambda y, p: -tf.reduce_mean(tf.reduce_sum(tf.one_hot(y, 3) * tf.math.log(p), axis=1)),
            keras.losses.SparseCategoricalCrossentropy(),
        ),
        (
            "linear",
            lambda y, p: tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=p)
            ),
            keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        ),
        (
            "sigmoid",
            lambda y, p: tf.reduce_mean(tf.square(p - tf.one_hot(y, 3))),
            keras.losses.MeanSquaredError(),
        ),
    ],
)
def test_eager_losses_give_the_engines_loss_gradients(activation, eager_loss, engine_loss):
    x, y = data()
    model = model_of(activation)
    model(x)  # builds: the weights the twin copies
    reference = twin(model, activation)
    target = np.eye(3, dtype=np.float32)[y] if activation == "sigmoid" else y
    want = engine_gradients(reference, engine_loss, x, target)
    with tf.GradientTape() as tape:
        loss = eager_loss(y, model(x, training=True))
    assert_close(tape.gradient(loss, model.trainable_variables), want)


def test_a_loss_the_engine_has_no_op_for_agrees_with_finite_differences():
    """L = sum(c * p**3) + mean(|p|): float64 central differences of the model's predictions
    (predict: the same function with no dropout), one weight at a time."""
    x, _ = data(4, seed=2)
    model = model_of("tanh")
    model(x)
    c = np.random.RandomState(3).uniform(-1, 1, (4, 3)).astype(np.float32)

    def loss_of(p):
        return tf.reduce_sum(c * p**3) + tf.reduce_mean(tf.abs(p))

    with tf.GradientTape() as tape:
        loss = loss_of(model(x, training=True))
    grads = [np.asarray(g, np.float64) for g in tape.gradient(loss, model.trainable_variables)]

    weights = [w.astype(np.float64) for w in model.get_weights()]

    def value(ws) -> float:
        model.set_weights([w.astype(np.float32) for w in ws])
        p = model.predict(x, verbose=0).astype(np.float64)
        return float(np.sum(c * p**3) + np.mean(np.abs(p)))

    h = 1e-3
    for k, w in enumerate(weights):
        for index in list(np.ndindex(w.shape))[:6]:
            plus = [v.copy() for v in weights]
            minus = [v.copy() for v in weights]
            plus[k][index] += h
            minus[k][index] -= h
            fd = (value(plus) - value(minus)) / (2 * h)
            assert grads[k][index] == pytest.approx(fd, rel=2e-2, abs=2e-3), (k, index)


def test_a_penalty_on_the_loss_and_an_optimizer_step():
    x, y = data(16, seed=4)
    model = model_of("linear", dropout=0.3)
    optimizer = keras.optimizers.Adam(learning_rate=0.05)
    ce = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    losses = []
    for _ in range(15):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = ce(y, logits) + 0.01 * tf.reduce_mean(tf.square(logits))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        losses.append(float(loss))
    assert losses[-1] < losses[0] * 0.8


def test_what_it_cannot_differentiate_is_refused():
    x, y = data()
    first, second = model_of("relu"), model_of("softmax", inputs=3)
    first(x)
    for asked, refused in [(second, False), (first, True)]:
        with tf.GradientTape() as tape:
            out = second(first(x, training=True), training=True)
            loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, out))
        if not refused:  # the second model's own variables: its backward pass, as for any input
            assert all(g is not None for g in tape.gradient(loss, asked.trainable_variables))
            continue
        # The first model's need the second's input gradient, which the engine does not give.
        with pytest.raises(NotImplementedError, match="inputs"):
            tape.gradient(loss, asked.trainable_variables)

    with tf.GradientTape(persistent=True) as tape:
        loss = tf.reduce_sum(first(x, training=True))
    tape.gradient(loss, first.trainable_variables)
    with pytest.raises(NotImplementedError, match="second gradient"):
        tape.gradient(loss, first.trainable_variables)


def test_a_loss_unconnected_to_the_model_gives_none():
    x, _ = data()
    model = model_of()
    v = tf.Variable(np.ones(3, np.float32))
    with tf.GradientTape() as tape:
        model(x, training=True)
        loss = tf.reduce_sum(v * v)
    gv, *gm = tape.gradient(loss, [v] + model.trainable_variables)
    np.testing.assert_allclose(gv, 2 * np.ones(3))
    assert gm == [None] * 4


def test_gradients_with_respect_to_model_variables_include_none_for_moving_statistics():
    """tape.gradient(loss, model.variables): the trainable weights' gradients, None for a
    BatchNormalization's moving mean and variance (not differentiable), as in TensorFlow."""
    x, y = data(8)
    model = keras.Sequential(
        [
            keras.Input((5,)),
            keras.layers.Dense(4),
            keras.layers.BatchNormalization(),
            keras.layers.Dense(3, activation="softmax"),
        ]
    )
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(keras.losses.sparse_categorical_crossentropy(y, model(x, True)))
    grads = tape.gradient(loss, model.variables)
    assert [v.name for v in model.variables] == [
        "kernel", "bias", "gamma", "beta", "moving_mean", "moving_variance", "kernel", "bias",
    ]  # fmt: skip
    assert [g is None for g in grads] == [False] * 4 + [True, True] + [False] * 2
    trainable = [g for g in grads if g is not None]
    keras.optimizers.SGD().apply_gradients(zip(trainable, model.trainable_variables))


def test_model_x_under_a_tape_with_dropout_is_inference_and_its_gradient_refused():
    """TensorFlow differentiates the inference pass of model(x); crossover's engine has only its
    training pass, which differs where dropout runs (a layer, or a custom layer's traced
    dropout): the outputs are inference's, the gradient refused by name."""
    from crossover.keras import layers

    class Noisy(layers.Layer):
        def call(self, x):
            return keras.random.dropout(x, rate=0.5)

    x, _ = data()
    for middle in (keras.layers.Dropout(0.5), Noisy()):
        model = keras.Sequential(
            [keras.Input((5,)), keras.layers.Dense(7), middle, keras.layers.Dense(3)]
        )
        with tf.GradientTape() as tape:
            out = model(x)
            loss = tf.reduce_sum(out)
        np.testing.assert_allclose(out, model.predict(x, verbose=0), rtol=1e-6)
        with pytest.raises(NotImplementedError, match="inference mode"):
            tape.gradient(loss, model.trainable_variables)
