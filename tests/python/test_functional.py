"""The functional API: keras.Input, layers called on symbolic tensors, keras.Model(inputs,
outputs), Add and Concatenate; summary() with Keras 3's "Connected to" column; to_json,
model_from_json and .keras files of functional models; and the errors for what is not supported
yet (shared layers, several inputs, subclassed models, calling a layer on data). The comparison
with Keras itself is test_functional_peers.py."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers

# What Keras 3.15 prints for this model's summary() when stdout is not a terminal (80 columns):
# the reference the test below compares with, taken from Keras itself.
KERAS_SUMMARY = """\
Model: "functional"
┏━━━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━┳━━━━━━━━━━━━┳━━━━━━━━━━━━━━━━━━━┓
┃ Layer (type)        ┃ Output Shape      ┃    Param # ┃ Connected to      ┃
┡━━━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━╇━━━━━━━━━━━━╇━━━━━━━━━━━━━━━━━━━┩
│ input_layer         │ (None, 6)         │          0 │ -                 │
│ (InputLayer)        │                   │            │                   │
├─────────────────────┼───────────────────┼────────────┼───────────────────┤
│ dense (Dense)       │ (None, 4)         │         28 │ input_layer[0][0] │
├─────────────────────┼───────────────────┼────────────┼───────────────────┤
│ dense_1 (Dense)     │ (None, 4)         │         20 │ dense[0][0]       │
├─────────────────────┼───────────────────┼────────────┼───────────────────┤
│ add (Add)           │ (None, 4)         │          0 │ dense_1[0][0],    │
│                     │                   │            │ dense[0][0]       │
├─────────────────────┼───────────────────┼────────────┼───────────────────┤
│ concatenate         │ (None, 8)         │          0 │ add[0][0],        │
│ (Concatenate)       │                   │            │ dense[0][0]       │
├─────────────────────┼───────────────────┼────────────┼───────────────────┤
│ dense_2 (Dense)     │ (None, 3)         │         27 │ concatenate[0][0] │
└─────────────────────┴───────────────────┴────────────┴───────────────────┘
 Total params: 75 (300.00 B)
 Trainable params: 75 (300.00 B)
 Non-trainable params: 0 (0.00 B)"""


def skip_and_concat(name=None):
    inp = keras.Input(shape=(6,), name="input_layer")
    d1 = layers.Dense(4, activation="tanh", name="dense")(inp)
    d2 = layers.Dense(4, activation="relu", name="dense_1")(d1)
    s = layers.Add(name="add")([d2, d1])
    c = layers.Concatenate(name="concatenate")([s, d1])
    out = layers.Dense(3, activation="softmax", name="dense_2")(c)
    return keras.Model(inp, out, name=name or "functional")


def test_symbolic_tensors_and_the_model_made_from_them() -> None:
    inp = keras.Input(shape=(6,))
    assert inp.shape == (None, 6) and inp.dtype == "float32"
    h = layers.Dense(4)(inp)
    assert h.shape == (None, 4)
    model = keras.Model(inputs=inp, outputs=h)
    assert isinstance(model, keras.Model) and type(model).__name__ == "Functional"
    assert isinstance(keras.Sequential([layers.Dense(2)]), keras.Model)
    # Keras's hierarchy: Sequential and Functional are both Models, neither is the other.
    assert issubclass(keras.Sequential, keras.Model) and not isinstance(model, keras.Sequential)
    with pytest.raises(AttributeError, match="'Functional' object has no attribute 'add'"):
        model.add(layers.Dense(2))
    assert [type(l).__name__ for l in model.layers] == ["InputLayer", "Dense"]
    assert model.input is inp and model.outputs == [h] and model.output_shape == (None, 4)
    assert model.count_params() == 28


def test_summary_is_keras_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    lines: list[str] = []
    skip_and_concat().summary(print_fn=lines.append)
    assert "\n".join(lines) == KERAS_SUMMARY


def test_a_chain_has_keras_s_three_columns_and_its_input_row() -> None:
    inp = keras.Input(shape=(3,))
    model = keras.Model(inp, layers.Dense(2)(layers.Dense(4)(inp)))
    lines: list[str] = []
    model.summary(print_fn=lines.append, line_length=60)
    text = "\n".join(lines)
    assert "Connected to" not in text and "(InputLayer)" in text


def test_fit_evaluate_predict_and_a_skip_connection_learns() -> None:
    rs = np.random.RandomState(0)
    x = rs.randn(256, 6).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.float32) + (x[:, 1] > 0)
    model = skip_and_concat()
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    first = model.evaluate(x, y, verbose=0)[0]
    h = model.fit(x, y, epochs=40, batch_size=32, verbose=0)
    assert h.history["loss"][-1] < 0.6 * first
    p = model.predict(x[:3], verbose=0)
    assert p.shape == (3, 3)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(model(x[:3]).numpy(), p, atol=1e-6)


def test_to_json_model_from_json_and_keras_files_keep_the_graph(tmp_path: Path) -> None:
    model = skip_and_concat("joined")
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    rs = np.random.RandomState(1)
    x = rs.rand(20, 6).astype(np.float32)
    expected = model.predict(x, verbose=0)
    again = keras.models.model_from_json(model.to_json())
    assert type(again).__name__ == "Functional" and again.name == "joined"
    assert [l.name for l in again.layers] == [l.name for l in model.layers]
    assert again.get_layer("add").output._inputs[1]._layer.name == "dense"
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(loaded.predict(x, verbose=0), expected, atol=1e-6)
    loaded.fit(x, np.zeros(20, np.float32), epochs=1, verbose=0)  # compiled from the file


def test_a_layer_called_twice_is_one_layer_with_one_set_of_weights(tmp_path: Path) -> None:
    inp = keras.Input(shape=(4,))
    shared = layers.Dense(4, activation="tanh")
    a = shared(inp)
    b = shared(a)
    assert shared.output is a  # Keras's layer.output: the first call's
    assert b._keras_history[1] == 1
    model = keras.Model(inp, layers.Dense(2, activation="softmax")(layers.Add()([a, b])))
    assert model.layers[1] is shared and len(model.layers) == 4  # listed once
    assert [w.shape for w in model.get_weights()] == [(4, 4), (4,), (4, 2), (2,)]
    assert model.count_params() == 20 + 10
    lines: list[str] = []
    model.summary(print_fn=lines.append, line_length=200)
    rows = [l for l in "\n".join(lines).splitlines() if l.startswith("│")]
    # Its row: the last call's shape, and what each call reads (Keras's layer[call][0]).
    assert f"{inp._layer.name}[0][0], {shared.name}[0][0]" in rows[1]
    assert f"{shared.name}[0][0], {shared.name}[1][0]" in rows[2]
    x = np.random.RandomState(2).rand(16, 4).astype(np.float32)
    model.compile("adam", "sparse_categorical_crossentropy")
    model.fit(x, np.zeros(16, np.float32), epochs=1, verbose=0)
    expected = model.predict(x, verbose=0)
    # The file lists the layer once with two calls, and reads back into one shared layer.
    again = keras.models.model_from_json(model.to_json())
    assert [l.name for l in again.layers] == [l.name for l in model.layers]
    again.set_weights(model.get_weights())
    np.testing.assert_allclose(again.predict(x, verbose=0), expected, atol=1e-6)
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    np.testing.assert_allclose(loaded.predict(x, verbose=0), expected, atol=1e-6)
    # Called again on an input its weights do not fit: Keras's ValueError, at the call.
    with pytest.raises(ValueError, match='Input 0 of layer "dense" is incompatible'):
        shared(layers.Dense(3)(inp))


def test_inner_outputs_predict() -> None:
    """Outputs that other layers read, or an input, as Keras allows them (each layer's
    activations): predicted through an identity op after each, which model.layers, the weights
    and summary do not show."""
    inp = keras.Input(shape=(4,))
    a = layers.Dense(3, activation="relu")(inp)
    b = layers.Dense(2)(a)
    model = keras.Model(inp, [inp, a, b])
    assert [l.name for l in model.layers] == ["input_layer", "dense", "dense_1"]
    assert model.output_names == ["input_layer", "dense", "dense_1"]
    assert model.count_params() == 4 * 3 + 3 + 3 * 2 + 2
    x = np.random.RandomState(0).rand(5, 4).astype(np.float32)
    got_x, got_a, got_b = model.predict(x, verbose=0)
    np.testing.assert_allclose(got_x, x)
    np.testing.assert_allclose(got_a, keras.Model(inp, a).predict(x, verbose=0), rtol=1e-6)
    np.testing.assert_allclose(got_b, keras.Model(inp, b).predict(x, verbose=0), rtol=1e-6)


def test_what_is_not_supported_yet_says_so() -> None:
    inp = keras.Input(shape=(4,))
    a = layers.Dense(3)(inp)
    with pytest.raises(ValueError, match="at least 2 inputs"):
        layers.Add()([a])
    with pytest.raises(ValueError, match="incompatible shapes"):
        layers.Add()([a, layers.Dense(2)(inp)])
    with pytest.raises(ValueError, match="do not depend on the input"):
        keras.Model([inp, keras.Input(shape=(2,))], a)  # Keras takes it (an unused input)
    inner = keras.Model(inp, [a, layers.Dense(2)(a)])  # an output that another layer reads
    with pytest.raises(NotImplementedError, match=r"outputs what other layers of it read.*\(de"):
        inner.compile("adam", "mse")  # it predicts (test_inner_outputs_predict), not trains
    with pytest.raises(NotImplementedError, match="does not write such a model"):
        inner.to_json()
    with pytest.raises(NotImplementedError, match="called on a list of arrays"):
        layers.Add()([np.zeros((1, 4), np.float32), np.zeros((1, 4), np.float32)])
    with pytest.raises(NotImplementedError, match=r"indexing a symbolic tensor .* not supported"):
        _ = a[:, 0]
    with pytest.raises(NotImplementedError, match=r"add of tensors of shapes \(None, 3\) and"):
        _ = a + layers.Dense(2)(inp)  # shapes differ, neither broadcast
    other = keras.Input(shape=(3,))
    with pytest.raises(ValueError, match="not among the model's inputs"):
        keras.Model(inp, layers.Add()([a, other]))

    class Mine(keras.Model):
        def call(self, x):
            return x

    with pytest.raises(TypeError, match="applies no layer"):
        Mine().build((None, 4))  # call() applies no layer: nothing to trace


def test_x_plus_residual_is_an_add_layer() -> None:
    inp = keras.Input(shape=(5,))
    x = layers.Dense(5, activation="relu")(inp)
    residual = x
    x = layers.Dense(5, activation="relu")(x)
    x += residual
    model = keras.Model(inp, layers.Dense(2)(x))
    assert [type(l).__name__ for l in model.layers] == [
        "InputLayer",
        "Dense",
        "Dense",
        "Add",
        "Dense",
    ]


def test_keras_input_still_starts_a_sequential_list() -> None:
    model = keras.Sequential([keras.Input(shape=(5,)), layers.Dense(2)])
    assert model.input_shape == (None, 5) and model.count_params() == 12


def test_a_sublayer_a_custom_layer_calls_twice_is_shared() -> None:
    """Keras's Sequential of a custom layer whose call() applies one Dense twice: one kernel and
    bias (the weights Keras 3.15 lists for the same model), the layer after it its own."""

    class Twice(layers.Layer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.d = layers.Dense(4)

        def call(self, x):
            return self.d(self.d(x)) + x

    last = layers.Dense(2)
    model = keras.Sequential([keras.Input((4,)), Twice(), last])
    model.compile("adam", "mse")
    model.fit(np.ones((8, 4), np.float32), np.ones((8, 2), np.float32), verbose=0)
    assert [w.shape for w in model.get_weights()] == [(4, 4), (4,), (4, 2), (2,)]
    assert [w.shape for w in last.get_weights()] == [(4, 2), (2,)]


def test_a_subclassed_model_compiled_with_positional_arguments():
    """compile(optimizer, loss) before the model's trace keeps both for it (Keras's order)."""

    class Net(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(2)

        def call(self, x):
            return self.dense(x)

    model = Net()
    model.compile("sgd", "mse", metrics=["mae"])
    history = model.fit(np.ones((4, 3), "float32"), np.ones((4, 2), "float32"), verbose=0)
    assert sorted(history.history) == ["loss", "mae"]
    assert model.loss == "mse"


def test_models_called_as_layers_of_a_functional_model_share_their_weights():
    """Model(x, decoder(encoder(x))): the inner models' layers applied to the outer input (one
    set of weights each), so the trained autoencoder is its two models composed."""
    rng = np.random.default_rng(7)
    x = rng.random((64, 12)).astype("float32")
    inputs = keras.Input((12,))
    encoder = keras.Model(inputs, layers.Dense(4, activation="relu")(inputs))
    decoder = keras.Sequential([keras.Input((4,)), layers.Dense(12, activation="sigmoid")])
    outer = keras.Input((12,))
    autoencoder = keras.Model(outer, decoder(encoder(outer)))
    autoencoder.compile(optimizer="adam", loss="mse")
    history = autoencoder.fit(x, x, epochs=3, batch_size=16, verbose=0).history
    assert history["loss"][-1] < history["loss"][0]
    composed = decoder.predict(encoder.predict(x, verbose=0), verbose=0)
    np.testing.assert_allclose(autoencoder.predict(x, verbose=0), composed, atol=1e-6)


@pytest.mark.parametrize(
    "argument, value",
    [("sparse", True), ("ragged", True), ("optional", True), ("tensor", np.zeros((2, 4)))],
)
def test_an_input_crossover_cannot_take_is_refused_by_the_engine_naming_it(argument, value):
    # keras.Input takes Keras 3.15's arguments; the engine's InputLayer reader refuses these.
    name = "input_tensor" if argument == "tensor" else argument
    with pytest.raises(ValueError, match=f"InputLayer: argument {name}: "):
        keras.Input((4,), **{argument: value})
