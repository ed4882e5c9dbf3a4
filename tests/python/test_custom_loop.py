"""Custom training loops: tf.function, GradientTape's refusals (NotImplementedError naming what
was asked, never a wrong number), and a model's own train_step/test_step run by fit's loop."""

import numpy as np
import pytest

import crossover as tf
from crossover import keras


def mlp(dropout: float = 0.0) -> keras.Sequential:
    layers = [keras.Input((6,)), keras.layers.Dense(8, activation="relu")]
    if dropout:
        layers.append(keras.layers.Dropout(dropout))
    return keras.Sequential(layers + [keras.layers.Dense(3)])


def batch(n: int = 8, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rs = np.random.RandomState(seed)
    return rs.rand(n, 6).astype(np.float32), rs.randint(0, 3, n).astype(np.float32)


LOSS = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def test_function_returns_the_function_with_or_without_arguments() -> None:
    def f(a: int) -> int:
        return a + 1

    assert tf.function(f) is f
    assert tf.function(jit_compile=True, reduce_retracing=True)(f) is f


def test_a_step_lowers_the_loss_and_counts_iterations() -> None:
    model, (x, y) = mlp(), batch(32)
    optimizer = keras.optimizers.Adam(learning_rate=0.05)
    losses = []
    for _ in range(20):
        with tf.GradientTape() as tape:
            loss = LOSS(y, model(x, training=True)) + sum(model.losses)
        grads = tape.gradient(loss, model.trainable_variables)
        assert [g.shape for g in grads] == [(6, 8), (8,), (8, 3), (3,)]
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        losses.append(float(loss))
    assert losses[-1] < losses[0] * 0.8
    assert int(optimizer.iterations) == 20


def test_outputs_under_training_are_the_engines_training_pass() -> None:
    model, (x, _) = mlp(dropout=0.5), batch()
    trained, inferred = np.asarray(model(x, training=True)), np.asarray(model(x))
    assert trained.shape == inferred.shape == (8, 3)
    assert not np.array_equal(trained, inferred)  # dropout on only in training


def refusal(f) -> str:
    with pytest.raises(NotImplementedError) as e:
        f()
    assert "not supported (yet)" in str(e.value)
    return str(e.value)


def test_what_the_tape_cannot_differentiate_is_refused() -> None:
    model, other, (x, y) = mlp(), mlp(), batch()
    other(x)

    with tf.GradientTape(persistent=True) as tape:
        loss = LOSS(y, model(x, training=True))
        doubled = loss * 2.0
    # Any subset of the variables, in the order asked (the engine's loss op and backward pass).
    kernel = tape.gradient(loss, model.trainable_variables[2])
    assert kernel.shape == (8, 3)
    # One backward pass per model call: a second gradient through it is refused.
    assert "second gradient" in refusal(lambda: tape.gradient(doubled, model.weights))

    with tf.GradientTape() as tape:
        doubled = LOSS(y, model(x, training=True)) * 2.0  # eager ops on the loss: recorded
    np.testing.assert_allclose(
        tape.gradient(doubled, model.trainable_variables[2]), 2 * kernel, rtol=1e-5, atol=1e-7
    )
    with tf.GradientTape() as tape:
        loss = LOSS(y, model(x, training=True))
    # Another model's variables: the loss does not depend on them (TensorFlow's None).
    assert tape.gradient(loss, other.trainable_variables) == [None] * 4
    with pytest.raises(ValueError, match="watch"):  # TensorFlow: not a tensor or variable
        tape.watch(np.zeros(3))

    with tf.GradientTape() as tape:
        first = model(x, training=True)
        model(x, training=True)  # the model ran again: the first pass is gone
        loss = LOSS(y, first)
    assert "ran again" in refusal(lambda: tape.gradient(loss, model.trainable_variables))

    with tf.GradientTape() as tape:
        loss = LOSS(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    with pytest.raises(RuntimeError, match="non-persistent"):
        tape.gradient(loss, model.trainable_variables)
    optimizer = keras.optimizers.Adam()
    variables = model.trainable_variables
    assert "missing" in refusal(
        lambda: optimizer.apply_gradients(zip(grads[:2], variables[:2]))
    )
    assert "None" in refusal(lambda: optimizer.apply_gradients(zip([None] * 4, variables)))
    assert "two models" in refusal(
        lambda: optimizer.apply_gradients(
            zip(grads + grads, variables + other.trainable_variables)
        )
    )
    assert "variable 0" in refusal(lambda: optimizer.apply_gradients([(grads[0], np.zeros(3))]))


def test_from_logits_on_a_softmax_output_takes_its_input_back() -> None:
    """Keras 3 on TensorFlow: from_logits=True on a final softmax's outputs takes the softmax's
    input back as the logits (as fit does); on a relu's outputs, the outputs are the logits."""
    x, y = batch()
    soft = keras.Sequential([keras.Input((6,)), keras.layers.Dense(3, activation="softmax")])
    linear = keras.Sequential([keras.Input((6,)), keras.layers.Dense(3)])
    relu = keras.Sequential([keras.Input((6,)), keras.layers.Dense(3, activation="relu")])
    soft(x)
    linear.set_weights(soft.get_weights())
    relu.set_weights(soft.get_weights())
    results = []
    for model in (soft, linear, relu):
        with tf.GradientTape() as tape:
            out = model(x, training=True)
            loss = LOSS(y, out)
        results.append((float(loss), tape.gradient(loss, model.trainable_variables)))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-6)
    for g, h in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(g, h, rtol=1e-5, atol=1e-7)
    z = np.maximum(x @ soft.get_weights()[0] + soft.get_weights()[1], 0).astype(np.float64)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    assert results[2][0] == pytest.approx(-logp[np.arange(8), y.astype(int)].mean(), rel=1e-5)


class Trainer(keras.Model):
    """The trainer pattern: a model's own train_step/test_step around an inner model."""

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
        return {"loss": loss, self.accuracy.name: self.accuracy.result()}

    def test_step(self, data):
        x, y = data
        self.accuracy.update_state(y, self.inner(x, training=False))
        return {self.accuracy.name: self.accuracy.result()}

    def call(self, x):
        return self.inner(x)


def test_a_models_own_train_step_is_fits_step(capsys: pytest.CaptureFixture) -> None:
    x, y = batch(96, seed=3)
    inner = mlp()
    trainer = Trainer(inner)
    with pytest.raises(ValueError, match="give a loss"):
        inner.compile(optimizer="adam")  # without its own train_step a loss is needed
    trainer.compile(optimizer=keras.optimizers.Adam(learning_rate=0.05))
    h = trainer.fit(x, y, epochs=3, batch_size=16, validation_data=(x, y), verbose=2)
    assert sorted(h.history) == ["loss", "sparse_categorical_accuracy",
                                 "val_sparse_categorical_accuracy"]  # fmt: skip
    assert h.history["loss"][-1] < h.history["loss"][0]
    assert int(trainer.optimizer.iterations) == 18
    out = capsys.readouterr().out
    assert "Epoch 3/3" in out and "val_sparse_categorical_accuracy" in out
    accuracy = trainer.evaluate(x, y, verbose=0)
    assert accuracy == pytest.approx(h.history["val_sparse_categorical_accuracy"][-1])
    # The inner model trained: its own predictions are the trainer's.
    np.testing.assert_array_equal(inner.predict(x, verbose=0), trainer.predict(x, verbose=0))


def test_a_functional_model_called_by_a_train_step_model() -> None:
    inputs = keras.Input((2, 3))
    flat = keras.layers.Flatten(input_shape=(9,))(inputs)  # ignored here, as in Keras
    hidden = keras.layers.Dense(8, activation="relu")(flat)
    inner = keras.Model(inputs, keras.layers.Dense(3)(hidden))
    x, y = batch(48, seed=4)
    x = x.reshape(48, 2, 3)
    trainer = Trainer(inner)
    trainer.compile(optimizer=keras.optimizers.Adam(learning_rate=0.05))
    h = trainer.fit(x, y, epochs=2, batch_size=16, verbose=0)
    assert len(h.history["loss"]) == 2
    np.testing.assert_array_equal(inner.predict(x, verbose=0), trainer.predict(x, verbose=0))


def test_a_loss_outside_the_tapes_with_is_not_recorded() -> None:
    model, (x, y) = mlp(), batch()
    with tf.GradientTape() as tape:
        out = model(x, training=True)
    loss = LOSS(y, out)  # after the tape stopped recording: TensorFlow's value, no gradient
    assert float(loss) == pytest.approx(float(keras.losses.SparseCategoricalCrossentropy(
        from_logits=True)(y, np.asarray(out))))  # fmt: skip
    assert tape.gradient(loss, model.trainable_variables) == [None] * 4  # TensorFlow's


def test_keras3_apply_is_apply_gradients() -> None:
    (x, y), models = batch(), [mlp(), mlp()]
    models[1].set_weights(models[0].get_weights())
    optimizers = [keras.optimizers.Adam(), keras.optimizers.Adam()]
    for model, optimizer, keras3 in zip(models, optimizers, [False, True]):
        with tf.GradientTape() as tape:
            loss = LOSS(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_weights)
        if keras3:
            optimizer.apply(grads, model.trainable_weights)
        else:
            optimizer.apply_gradients(zip(grads, model.trainable_weights))
    for a, b in zip(*(m.get_weights() for m in models)):
        np.testing.assert_array_equal(a, b)


def test_fit_arguments_a_train_step_loop_does_not_run_are_refused() -> None:
    x, y = batch(16)
    trainer = Trainer(mlp())
    trainer.compile(optimizer="adam")
    for kwargs in ({"steps_per_epoch": 2}, {"class_weight": {0: 2.0}}):
        with pytest.raises(ValueError, match="not supported"):
            trainer.fit(x, y, verbose=0, **kwargs)


def test_sample_weights_reach_a_models_own_train_step() -> None:
    """Keras's data: (x, y, sample_weight) for each batch, the weights of its rows."""
    x, y = batch(16)
    seen = []

    class Weighted(Trainer):
        def train_step(self, data):
            seen.append(np.asarray(data[2]).copy() if len(data) == 3 else None)
            return super().train_step(data[:2])

    trainer = Weighted(mlp())
    trainer.compile(optimizer="adam")
    weights = np.arange(16, dtype=np.float32)
    trainer.fit(x, y, batch_size=8, shuffle=False, sample_weight=weights, verbose=0)
    np.testing.assert_array_equal(np.concatenate(seen), weights)


def test_a_loss_object_on_the_outputs_is_the_engines_split_step() -> None:
    """The target that is a loss object's value on model(x, training=True) is differentiated by
    the engine's loss op and backward pass (fit's step split), not through the eager ops: its
    gradients are the engine's training_backward's, bit for bit."""
    model, (x, y) = mlp(), batch(16)
    with tf.GradientTape() as tape:
        loss = LOSS(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    core = model._device_model()
    core.training_forward(np.ascontiguousarray(x))
    _, want = core.training_backward(
        np.ascontiguousarray(y), "sparse_categorical_crossentropy", True
    )
    for g, (_, w) in zip(grads, want):
        np.testing.assert_array_equal(np.asarray(g), w)
