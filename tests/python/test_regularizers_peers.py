"""Keras's weight regularizers (keras.regularizers L1, L2, L1L2 as a layer's kernel_regularizer
and bias_regularizer, and a normalization layer's gamma_regularizer and beta_regularizer) against
Keras 3.15 itself: a small convnet from the same initial weights, two epochs without shuffling,
with SGD and with Adam; the losses (each batch's holds the penalties), evaluate's loss,
model.losses and the trained weights agree to float32 rounding; the model's JSON carries the
regularizers as Keras writes them, and Keras reads it back. Keras runs in a subprocess with the
peers' Python ($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python); without one, skipped
with a message saying so."""

import json
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers, regularizers
from test_keras_archive_peers import run_keras, save_arrays

# The models, written once for both sides: `keras` and `layers` are each side's own. With SGD,
# the normalization layers' regularizers too; Adam's steps are kept clear of a BatchNormalization
# (Adam divides by the gradients' running size, and a bias before a BatchNormalization of 8 rows
# has a gradient near zero: the two sides' float32 roundings then decide its steps' signs).
CONV = """keras.Sequential([
    keras.Input((6, 6, 1)),
    layers.Conv2D(3, 3, activation="relu", kernel_regularizer=regularizers.L1L2(0.01, 0.02),
                  bias_regularizer="l2"),
    layers.Flatten(),{normalization}
    layers.Dense(8, activation="tanh", kernel_regularizer=regularizers.l2(0.05)),
    layers.LayerNormalization(beta_regularizer=regularizers.L2(0.1)),
    layers.Dense(3, activation="softmax", kernel_regularizer=regularizers.L1(0.03),
                 bias_regularizer=regularizers.L1L2(l2=0.1)),
])"""
BATCH_NORM = """
    layers.BatchNormalization(gamma_regularizer="l2", beta_regularizer=regularizers.L1(0.02)),"""
MODELS = {
    "keras.optimizers.SGD(0.1)": CONV.format(normalization=BATCH_NORM),
    "keras.optimizers.Adam(0.01)": CONV.format(normalization=""),
}

KERAS_TRAIN = """
    import json
    import numpy as np
    import keras
    from keras import layers, regularizers
    x, y = np.load("x.npy"), np.load("y.npy")
    n = len([f for f in __import__("os").listdir(".") if f.startswith("w")])
    weights = [np.load(f"w{{i}}.npy") for i in range(n)]
    model = {model}
    model.set_weights(weights)
    model.compile(optimizer={optimizer}, loss="sparse_categorical_crossentropy")
    h = model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0).history
    ev = model.evaluate(x, y, batch_size=16, verbose=0)
    mine = keras.models.model_from_json(open("model.json").read())
    print(json.dumps({{"loss": h["loss"], "weights": [w.tolist() for w in model.get_weights()],
                      "evaluate": ev, "losses": [float(l) for l in model.losses],
                      "read_back": [l.get_config().get("kernel_regularizer")
                                    for l in mine.layers]}}))
"""


@pytest.mark.parametrize("optimizer", ["keras.optimizers.SGD(0.1)", "keras.optimizers.Adam(0.01)"])
def test_regularized_models_train_as_keras_does(optimizer: str, tmp_path: Path) -> None:
    model_code = MODELS[optimizer]
    rs = np.random.RandomState(3)
    x = rs.rand(32, 6, 6, 1).astype(np.float32)
    y = rs.randint(0, 3, 32).astype(np.float32)
    model = eval(model_code)
    model.compile(optimizer=eval(optimizer), loss="sparse_categorical_crossentropy")
    model.build((None, 6, 6, 1))
    initial = model.get_weights()
    save_arrays(tmp_path, x, y, initial)
    (tmp_path / "model.json").write_text(model.to_json())
    code = KERAS_TRAIN.format(model=model_code.replace("\n", "\n    "), optimizer=optimizer)
    theirs = run_keras(code, tmp_path)
    before = sum(float(p) for p in model.losses)
    assert before > 0  # the penalties of the initial weights
    h = model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0).history
    np.testing.assert_allclose(h["loss"], theirs["loss"], rtol=2e-5)
    for mine, keras_w, start in zip(model.get_weights(), theirs["weights"], initial):
        keras_w = np.array(keras_w, dtype=np.float32)
        np.testing.assert_allclose(mine, keras_w, rtol=1e-4, atol=2e-6)
    assert np.abs(model.get_weights()[0] - initial[0]).max() > 1e-3
    ev = model.evaluate(x, y, batch_size=16, verbose=0)
    np.testing.assert_allclose(ev, theirs["evaluate"], rtol=2e-5)
    np.testing.assert_allclose([float(p) for p in model.losses], theirs["losses"], rtol=2e-5)
    # Keras read crossover's JSON to the same regularizers.
    assert theirs["read_back"][0] == {
        "module": "keras.regularizers",
        "class_name": "L1L2",
        "config": {"l1": 0.01, "l2": 0.02},
        "registered_name": None,
    }
    dense = [c for c in theirs["read_back"] if c and c["class_name"] == "L2"]
    assert dense[0]["config"] == {"l2": 0.05}


def test_a_regularizer_the_engine_lacks_is_one_clear_error_naming_the_argument() -> None:
    with pytest.raises(ValueError, match="Dense: argument kernel_regularizer: regularizer"):
        layers.Dense(3, kernel_regularizer=lambda w: 0.1 * w.sum())
    with pytest.raises(ValueError, match="Invalid value for argument l2"):
        regularizers.L2(-1.0)
    with pytest.raises(AttributeError, match="OrthogonalRegularizer is not in the engine"):
        regularizers.OrthogonalRegularizer  # noqa: B018


def test_regularizers_round_trip_through_the_models_json_and_config() -> None:
    dense = layers.Dense(4, kernel_regularizer="l2", bias_regularizer=regularizers.L1(0.5))
    assert isinstance(dense.kernel_regularizer, regularizers.L2)
    config = dense.get_config()
    assert config["kernel_regularizer"]["class_name"] == "L2"
    assert config["kernel_regularizer"]["config"] == {"l2": 0.01}
    again = layers.Dense.from_config(config)
    assert again.get_config() == config
    model = keras.Sequential([keras.Input((3,)), dense])
    back = keras.models.model_from_json(model.to_json())
    assert back.to_json() == model.to_json()
    assert isinstance(back.layers[0].bias_regularizer, regularizers.L1)


LINEAR = """
class Linear(keras.layers.Layer):
    def __init__(self, units):
        super().__init__()
        self.units = units

    def build(self, input_shape):
        self.w = self.add_weight(shape=(input_shape[-1], self.units), initializer="glorot_uniform",
                                 regularizer=keras.regularizers.L2(0.05))
        self.b = self.add_weight(shape=(self.units,), initializer="zeros", regularizer="l1")

    def call(self, x):
        return keras.ops.matmul(x, self.w) + self.b
"""

KERAS_CUSTOM = """
    import json
    import numpy as np
    import keras
{linear}
    x, y = np.load("x.npy"), np.load("y.npy")
    weights = [np.load(f"w{{i}}.npy") for i in range(4)]
    model = keras.Sequential([keras.Input((5,)), Linear(4), keras.layers.Activation("tanh"),
                              keras.layers.Dense(3, activation="softmax")])
    model.set_weights(weights)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    h = model.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0).history
    print(json.dumps({{"loss": h["loss"], "weights": [w.tolist() for w in model.get_weights()],
                      "losses": [float(l) for l in model.losses]}}))
"""


def test_a_custom_layers_add_weight_regularizer_trains_as_keras_does(tmp_path: Path) -> None:
    namespace: dict = {"keras": keras}
    exec(LINEAR, namespace)
    rs = np.random.RandomState(4)
    x = rs.rand(16, 5).astype(np.float32)
    y = rs.randint(0, 3, 16).astype(np.float32)
    model = keras.Sequential(
        [
            keras.Input((5,)),
            namespace["Linear"](4),
            layers.Activation("tanh"),
            layers.Dense(3, activation="softmax"),
        ]
    )
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    initial = model.get_weights()
    initial[1] = rs.uniform(-0.5, 0.5, initial[1].shape).astype(np.float32)  # b: l1 at work
    model.set_weights(initial)
    save_arrays(tmp_path, x, y, initial)
    linear = "\n".join("    " + line for line in LINEAR.splitlines())
    theirs = run_keras(KERAS_CUSTOM.format(linear=linear), tmp_path)
    assert len(model.losses) == 2
    h = model.fit(x, y, epochs=2, batch_size=4, shuffle=False, verbose=0).history
    np.testing.assert_allclose(h["loss"], theirs["loss"], rtol=2e-5)
    for mine, keras_w in zip(model.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(mine, np.array(keras_w, np.float32), rtol=1e-4, atol=2e-6)
    np.testing.assert_allclose([float(p) for p in model.losses], theirs["losses"], rtol=2e-5)


PYTHON_STEP = """
    import json
    import numpy as np
    import keras
    from keras import layers, ops, regularizers

    def halved_squares(y_true, y_pred):
        return ops.mean(ops.square(y_true - y_pred) * 0.5, axis=-1)

    m = keras.Sequential([
        keras.Input((5,)),
        layers.Dense(6, activation="tanh", kernel_regularizer=regularizers.L1L2(0.01, 0.02),
                     bias_regularizer="l2"),
        layers.BatchNormalization(gamma_regularizer=regularizers.L2(0.1)),
        layers.Dense(2, kernel_regularizer=regularizers.L1(0.05)),
    ])
    m.compile(optimizer=keras.optimizers.SGD(0.1), loss=halved_squares)
    rs = np.random.RandomState(0)
    x, y = rs.rand(32, 5).astype("float32"), rs.rand(32, 2).astype("float32")
    ws = [rs.uniform(-0.6, 0.6, w.shape).astype("float32") for w in m.get_weights()]
    ws[5] = np.abs(ws[5]) + 0.5  # the moving variance
    m.set_weights(ws)
    h = m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history
    print(json.dumps({"loss": h["loss"], "weights": [w.tolist() for w in m.get_weights()]}))
"""


def test_a_python_steps_loss_holds_the_weight_penalties_as_keras_does(tmp_path: Path) -> None:
    """A loss the engine has no op for trains in Python steps (keras/_python_step.py), where
    compute_loss adds the weight penalties with recorded ops on the tape's variables (Keras's
    compute_loss adds model.losses): the losses and weights against Keras 3.15."""
    import textwrap

    theirs = run_keras(PYTHON_STEP, tmp_path)
    code = textwrap.dedent(PYTHON_STEP.split("    print(")[0])
    code = code.replace("import keras", "from crossover import keras")
    code = code.replace("from keras import", "from crossover.keras import")
    namespace: dict = {}
    exec(code, namespace)
    np.testing.assert_allclose(namespace["h"]["loss"], theirs["loss"], rtol=2e-5)
    for mine, keras_w in zip(namespace["m"].get_weights(), theirs["weights"]):
        np.testing.assert_allclose(mine, np.array(keras_w, np.float32), rtol=1e-4, atol=2e-6)
