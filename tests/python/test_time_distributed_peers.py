"""TimeDistributed against Keras 3.15 itself (issue 38 item 3: a layer built from another): Keras
builds a model with TimeDistributed(Dense) layers first and in the middle and saves its
.weights.h5 (the inner Dense's variables under layers/time_distributed/layer/vars); crossover
loads that file into the same model, predicts the same values, trains one epoch to the same loss
and weights, reads Keras's JSON and writes one Keras reads back. Dense on (steps, features)
samples (Keras's Dense on the last axis) and a softmax per position, likewise. Keras runs in a subprocess with
the peers' Python ($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python); without one,
skipped with a message saying so."""

import json
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

LAYERS = (
    "keras.Input((5, 4)), layers.TimeDistributed(layers.Dense(6, activation='tanh')), "
    "layers.TimeDistributed(layers.Dropout(0.0)), "
    "layers.TimeDistributed(layers.Dense(2, use_bias=False)), layers.Flatten(), "
    "layers.Dense(3, activation='softmax')"
)


def model() -> keras.Sequential:
    return keras.Sequential(
        [
            keras.Input((5, 4)),
            layers.TimeDistributed(layers.Dense(6, activation="tanh")),
            layers.TimeDistributed(layers.Dropout(0.0)),
            layers.TimeDistributed(layers.Dense(2, use_bias=False)),
            layers.Flatten(),
            layers.Dense(3, activation="softmax"),
        ]
    )


def data(tmp_path: Path) -> tuple[np.ndarray, np.ndarray]:
    rs = np.random.RandomState(3)
    x = rs.standard_normal((16, 5, 4)).astype(np.float32)
    y = rs.randint(0, 3, size=16).astype(np.int64)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    return x, y


def test_keras_weights_give_keras_values_and_train_as_keras_does(tmp_path: Path) -> None:
    x, y = data(tmp_path)
    theirs = run_keras(KERAS_TRAINS_ONE_EPOCH.format(layers=LAYERS), tmp_path)
    ours = model()
    predicts_and_trains_as_keras_did(ours, tmp_path, x, y, theirs)
    # Keras's JSON reads as the same layers, each wrapper holding its Dense.
    back = keras.models.model_from_json(theirs["json"])
    assert [type(l).__name__ for l in back.layers] == ["TimeDistributed"] * 3 + ["Flatten", "Dense"]
    assert isinstance(back.layers[0].layer, layers.Dense) and back.layers[0].layer.units == 6
    mine = json.loads(ours.to_json())["config"]["layers"][1]
    keras_entry = json.loads(theirs["json"])["config"]["layers"][1]
    assert mine["config"]["layer"]["config"]["units"] == 6
    assert mine["config"]["layer"]["class_name"] == keras_entry["config"]["layer"]["class_name"]


KERAS_READS_OURS = """
    import json
    import numpy as np
    import keras
    model = keras.models.model_from_json(open("ours.json").read())
    model.load_weights("ours.weights.h5")
    print(json.dumps({"predicted": model.predict(np.load("x.npy"), verbose=0).tolist(),
                      "names": [l.name for l in model.layers],
                      "params": model.count_params()}))
"""


def test_keras_reads_the_json_and_weights_crossover_writes(tmp_path: Path) -> None:
    x, _ = data(tmp_path)
    ours = model()
    (tmp_path / "ours.json").write_text(ours.to_json())
    ours.save_weights(str(tmp_path / "ours.weights.h5"))
    theirs = run_keras(KERAS_READS_OURS, tmp_path)
    np.testing.assert_allclose(
        np.array(theirs["predicted"]), ours.predict(x, verbose=0), rtol=1e-5, atol=1e-6
    )
    assert theirs["names"] == [l.name for l in ours.layers]
    assert theirs["params"] == ours.count_params() == 4 * 6 + 6 + 6 * 2 + 10 * 3 + 3


def test_what_it_cannot_apply_is_refused_as_keras_would() -> None:
    with pytest.raises(ValueError, match="with a `keras.layers.Layer` instance"):
        layers.TimeDistributed("dense")
    with pytest.raises(ValueError, match="statistics per time step"):
        layers.TimeDistributed(layers.BatchNormalization())


DENSE_ON_STEPS = (
    "keras.Input((5, 4)), layers.Dense(6, activation='tanh'), "
    "layers.Dense(3, activation='softmax'), layers.Flatten(), "
    "layers.Dense(3, activation='softmax')"
)


def test_dense_on_the_last_axis_and_a_softmax_per_step_are_keras(tmp_path: Path) -> None:
    x, y = data(tmp_path)
    theirs = run_keras(KERAS_TRAINS_ONE_EPOCH.format(layers=DENSE_ON_STEPS), tmp_path)
    ours = keras.Sequential(
        [
            keras.Input((5, 4)),
            layers.Dense(6, activation="tanh"),
            layers.Dense(3, activation="softmax"),
            layers.Flatten(),
            layers.Dense(3, activation="softmax"),
        ]
    )
    assert ours.layers[1].output.shape == (None, 5, 3)
    predicts_and_trains_as_keras_did(ours, tmp_path, x, y, theirs)
