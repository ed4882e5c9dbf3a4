"""optimizers.schedules.ExponentialDecay: the engine's per-step rate, as Keras computes it."""

import numpy as np
import pytest

from crossover import keras


def sgd_linear_run(learning_rate, x, y):
    """Dense(1, no bias), mse, plain SGD, one sample per step, in order: the weights after."""
    model = keras.Sequential([keras.layers.Input(shape=(3,)), keras.layers.Dense(1, use_bias=False)])
    model.set_weights([np.array([[0.5], [-0.25], [0.125]], dtype=np.float32)])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=learning_rate), loss="mse")
    model.fit(x, y, batch_size=1, epochs=1, shuffle=False, verbose=0)
    return model.get_weights()[0][:, 0]


def reference(schedule, x, y):
    """The same steps in float64 numpy: w -= lr(t) * d/dw (x.w - y)^2."""
    w = np.array([0.5, -0.25, 0.125])
    for t in range(len(x)):
        g = 2.0 * (x[t] @ w - y[t]) * x[t]
        w = w - schedule(t) * g
    return w


@pytest.fixture
def data():
    rng = np.random.default_rng(7)
    return rng.normal(size=(12, 3)).astype(np.float32), rng.normal(size=(12, 1)).astype(
        np.float32
    )


@pytest.mark.parametrize("staircase", [False, True])
def test_exponential_decay_gives_keras_rate_at_every_step(data, staircase):
    x, y = data
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 4, 0.5, staircase=staircase)
    got = sgd_linear_run(schedule, x, y)
    want = reference(schedule, x.astype(np.float64), y[:, 0].astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    constant = sgd_linear_run(0.1, x, y)
    assert not np.allclose(got, constant, rtol=1e-3)  # the decay changed the run


def test_schedule_call_matches_keras_formula():
    s = keras.optimizers.schedules.ExponentialDecay(0.01, 10, 0.9)
    assert s(0) == pytest.approx(0.01)
    assert s(25) == pytest.approx(0.01 * 0.9**2.5)
    stair = keras.optimizers.schedules.ExponentialDecay(0.01, 10, 0.9, staircase=True)
    assert stair(25) == pytest.approx(0.01 * 0.9**2)


def test_a_python_schedule_is_refused_with_a_type_error():
    class Halving(keras.optimizers.schedules.LearningRateSchedule):
        def __call__(self, step):
            return 0.1 / (1 + step)

    with pytest.raises(TypeError, match="ExponentialDecay"):
        keras.optimizers.Adam(learning_rate=Halving())
    with pytest.raises(TypeError, match="ExponentialDecay"):
        keras.optimizers.SGD(learning_rate=lambda step: 0.1)


def test_other_keras_schedules_say_what_is_there():
    with pytest.raises(AttributeError, match="ExponentialDecay"):
        keras.optimizers.schedules.CosineDecay


@pytest.mark.parametrize("steps, rate", [(0, 0.5), (4, 0.0), (4, -1.0)])
def test_bad_schedule_arguments_are_value_errors(steps, rate):
    with pytest.raises(ValueError, match="ExponentialDecay"):
        keras.optimizers.schedules.ExponentialDecay(0.1, steps, rate)


def scheduled_model():
    model = keras.Sequential([keras.layers.Input(shape=(3,)), keras.layers.Dense(1)])
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 4, 0.5)
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=schedule), loss="mse")
    return model, schedule


def test_a_callback_that_sets_a_scheduled_rate_is_a_keras_type_error(data):
    # Keras 3: LearningRateScheduler sets the rate at every epoch's start, and an optimizer built
    # with a schedule refuses (TypeError). crossover used to replace the schedule by a constant.
    x, y = data
    model, schedule = scheduled_model()
    scheduler = keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr)
    with pytest.raises(TypeError, match="its learning rate is not settable"):
        model.fit(x, y, epochs=2, verbose=0, callbacks=[scheduler])
    assert model.optimizer.learning_rate == pytest.approx(0.1)  # no step taken: the schedule's start
    # ReduceLROnPlateau only when it reduces (Keras fails there, not before): a plateau of 0
    # epochs with a min_delta nothing meets reduces at the second epoch.
    plateau = keras.callbacks.ReduceLROnPlateau(monitor="loss", patience=0, min_delta=100.0)
    with pytest.raises(TypeError, match="its learning rate is not settable"):
        model.fit(x, y, epochs=2, verbose=0, callbacks=[plateau])
    patient = keras.callbacks.ReduceLROnPlateau(monitor="loss", patience=100)
    model.fit(x, y, epochs=2, batch_size=4, verbose=0, callbacks=[patient])
    # Still the schedule, at the steps taken so far: none in the first fit (refused before its
    # first step), 2 in the second (12 samples, batch 32: a step an epoch; refused at the end of
    # its second), 6 in the last (batch 4).
    assert model.optimizer.iterations == 0 + 2 + 6
    assert model.optimizer.learning_rate == pytest.approx(schedule(model.optimizer.iterations))
    assert model.optimizer.learning_rate == pytest.approx(schedule(model.optimizer.iterations))
