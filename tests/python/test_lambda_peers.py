"""keras.layers.Lambda and custom layers called on a list of tensors, traced into the model's
graph, against Keras 3.15 itself: the siamese distance of Keras's examples (a Lambda of
ops.sqrt(ops.maximum(ops.sum(ops.square(x - y), axis=1, keepdims=True), epsilon)) over two calls
of one tower; with binary cross-entropy, and with keras.io's contrastive loss, a Python function,
on targets of shape (N,): Keras's squeeze_or_expand_to_same_rank), a Lambda with `arguments` in
a Sequential, and a custom layer on a tuple; each
trains two epochs without shuffling from the same initial weights on both sides, whose losses,
weights and predictions agree to float32 rounding. Keras runs in a subprocess with the peers'
Python ($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python); without one, skipped with a
message saying so."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers, ops
from test_keras_archive_peers import run_keras, save_arrays

# Written once for both sides: `keras`, `layers` and `ops` are each side's own.
DEFINITIONS = """
def euclidean_distance(vects):
    x, y = vects
    sum_square = ops.sum(ops.square(x - y), axis=1, keepdims=True)
    return ops.sqrt(ops.maximum(sum_square, keras.backend.epsilon()))


def contrastive_loss(y_true, y_pred):
    square_pred = ops.square(y_pred)
    margin_square = ops.square(ops.maximum(1.0 - y_pred, 0))
    return ops.mean((1 - y_true) * square_pred + y_true * margin_square)


def siamese():
    tower = keras.Sequential([keras.Input((6,)), layers.Dense(5, activation="tanh")])
    a, b = keras.Input((6,)), keras.Input((6,))
    distance = layers.Lambda(euclidean_distance, output_shape=(1,))([tower(a), tower(b)])
    out = layers.Dense(1, activation="sigmoid")(distance)
    return keras.Model([a, b], out)


def scaled():
    return keras.Sequential([
        keras.Input((6,)),
        layers.Lambda(lambda x, factor: x * factor + 1.0, arguments={"factor": 0.5}),
        layers.Dense(4, activation="relu"),
        layers.Lambda(lambda x: ops.exp(-x)),
        layers.Dense(1, activation="sigmoid"),
    ])


class Gate(keras.layers.Layer):
    def call(self, inputs):
        value, gate = inputs
        return value * keras.activations.sigmoid(gate) - ops.square(gate)


def gated():
    x = keras.Input((6,))
    value, gate = layers.Dense(3)(x), layers.Dense(3)(x)
    return keras.Model(x, layers.Dense(1, activation="sigmoid")(Gate()((value, gate))))
"""

KERAS_TRAIN = """
    import json
    import numpy as np
    import keras
    from keras import layers, ops
{definitions}
    x, y = np.load("x.npy"), np.load("y.npy")
    inputs = [x[:, 0], x[:, 1]] if x.ndim == 3 else x
    n = len([f for f in __import__("os").listdir(".") if f.startswith("w")])
    model = {model}()
    model.set_weights([np.load(f"w{{i}}.npy") for i in range(n)])
    model.compile(optimizer=keras.optimizers.SGD(0.2), loss={loss})
    h = model.fit(inputs, y, epochs=2, batch_size=8, shuffle=False, verbose=0).history
    print(json.dumps({{"loss": h["loss"], "weights": [w.tolist() for w in model.get_weights()],
                      "predict": model.predict(inputs, verbose=0).tolist()}}))
"""


@pytest.mark.parametrize(
    "model, loss",
    [
        ("siamese", '"binary_crossentropy"'),
        ("siamese", "contrastive_loss"),
        ("scaled", '"binary_crossentropy"'),
        ("gated", '"binary_crossentropy"'),
    ],
)
def test_traced_python_code_trains_as_keras_does(model: str, loss: str, tmp_path: Path) -> None:
    namespace: dict = {"keras": keras, "layers": layers, "ops": ops}
    exec(DEFINITIONS, namespace)
    rs = np.random.RandomState(7)
    x = rs.uniform(-1, 1, (32, 2, 6) if model == "siamese" else (32, 6)).astype(np.float32)
    # The contrastive loss's targets as keras.io gives them, (N,) against outputs (N, 1).
    y = rs.randint(0, 2, (32,) if loss == "contrastive_loss" else (32, 1)).astype(np.float32)
    inputs = [x[:, 0], x[:, 1]] if model == "siamese" else x
    mine = namespace[model]()
    initial = [rs.uniform(-0.8, 0.8, w.shape).astype(np.float32) for w in mine.get_weights()]
    mine.set_weights(initial)
    save_arrays(tmp_path, x, y, initial)
    code = KERAS_TRAIN.format(
        definitions="\n".join("    " + line for line in DEFINITIONS.splitlines()),
        model=model,
        loss=loss,
    )
    theirs = run_keras(code, tmp_path)
    mine.compile(optimizer=keras.optimizers.SGD(0.2), loss=eval(loss, namespace))
    h = mine.fit(inputs, y, epochs=2, batch_size=8, shuffle=False, verbose=0).history
    np.testing.assert_allclose(h["loss"], theirs["loss"], rtol=2e-5)
    for w, keras_w in zip(mine.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(w, np.array(keras_w, np.float32), rtol=1e-4, atol=2e-6)
    np.testing.assert_allclose(mine.predict(inputs, verbose=0), theirs["predict"], rtol=1e-5)


def test_a_lambda_runs_in_python_on_data_and_is_one_layer_of_the_model() -> None:
    double = layers.Lambda(lambda x: x * 2.0)
    np.testing.assert_allclose(double(np.ones((2, 3), np.float32)), np.full((2, 3), 2.0))
    model = keras.Sequential([keras.Input((3,)), double, layers.Dense(2)])
    assert [type(l).__name__ for l in model.layers] == ["Lambda", "Dense"]
    assert model.layers[0].name.startswith("lambda")


def test_what_crossover_cannot_trace_is_one_clear_error() -> None:
    inputs = keras.Input((3,))
    with pytest.raises(NotImplementedError, match="keras.ops.log"):
        layers.Lambda(lambda x: ops.log(x))(inputs)
    with pytest.raises(ValueError, match="mask"):
        layers.Lambda(lambda x: x, mask=lambda x, m: m)
    with pytest.raises(TypeError, match="must be callable"):
        layers.Lambda(3)
    with pytest.raises(NotImplementedError, match="does not serialize a Python function"):
        layers.Lambda(lambda x: x * 2.0).get_config()
    model = keras.Sequential([keras.Input((3,)), layers.Lambda(lambda x: ops.sqrt(x))])
    with pytest.raises(Exception, match="no Keras layer class"):
        model.to_json()
