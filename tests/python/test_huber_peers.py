"""Keras 3's Huber loss (keras.losses.Huber, "huber") against Keras 3.15 itself: the same small
regression model from the same initial weights, two epochs without shuffling; the losses and
trained weights agree to float32 rounding, for Keras's default delta and another, by object and
by name; the loss object's get_config, the per-sample values of keras.losses.huber, and the
compile_config crossover writes (which Keras reads back to the same loss). Keras runs in a
subprocess with the peers' Python ($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python);
without one, skipped with a message saying so."""

import json
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import run_keras, save_arrays

KERAS_TRAIN = """
    import json
    import numpy as np
    import keras
    from keras import layers
    x, y = np.load("x.npy"), np.load("y.npy")
    weights = [np.load(f"w{{i}}.npy") for i in range(4)]
    model = keras.Sequential([keras.Input((6,)), layers.Dense(8, activation="relu"),
                              layers.Dense(3)])
    model.set_weights(weights)
    delta = {delta}
    loss = "huber" if delta is None else keras.losses.Huber(delta=delta)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss)
    h = model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0).history
    p = model.predict(x[:5], verbose=0)
    values = keras.losses.huber(y[:5], p, delta=1.0 if delta is None else delta)
    mine = json.loads(open("compile.json").read())
    back = keras.losses.deserialize(mine["loss"]) if isinstance(mine["loss"], dict) else None
    print(json.dumps({{"loss": h["loss"], "weights": [w.tolist() for w in model.get_weights()],
                      "predictions": p.tolist(), "values": np.asarray(values).tolist(),
                      "config": None if delta is None else loss.get_config(),
                      "read_back": None if back is None else back.get_config()}}))
"""


@pytest.mark.parametrize("delta", [None, 0.3])
def test_huber_trains_as_keras_does(delta, tmp_path: Path) -> None:
    rs = np.random.RandomState(5)
    x = rs.rand(40, 6).astype(np.float32)
    y = (rs.randn(40, 3) * 2).astype(np.float32)  # errors on both sides of delta
    model = keras.Sequential(
        [keras.Input((6,)), layers.Dense(8, activation="relu"), layers.Dense(3)]
    )
    loss = "huber" if delta is None else keras.losses.Huber(delta=delta)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss=loss)
    model.build((None, 6))
    initial = model.get_weights()
    save_arrays(tmp_path, x, y, initial)
    compile_config = json.loads(model.to_json())["compile_config"]
    (tmp_path / "compile.json").write_text(json.dumps(compile_config))
    theirs = run_keras(KERAS_TRAIN.format(delta=delta), tmp_path)
    h = model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0).history
    np.testing.assert_allclose(h["loss"], theirs["loss"], rtol=1e-5)
    for mine, keras_w, start in zip(model.get_weights(), theirs["weights"], initial):
        keras_w = np.array(keras_w, dtype=np.float32)
        assert np.abs(keras_w - start).max() > 1e-3  # the steps moved the weights
        np.testing.assert_allclose(mine, keras_w, rtol=1e-5, atol=1e-6)
    p = model.predict(x[:5], verbose=0)
    np.testing.assert_allclose(p, theirs["predictions"], rtol=1e-5, atol=1e-6)
    # keras.losses.huber's per-sample values on the same predictions.
    d = 1.0 if delta is None else delta
    np.testing.assert_allclose(
        np.asarray(keras.losses.huber(y[:5], np.array(theirs["predictions"], np.float32), d)),
        theirs["values"],
        rtol=1e-6,
    )
    if delta is None:
        assert compile_config["loss"] == "huber"
    else:
        # Keras 3.15's Huber.get_config leaves delta out; crossover's compile_config keeps it,
        # and Keras reads that object back.
        assert loss.get_config() == theirs["config"]
        assert compile_config["loss"]["config"]["delta"] == pytest.approx(delta)
        assert theirs["read_back"] == theirs["config"]


def test_huber_object_refuses_what_keras_refuses_and_trains_through_a_tape() -> None:
    with pytest.raises(ValueError, match="Huber: delta must be positive, got 0"):
        keras.losses.Huber(delta=0)
    rs = np.random.RandomState(1)
    x, y = rs.rand(16, 4).astype(np.float32), rs.randn(16, 2).astype(np.float32)
    model = keras.Sequential([keras.Input((4,)), layers.Dense(2)])
    model.compile(optimizer="sgd", loss=keras.losses.Huber(0.5))
    model.build((None, 4))
    # The tape's gradient of the loss object on the model's outputs: the engine's loss op, the
    # same numbers as the eager ops' (keras.losses.huber under the tape).
    import crossover as tf

    with tf.GradientTape() as tape:
        value = keras.losses.Huber(0.5)(y, model(x, training=True))
    engine = tape.gradient(value, model.trainable_variables)
    with tf.GradientTape() as tape:
        eager = tf.reduce_mean(keras.losses.huber(y, model(x, training=True), 0.5))
    ops = tape.gradient(eager, model.trainable_variables)
    for a, b in zip(engine, ops):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    assert abs(float(value) - float(eager)) < 1e-6
