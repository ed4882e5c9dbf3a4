"""Functional models of several inputs (keras.Model([a, b], ...)): fit, evaluate and predict take
a list or a dict of arrays, the errors name what is wrong as Keras's do, and the model saves and
loads (to_json, .weights.h5, .keras) with its inputs in their order. Keras's own numbers for the
same models are in test_multi_io_peers.py."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers


def two_inputs(order: str = "ab") -> keras.Model:
    a = keras.Input(shape=(3,), name="a")
    b = keras.Input(shape=(2, 2), name="b")
    joined = layers.Concatenate()([layers.Dense(4, activation="relu")(a), layers.Flatten()(b)])
    out = layers.Dense(3, activation="softmax")(joined)
    inputs = {"a": a, "b": b} if order == "dict" else ([a, b] if order == "ab" else [b, a])
    return keras.Model(inputs, out)


def arrays(n: int = 24) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rs = np.random.RandomState(5)
    return (
        rs.rand(n, 3).astype(np.float32),
        rs.rand(n, 2, 2).astype(np.float32),
        rs.randint(0, 3, n).astype(np.float32),
    )


def compiled(model: keras.Model) -> keras.Model:
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def test_a_list_or_a_dict_of_arrays_gives_the_same_results() -> None:
    keras.utils.set_random_seed(1)
    model = compiled(two_inputs())
    xa, xb, y = arrays()
    assert [t.name for t in model.inputs] == ["a", "b"]
    by_list = model.predict([xa, xb], verbose=0)
    assert by_list.shape == (24, 3)
    np.testing.assert_array_equal(model.predict({"b": xb, "a": xa}, verbose=0), by_list)
    np.testing.assert_array_equal(model([xa, xb]).numpy(), by_list)
    h = model.fit([xa, xb], y, epochs=2, batch_size=8, verbose=0, validation_data=([xa, xb], y))
    assert sorted(h.history) == ["accuracy", "loss", "val_accuracy", "val_loss"]
    loss, acc = model.evaluate({"a": xa, "b": xb}, y, verbose=0)
    assert loss == pytest.approx(model.evaluate([xa, xb], y, verbose=0)[0])
    assert 0 <= acc <= 1


def test_the_inputs_order_is_the_models_not_the_layers() -> None:
    keras.utils.set_random_seed(2)
    ab = compiled(two_inputs("ab"))
    ba = compiled(two_inputs("ba"))
    ba.set_weights(ab.get_weights())
    xa, xb, _ = arrays()
    np.testing.assert_array_equal(ba.predict([xb, xa], verbose=0), ab.predict([xa, xb], verbose=0))


def test_data_that_does_not_fit_the_inputs_is_a_value_error_saying_why() -> None:
    model = compiled(two_inputs())
    xa, xb, y = arrays()
    with pytest.raises(ValueError, match=r'expects 2 input\(s\), but it received 1 input'):
        model.predict([xa], verbose=0)
    with pytest.raises(ValueError, match=r'expects 2 input\(s\), but it received 1 input'):
        model.fit(xa, y, verbose=0)
    with pytest.raises(ValueError, match=r'Missing data for input "b"'):
        model.evaluate({"a": xa}, y, verbose=0)
    with pytest.raises(ValueError, match=r"Data cardinality is ambiguous.*sizes: 24, 23"):
        model.predict([xa, xb[:23]], verbose=0)
    with pytest.raises(ValueError, match=r"Input 1 with name 'b' .*expected shape=\(None, 2, 2\)"):
        model.predict([xa, xb.reshape(24, 4)], verbose=0)
    with pytest.raises(ValueError, match=r"Data cardinality is ambiguous"):
        model.fit([xa, xb], y, verbose=0, validation_data=([xa, xb[:5]], y))


def test_model_inputs_that_are_not_inputs_are_refused() -> None:
    a = keras.Input(shape=(3,), name="a")
    b = keras.Input(shape=(2,), name="b")
    h = layers.Dense(2)(a)
    with pytest.raises(ValueError, match="not the output of layer"):
        keras.Model([a, h], layers.Add()([h, b]))
    with pytest.raises(ValueError, match="depend on input 'b', which is not among"):
        keras.Model([a], layers.Add()([h, b]))
    with pytest.raises(ValueError, match="do not depend on the input 'b'"):
        keras.Model([a, b], layers.Dense(1)(h))


def test_it_saves_and_loads_with_its_inputs(tmp_path: Path) -> None:
    keras.utils.set_random_seed(3)
    model = compiled(two_inputs("ba"))
    xa, xb, y = arrays()
    model.fit([xb, xa], y, epochs=1, verbose=0)
    want = model.predict([xb, xa], verbose=0)

    again = keras.models.model_from_json(model.to_json())
    assert [t.name for t in again.inputs] == ["b", "a"]
    assert [l.name for l in again.layers] == [l.name for l in model.layers]
    model.save_weights(tmp_path / "m.weights.h5")
    again.load_weights(tmp_path / "m.weights.h5")
    compiled(again)
    np.testing.assert_array_equal(again.predict([xb, xa], verbose=0), want)

    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert [t.name for t in loaded.inputs] == ["b", "a"]
    np.testing.assert_array_equal(loaded.predict([xb, xa], verbose=0), want)
    loaded.fit([xb, xa], y, epochs=1, verbose=0)


def test_summary_connects_each_layer_to_the_inputs_it_reads() -> None:
    model = two_inputs()
    lines: list[str] = []
    model.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert "Connected to" in text
    assert "a (InputLayer)" in text and "b (InputLayer)" in text
    assert "flatten[0][0]" in text or "flatten_" in text
