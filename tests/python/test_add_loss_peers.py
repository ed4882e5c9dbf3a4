"""The loss terms of a layer's output against Keras 3.15 itself: any layer's activity_regularizer
(L1, L2, L1L2; Keras 3 divides its penalty by the batch's size), keras.layers.
ActivityRegularization, and add_loss() in a custom layer's or a subclassed model's call() (a
number times ops.mean or tf.reduce_sum of a tensor, as the Keras guides write them). Each model
trains two epochs without shuffling from the same initial weights on both sides: the losses (each
batch's holds the terms), the trained weights and evaluate's loss agree to float32 rounding. Keras
runs in a subprocess with the peers' Python ($CROSSOVER_PEERS_PYTHON, else
bench/peers/.venv/bin/python); without one, skipped with a message saying so."""

import textwrap
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers, ops, regularizers
from test_keras_archive_peers import run_keras, save_arrays

# Written once for both sides: `keras`, `layers`, `ops` and `regularizers` are each side's own.
ACTIVITY = """keras.Sequential([
    keras.Input((6, 6, 1)),
    layers.Conv2D(3, 3, activation="relu", activity_regularizer="l2"),
    layers.Flatten(),
    layers.Dense(8, activation="tanh", activity_regularizer=regularizers.L1L2(0.01, 0.02)),
    layers.ActivityRegularization(l1=0.05, l2=0.1),
    layers.LayerNormalization(activity_regularizer=regularizers.L1(0.03)),
    layers.Dense(3, activation="softmax", activity_regularizer=regularizers.L2(0.2)),
])"""

# The Keras guides' activity-regularization layer (mean, and the tf.reduce_sum form), a
# VAE-style KL term over two Dense outputs in a subclassed model's call(), in one model.
ADD_LOSS = """
class MeanPenalty(keras.layers.Layer):
    def __init__(self, rate=1e-2):
        super().__init__()
        self.rate = rate

    def call(self, inputs):
        self.add_loss(self.rate * ops.mean(inputs))
        return inputs


class SumPenalty(keras.layers.Layer):
    def call(self, inputs):
        self.add_loss(1e-3 * ops.sum(inputs))
        return keras.activations.relu(inputs)


class Model(keras.Model):
    def __init__(self):
        super().__init__()
        self.hidden = layers.Dense(8, activation="tanh")
        self.mean = layers.Dense(4)
        self.log_var = layers.Dense(4)
        self.penalty = MeanPenalty(0.5)
        self.sums = SumPenalty()
        self.out = layers.Dense(3, activation="softmax")

    def call(self, x):
        h = self.penalty(self.hidden(x))
        z_mean, z_log_var = self.mean(h), self.log_var(h)
        kl = -0.5 * ops.mean(z_log_var - ops.square(z_mean) - ops.exp(z_log_var) + 1)
        self.add_loss(0.1 * kl)
        return self.out(self.sums(z_mean))
"""

KERAS_TRAIN = """
    import json
    import numpy as np
    import keras
    from keras import layers, ops, regularizers
{definitions}
    x, y = np.load("x.npy"), np.load("y.npy")
    n = len([f for f in __import__("os").listdir(".") if f.startswith("w")])
    model = {model}
    model(x[:1])  # built (a subclassed model by its call)
    model.set_weights([np.load(f"w{{i}}.npy") for i in range(n)])
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    h = model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0).history
    ev = model.evaluate(x, y, batch_size=16, verbose=0)
    print(json.dumps({{"loss": h["loss"], "weights": [w.tolist() for w in model.get_weights()],
                      "evaluate": ev}}))
"""


def trains_as_keras_does(model_code: str, definitions: str, x: np.ndarray, tmp_path: Path) -> None:
    namespace: dict = {"keras": keras, "layers": layers, "ops": ops, "regularizers": regularizers}
    exec(definitions, namespace)
    model = eval(model_code, namespace)
    rs = np.random.RandomState(5)
    y = rs.randint(0, 3, len(x)).astype(np.float32)
    model.build((None, *x.shape[1:]))
    initial = [rs.uniform(-0.5, 0.5, w.shape).astype(np.float32) for w in model.get_weights()]
    model.set_weights(initial)
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    save_arrays(tmp_path, x, y, initial)
    code = KERAS_TRAIN.format(
        definitions="\n".join("    " + line for line in definitions.splitlines()),
        model=model_code.replace("\n", "\n    "),
    )
    theirs = run_keras(code, tmp_path)
    h = model.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0).history
    np.testing.assert_allclose(h["loss"], theirs["loss"], rtol=2e-5)
    for mine, keras_w in zip(model.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(mine, np.array(keras_w, np.float32), rtol=1e-4, atol=2e-6)
    np.testing.assert_allclose(
        model.evaluate(x, y, batch_size=16, verbose=0), theirs["evaluate"], rtol=2e-5
    )


def test_activity_regularizers_train_as_keras_does(tmp_path: Path) -> None:
    x = np.random.RandomState(3).rand(32, 6, 6, 1).astype(np.float32)
    trains_as_keras_does(ACTIVITY, "", x, tmp_path)


def test_add_loss_in_a_custom_layer_and_a_subclassed_model_trains_as_keras_does(
    tmp_path: Path,
) -> None:
    x = np.random.RandomState(4).uniform(-1, 1, (32, 5)).astype(np.float32)
    trains_as_keras_does("Model()", ADD_LOSS, x, tmp_path)


def test_the_guides_identity_layer_trains_a_functional_model() -> None:
    namespace: dict = {"keras": keras, "ops": ops}
    exec(ADD_LOSS, namespace)
    inputs = keras.Input(shape=(4,))
    h = layers.Dense(6, activation="relu")(inputs)
    h = namespace["MeanPenalty"](0.5)(h)
    model = keras.Model(inputs, layers.Dense(2)(h))
    model.compile(optimizer="sgd", loss="mse")
    x = np.random.RandomState(1).rand(16, 4).astype(np.float32)
    y = np.zeros((16, 2), np.float32)
    before = model.evaluate(x, y, verbose=0)
    model.set_weights([np.abs(w) + 0.1 for w in model.get_weights()])  # every unit active
    with_term = model.evaluate(x, y, verbose=0)
    out = model.predict(x, verbose=0)
    hidden = np.maximum(x @ model.get_weights()[0] + model.get_weights()[1], 0)
    expected = np.mean(np.square(out - y)) + 0.5 * hidden.mean()
    assert with_term == pytest.approx(expected, rel=1e-5)
    assert with_term != pytest.approx(before)
    assert len(model.layers) == 4  # the penalty layer is one layer, as Keras lists it


TWO_OUTPUTS = """
    import json
    import numpy as np
    import keras
    from keras import layers
    L2 = keras.regularizers.L2
    i = keras.Input((3,))
    h = layers.Dense(4, kernel_initializer="ones", activity_regularizer=L2(0.5))(i)
    a = layers.Dense(1, kernel_initializer="ones")(h)
    b = layers.Dense(1, kernel_initializer="ones", kernel_regularizer=L2(0.1))(h)
    m = keras.Model(i, [a, b])
    m.compile(optimizer=keras.optimizers.SGD(0.01), loss=["mse", "mse"])
    x = np.random.RandomState(0).rand(16, 3).astype("float32")
    y = [np.zeros((16, 1), "float32"), np.ones((16, 1), "float32")]
    h = m.fit(x, y, epochs=2, batch_size=8, shuffle=False, verbose=0).history
    print(json.dumps({"loss": h["loss"], "evaluate": m.evaluate(x, y, batch_size=16, verbose=0)}))
"""


def test_a_model_of_two_outputs_reports_its_terms_as_keras_does(tmp_path: Path) -> None:
    """The reported loss is the outputs' losses plus the activity and weight penalties."""
    theirs = run_keras(TWO_OUTPUTS, tmp_path)
    namespace: dict = {}
    code = TWO_OUTPUTS.replace("import keras", "from crossover import keras")
    code = code.replace("from keras import layers", "from crossover.keras import layers")
    exec(textwrap.dedent(code.split("    print(")[0]), namespace)
    np.testing.assert_allclose(namespace["h"]["loss"], theirs["loss"], rtol=2e-5)
    mine = namespace["m"].evaluate(namespace["x"], namespace["y"], batch_size=16, verbose=0)
    np.testing.assert_allclose(mine, theirs["evaluate"], rtol=2e-5)


class SquaredPenalty(keras.layers.Layer):
    """A term computed from the call's own output (the engine's last layer must stay the
    model's output: the term rides on an identity op of it)."""

    def call(self, inputs):
        y = keras.activations.relu(inputs)
        self.add_loss(0.01 * ops.sum(ops.square(y)))
        return y


@pytest.mark.parametrize("kind", ["sequential", "functional"])
def test_a_term_of_the_calls_own_output(kind: str) -> None:
    if kind == "sequential":
        model = keras.Sequential([keras.Input((4,)), layers.Dense(3), SquaredPenalty()])
    else:
        inputs = keras.Input((4,))
        model = keras.Model(inputs, SquaredPenalty()(layers.Dense(3)(inputs)))
    model.compile(optimizer="sgd", loss="mse")
    x = np.random.RandomState(8).uniform(-1, 1, (10, 4)).astype(np.float32)
    y = np.zeros((10, 3), np.float32)
    kernel, bias = model.get_weights()
    hidden = np.maximum(x @ kernel + bias, 0)
    np.testing.assert_allclose(model.predict(x, verbose=0), hidden, rtol=1e-6, atol=1e-7)
    expected = np.mean(np.square(hidden)) + 0.01 * np.square(hidden).sum()
    assert model.evaluate(x, y, batch_size=10, verbose=0) == pytest.approx(expected, rel=1e-5)


def test_activity_regularizers_round_trip_through_config_and_json() -> None:
    dense = layers.Dense(4, activity_regularizer=regularizers.L1L2(0.5, 0.25))
    assert isinstance(dense.activity_regularizer, regularizers.L1L2)
    config = dense.get_config()
    assert config["activity_regularizer"]["class_name"] == "L1L2"
    assert config["activity_regularizer"]["config"] == {"l1": 0.5, "l2": 0.25}
    assert layers.Dense.from_config(config).get_config() == config
    norm = layers.BatchNormalization(activity_regularizer="l2")
    assert norm.get_config()["activity_regularizer"]["class_name"] == "L2"
    reg = layers.ActivityRegularization(l1=0.1)
    assert reg.get_config()["l1"] == 0.1 and "activity_regularizer" not in reg.get_config()
    assert isinstance(reg.activity_regularizer, regularizers.L1L2)
    model = keras.Sequential([keras.Input((3,)), dense, reg, norm])
    back = keras.models.model_from_json(model.to_json())
    assert back.to_json() == model.to_json()


def test_what_the_engine_lacks_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="Dense: argument activity_regularizer: regularizer"):
        layers.Dense(3, activity_regularizer=lambda y: 0.1 * ops.sum(y))
    with pytest.raises(ValueError, match="inner layer's activity_regularizer"):
        layers.TimeDistributed(layers.Dense(2, activity_regularizer="l2"))

    class PerSample(keras.layers.Layer):
        def call(self, x):
            self.add_loss(ops.sum(x, axis=-1, keepdims=True))  # a per-sample loss, not a scalar
            return x * 2.0

    inputs = keras.Input((3,))
    with pytest.raises(NotImplementedError, match="add_loss.. of a symbolic tensor of shape"):
        PerSample()(inputs)

    class TrainingOnly(keras.layers.Layer):
        def call(self, x, training=None):
            if training:  # Keras adds the term in fit only; one trace cannot tell
                self.add_loss(ops.mean(x))
            return x * 2.0

    with pytest.raises(NotImplementedError, match="which takes `training`"):
        TrainingOnly()(inputs)
    # A GradientTape loop's sum(model.losses) would miss the engine's terms: refused.
    model = keras.Sequential([keras.Input((3,)), layers.Dense(2, activity_regularizer="l2")])
    with pytest.raises(NotImplementedError, match="activity regularizers or add_loss"):
        model.losses  # noqa: B018
