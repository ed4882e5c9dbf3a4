"""Keras 3.15's Adam(amsgrad=True), and AdamW's, without Keras at hand: the argument, get_config
and from_config, the engine's update through apply_gradients against a float64 evaluation of
Keras's formula (keras/src/optimizers/adam.py) with a gradient that falls, so that velocity_hat
(the running maximum of v) is what divides the step, training with fit, the third slot the
engine keeps per weight, and the optimizer through a model's JSON and a .keras archive (the
comparison with Keras itself is test_amsgrad_peers.py)."""

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers


def keras_adam(w0, grads, lr, beta_1=0.9, beta_2=0.999, epsilon=1e-7, amsgrad=True):
    """Keras's Adam.update_step in float64 over the steps of `grads` (a list per step of one
    gradient per weight): betas raised to t as float32 values, 1 - beta from the double."""
    w = [np.asarray(x, np.float64).copy() for x in w0]
    m = [np.zeros_like(x) for x in w]
    v = [np.zeros_like(x) for x in w]
    v_hat = [np.zeros_like(x) for x in w]
    for t, step in enumerate(grads, 1):
        b1t = float(np.float32(beta_1)) ** t
        b2t = float(np.float32(beta_2)) ** t
        alpha = lr * np.sqrt(1 - b2t) / (1 - b1t)
        for i, g in enumerate(step):
            g = np.asarray(g, np.float64)
            m[i] += (g - m[i]) * (1 - beta_1)
            v[i] += (g * g - v[i]) * (1 - beta_2)
            denominator = v[i]
            if amsgrad:
                v_hat[i] = np.maximum(v_hat[i], v[i])
                denominator = v_hat[i]
            w[i] -= m[i] * alpha / (np.sqrt(denominator) + epsilon)
    return w, v, v_hat


def falling(g0, t):
    """A gradient a hundred times smaller after two steps (and of changing sign): v falls."""
    return g0 * (1.0 if t <= 2 else 0.01 * (1 + 0.3 * t)) * (-1.0 if t % 3 == 2 else 1.0)


def small_model() -> keras.Sequential:
    return keras.Sequential(
        [keras.Input((4,)), layers.Dense(5, activation="relu"), layers.Dense(3, "softmax")]
    )


def data():
    rs = np.random.RandomState(5)
    return rs.rand(32, 4).astype(np.float32), rs.randint(0, 3, 32).astype(np.float32)


@pytest.mark.parametrize("cls", ["Adam", "AdamW"])
def test_amsgrad_is_taken_and_in_get_config(cls: str) -> None:
    opt = getattr(keras.optimizers, cls)(learning_rate=0.01, amsgrad=True)
    config = opt.get_config()
    assert config["amsgrad"] is True
    assert getattr(keras.optimizers, cls)().get_config()["amsgrad"] is False
    back = type(opt).from_config(config)
    assert type(back) is type(opt)
    assert back.get_config() == config
    assert back.amsgrad is True
    if cls == "AdamW":
        assert config["weight_decay"] == pytest.approx(0.004)


def test_optimizers_without_amsgrad_refuse_it_as_keras_does() -> None:
    # Keras's Nadam and Adamax have no amsgrad: an unknown argument.
    for cls in ("Nadam", "Adamax", "SGD"):
        with pytest.raises(ValueError, match="not recognized"):
            getattr(keras.optimizers, cls)(amsgrad=True)


def test_apply_gradients_follows_kerass_formula_as_v_falls() -> None:
    # Dense(2) on 3 inputs: a kernel and a bias, each given its gradient for eight steps.
    model = keras.Sequential([keras.Input((3,)), layers.Dense(2)])
    opt = keras.optimizers.Adam(learning_rate=0.1, beta_2=0.9, amsgrad=True)
    model.compile(optimizer=opt, loss="mse")
    model(np.zeros((1, 3), np.float32))  # runs it once: its variables are the engine's
    w0 = model.get_weights()
    g0 = [np.array([[0.1, -0.2], [0.3, 1e-3], [-0.05, 0.2]]), np.array([0.1, -0.3])]
    grads = [[falling(g, t) for g in g0] for t in range(1, 9)]
    for step in grads:
        opt.apply_gradients(zip([g.astype(np.float32) for g in step], model.trainable_variables))
    assert int(opt.iterations) == 8
    want, v, v_hat = keras_adam(w0, grads, 0.1, beta_2=0.9)
    plain, _, _ = keras_adam(w0, grads, 0.1, beta_2=0.9, amsgrad=False)
    assert all((h > u).any() for h, u in zip(v_hat, v))  # v fell below its maximum
    for mine, theirs, adam in zip(model.get_weights(), want, plain):
        np.testing.assert_allclose(mine, theirs, rtol=0, atol=3e-6)
        assert np.abs(theirs - adam).max() > 1e-4  # amsgrad changed the weights


def test_fit_trains_and_the_engine_keeps_a_third_slot_per_weight() -> None:
    x, y = data()
    model = small_model()
    model.compile(
        optimizer=keras.optimizers.Adam(0.05, amsgrad=True), loss="sparse_categorical_crossentropy"
    )
    model.build((None, 4))
    before = model.get_weights()
    h = model.fit(x, y, epochs=3, batch_size=8, shuffle=False, verbose=0).history
    assert all(np.isfinite(h["loss"])) and h["loss"][-1] < h["loss"][0]
    assert np.abs(model.get_weights()[0] - before[0]).max() > 1e-3
    core = model._core
    assert core.optimizer.amsgrad
    names = core.optimizer_state_names()
    assert len(names) == 4 * 3 + 1
    assert [n.rsplit("/", 1)[1] for n in names[:3]] == ["slot1", "slot2", "slot3"]
    # summary()'s "Optimizer params" counts velocity_hat as Keras's optimizer.variables does.
    trainable = sum(w.size for w in before)
    lines = []
    model.summary(print_fn=lines.append)
    assert f"Optimizer params: {3 * trainable + 2:,}" in "\n".join(lines)


def test_amsgrad_survives_the_models_json_and_a_keras_archive(tmp_path: Path) -> None:
    x, y = data()
    model = small_model()
    model.compile(
        optimizer=keras.optimizers.AdamW(learning_rate=0.01, amsgrad=True),
        loss="sparse_categorical_crossentropy",
    )
    model.fit(x, y, epochs=1, batch_size=8, verbose=0)
    config = json.loads(model.to_json())["compile_config"]["optimizer"]["config"]
    assert config["amsgrad"] is True
    path = tmp_path / "m.keras"
    model.save(path)
    with zipfile.ZipFile(path) as zf:
        saved = json.loads(zf.read("config.json"))["compile_config"]["optimizer"]["config"]
    assert saved["amsgrad"] is True and saved["weight_decay"] == pytest.approx(0.004)
    loaded = keras.models.load_model(path)
    assert loaded.optimizer.get_config()["amsgrad"] is True
    # The loaded model trains with the third slot (its optimizer state starts afresh, as after
    # every load_model of a crossover archive).
    assert loaded._core.optimizer.amsgrad
    for a, b in zip(loaded.get_weights(), model.get_weights()):
        np.testing.assert_array_equal(a, b)
    loaded.fit(x, y, epochs=1, batch_size=8, verbose=0)
    assert len(loaded._core.optimizer_state_names()) == 4 * 3 + 1


def test_a_custom_loop_switching_to_amsgrad_gets_its_slot() -> None:
    # A model compiled with plain Adam, then stepped by another optimizer with amsgrad: that
    # optimizer's fresh state, with velocity_hat, on the same weights.
    x, y = data()
    model = small_model()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    model.fit(x, y, epochs=1, batch_size=8, verbose=0)
    weights = model.get_weights()
    other = keras.optimizers.Adam(learning_rate=0.01, amsgrad=True)
    grads = [np.full(w.shape, 0.01, np.float32) for w in weights]
    other.apply_gradients(zip(grads, model.trainable_variables))
    assert int(other.iterations) == 1
    # One step from fresh slots: m = 0.1 g, v = v_hat = 0.001 g^2, alpha = lr sqrt(0.001) / 0.1.
    want, _, _ = keras_adam(weights, [grads], 0.01)
    for mine, theirs in zip(model.get_weights(), want):
        np.testing.assert_allclose(mine, theirs, rtol=0, atol=2e-6)


def test_apply_gradients_on_tf_variables_keeps_velocity_hat() -> None:
    # A from-scratch loop's tf.Variables (no model): the CPU backend's update with a third slot.
    import crossover as tf

    w0 = [np.array([[0.1, -0.2], [0.3, 0.4]], np.float32), np.array([0.5, -0.5], np.float32)]
    variables = [tf.Variable(w) for w in w0]
    opt = keras.optimizers.Adam(learning_rate=0.1, beta_2=0.9, amsgrad=True)
    g0 = [np.array([[0.1, -0.2], [0.3, 1e-3]]), np.array([0.1, -0.3])]
    grads = [[falling(g, t) for g in g0] for t in range(1, 9)]
    for step in grads:
        opt.apply_gradients(zip([g.astype(np.float32) for g in step], variables))
    assert int(opt.iterations) == 8
    want, _, _ = keras_adam(w0, grads, 0.1, beta_2=0.9)
    plain, _, _ = keras_adam(w0, grads, 0.1, beta_2=0.9, amsgrad=False)
    for var, theirs, adam in zip(variables, want, plain):
        np.testing.assert_allclose(var.numpy(), theirs, rtol=0, atol=3e-6)
        assert np.abs(theirs - adam).max() > 1e-4
