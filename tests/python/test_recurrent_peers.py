"""SimpleRNN, LSTM, GRU and RNN(cell) against Keras 3.15 itself: Keras builds a model of
recurrent layers over (steps, features) samples (stacked with return_sequences, go_backwards, a
GRU of each reset placement, a SimpleRNN of relu, a cell in keras.layers.RNN) and saves its
.weights.h5 (each layer's weights under its cell: layers/lstm/cell/vars); crossover loads that
file into the same model, predicts the same values and trains one epoch to the same loss and
weights; Keras's JSON and its .keras file read back as the same layers and predictions. Keras
runs in a subprocess with the peers' Python ($CROSSOVER_PEERS_PYTHON, else
bench/peers/.venv/bin/python); without one, skipped with a message saying so."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import (
    KERAS_TRAINS_ONE_EPOCH,
    predicts_and_trains_as_keras_did,
    run_keras,
)

# Each case: the layers in Keras's words (both sides evaluate the same text).
CASES = {
    "lstm": "keras.Input((7, 3)), layers.LSTM(6, return_sequences=True), "
    "layers.LSTM(5, go_backwards=True), layers.Dense(3, activation='softmax')",
    "gru": "keras.Input((7, 3)), layers.GRU(5, return_sequences=True, go_backwards=True), "
    "layers.GRU(4, reset_after=False, return_sequences=True), layers.Flatten(), "
    "layers.Dense(3, activation='softmax')",
    "simple_rnn": "keras.Input((7, 3)), layers.SimpleRNN(6, activation='relu', "
    "return_sequences=True), layers.SimpleRNN(4, use_bias=False), "
    "layers.Dense(3, activation='softmax')",
    "rnn_cell": "keras.Input((7, 3)), layers.RNN(layers.LSTMCell(5)), "
    "layers.Dense(3, activation='softmax')",
}


def data(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    rs = np.random.RandomState(13)
    x = rs.standard_normal((16, 7, 3)).astype(np.float32)
    y = rs.randint(0, 3, size=16).astype(np.int64)
    np.save(folder / "x.npy", x)
    np.save(folder / "y.npy", y)
    return x, y


@pytest.mark.parametrize("case", sorted(CASES))
def test_keras_weights_give_keras_values_and_train_as_keras_does(case: str, tmp_path: Path) -> None:
    x, y = data(tmp_path)
    theirs = run_keras(KERAS_TRAINS_ONE_EPOCH.format(layers=CASES[case]), tmp_path)
    ours = keras.Sequential(eval(f"[{CASES[case]}]", {"keras": keras, "layers": layers}))
    predicts_and_trains_as_keras_did(ours, tmp_path, x, y, theirs)
    back = keras.models.model_from_json(theirs["json"])
    assert [type(l).__name__ for l in back.layers] == [type(l).__name__ for l in ours.layers]
    assert back.count_params() == ours.count_params()


KERAS_SAVES = """
    import json
    import numpy as np
    import keras
    from keras import layers
    keras.utils.set_random_seed(3)
    x = np.load("x.npy")
    inputs = keras.Input((7, 3))
    h = layers.LSTM(6, return_sequences=True)(inputs)
    h = layers.GRU(5)(h)
    model = keras.Model(inputs, layers.Dense(3, activation="softmax")(h))
    model.save("model.keras")
    print(json.dumps({"predicted": model.predict(x, verbose=0).tolist(),
                      "summary_params": model.count_params(),
                      "names": [w.path for w in model.weights]}))
"""


def test_a_keras_file_keras_wrote_loads_predicts_as_keras_did_and_trains(tmp_path: Path) -> None:
    x, y = data(tmp_path)
    theirs = run_keras(KERAS_SAVES, tmp_path)
    model = keras.models.load_model(str(tmp_path / "model.keras"))
    np.testing.assert_allclose(model.predict(x, verbose=0), theirs["predicted"], atol=1e-5)
    assert model.count_params() == theirs["summary_params"]
    # The LSTM's kernel (3, 24), its recurrent kernel (6, 24) and bias (24,), the cell's.
    assert [w.shape for w in model.layers[1].get_weights()] == [(3, 24), (6, 24), (24,)]
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    before = model.evaluate(x, y, verbose=0)
    model.fit(x, y, epochs=5, batch_size=4, verbose=0)
    assert model.evaluate(x, y, verbose=0) < before


def test_the_defaults_are_kerass() -> None:
    model = keras.Sequential([keras.Input((5, 2)), layers.LSTM(3)])
    kernel, recurrent, bias = model.get_weights()
    assert kernel.shape == (2, 12) and recurrent.shape == (3, 12)
    # unit_forget_bias: the forget gate's block (the second) of the bias starts at ones.
    np.testing.assert_array_equal(bias, np.r_[np.zeros(3), np.ones(3), np.zeros(6)])
    # The orthogonal recurrent kernel: (3, 12) with orthonormal rows.
    np.testing.assert_allclose(recurrent @ recurrent.T, np.eye(3), atol=1e-5)
    gru = keras.Sequential([keras.Input((5, 2)), layers.GRU(3)])
    assert [w.shape for w in gru.get_weights()] == [(2, 9), (3, 9), (2, 9)]
    assert model.layers[0].get_config()["units"] == 3
    assert layers.LSTM.from_config(model.layers[0].get_config()).units == 3


def test_dropout_drops_the_input_in_training_only() -> None:
    """Keras's dropout on a recurrent layer's input: in fit (one mask per sample and feature, the
    same at every step, as Keras 3's cell draws it), not in predict or evaluate."""
    rs = np.random.RandomState(5)
    x = rs.standard_normal((32, 6, 3)).astype(np.float32)
    y = rs.randint(0, 3, size=32)

    def model(rate: float) -> keras.Sequential:
        return keras.Sequential(
            [keras.Input((6, 3)), layers.GRU(4, dropout=rate), layers.Dense(3, "softmax")]
        )

    plain, dropped = model(0.0), model(0.5)
    dropped.set_weights(plain.get_weights())
    np.testing.assert_array_equal(dropped.predict(x, verbose=0), plain.predict(x, verbose=0))
    assert dropped.layers[0].get_config()["dropout"] == 0.5
    for m in (plain, dropped):
        m.compile(optimizer=keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy")
    assert dropped.evaluate(x, y, verbose=0) == pytest.approx(plain.evaluate(x, y, verbose=0))
    h_plain = plain.fit(x, y, epochs=1, batch_size=8, shuffle=False, verbose=0).history
    h_dropped = dropped.fit(x, y, epochs=1, batch_size=8, shuffle=False, verbose=0).history
    assert np.isfinite(h_dropped["loss"][0]) and h_dropped["loss"][0] != h_plain["loss"][0]
    # Keras clamps the rates to [0, 1].
    assert layers.LSTM(2, dropout=-0.5).get_config()["dropout"] == 0.0


def test_what_crossover_cannot_run_is_one_clear_error() -> None:
    with pytest.raises(ValueError, match="dropout"):
        layers.LSTM(4, dropout=1.0)
    with pytest.raises(ValueError, match="recurrent_dropout"):
        layers.GRU(4, recurrent_dropout=0.2)
    with pytest.raises(ValueError, match="return_state"):
        layers.LSTM(4, return_state=True)
    with pytest.raises(ValueError, match="activation 'relu'"):
        layers.LSTM(4, activation="relu")
    with pytest.raises(ValueError, match="stateful"):
        layers.SimpleRNN(4, stateful=True)
    with pytest.raises(ValueError, match="cell"):
        layers.RNN(layers.Dense(3))
    cell_alone = keras.Sequential([keras.Input((5,)), layers.LSTMCell(3)])
    with pytest.raises(ValueError, match="the cell of a recurrent layer"):
        cell_alone.compile(loss="mse")
    model = keras.Sequential([keras.Input((5, 2, 1)), layers.LSTM(3)])
    with pytest.raises(ValueError, match=r"\(steps, features\)"):
        model.compile(loss="mse")
