"""compile(metrics=[...]) beyond accuracy against Keras 3.15 itself: the same small models from the
same initial weights, fit without shuffling (and with a partial last batch and validation data),
then evaluate; History's keys and per-epoch values, and evaluate's list and dict, agree (values
within 1e-4). Keras runs in a subprocess with the peers' Python ($CROSSOVER_PEERS_PYTHON, else
bench/peers/.venv/bin/python); without one, skipped with a message saying so."""

import json
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import run_keras

# (loss, metrics as Python source, output units, output activation)
CASES = {
    "classifier": (
        "categorical_crossentropy",
        '[keras.metrics.CategoricalAccuracy(name="acc"),'
        ' keras.metrics.MeanSquaredError(name="mse"), "mae",'
        ' keras.metrics.RootMeanSquaredError(), "top_k_categorical_accuracy"]',
        4,
        "softmax",
    ),
    "sparse": (
        "sparse_categorical_crossentropy",
        '["accuracy", "sparse_top_k_categorical_accuracy",'
        ' keras.metrics.SparseCategoricalAccuracy(name="sca")]',
        4,
        "softmax",
    ),
    "regression": ("mse", '["mae", "root_mean_squared_error"]', 1, None),
    "binary": ("binary_crossentropy", '["accuracy", "mse", "binary_accuracy"]', 1, "sigmoid"),
    # The classes' own arguments: k other than 5, a threshold other than 0.5.
    "top_k": (
        "categorical_crossentropy",
        "[keras.metrics.TopKCategoricalAccuracy(k=2),"
        ' keras.metrics.TopKCategoricalAccuracy(k=1, name="top1")]',
        4,
        "softmax",
    ),
    "sparse_top_k": (
        "sparse_categorical_crossentropy",
        '["accuracy", keras.metrics.SparseTopKCategoricalAccuracy(k=3, name="top3")]',
        4,
        "softmax",
    ),
    "threshold": (
        "binary_crossentropy",
        '["accuracy", keras.metrics.BinaryAccuracy(threshold=0.3),'
        ' keras.metrics.BinaryAccuracy(threshold=0.7, name="ba7")]',
        1,
        "sigmoid",
    ),
}

KERAS_FIT = """
    import json
    import numpy as np
    import keras
    from keras import layers
    x, y, vx, vy = (np.load(f"{{n}}.npy") for n in ("x", "y", "vx", "vy"))
    weights = [np.load(f"w{{i}}.npy") for i in range(4)]
    model = keras.Sequential([keras.Input((6,)), layers.Dense(8, activation="relu"),
                              layers.Dense({units}, activation={activation!r})])
    model.set_weights(weights)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="{loss}", metrics={metrics})
    h = model.fit(x, y, epochs=3, batch_size=16, shuffle=False, verbose=0,
                  validation_data=(vx, vy)).history
    print(json.dumps({{"history": {{k: [float(v) for v in vs] for k, vs in h.items()}},
                      "keys": list(h.keys()),
                      "evaluate": [float(v) for v in model.evaluate(x, y, verbose=0)],
                      "evaluate_dict": {{k: float(v) for k, v in
                                        model.evaluate(x, y, verbose=0, return_dict=True).items()}}
                      }}))
"""


def data(case: str, rs: np.random.RandomState, n: int) -> tuple[np.ndarray, np.ndarray]:
    x = rs.rand(n, 6).astype(np.float32)
    labels = rs.randint(0, 4, n)
    loss = CASES[case][0]
    if loss == "categorical_crossentropy":
        return x, np.eye(4, dtype=np.float32)[labels]
    if loss == "sparse_categorical_crossentropy":
        return x, labels.astype(np.float32)
    if loss == "mse":
        return x, (x[:, 0] * 2 - x[:, 1]).astype(np.float32)
    return x, (labels % 2).astype(np.float32)


@pytest.mark.parametrize("case", sorted(CASES))
def test_history_and_evaluate_match_keras(case: str, tmp_path: Path) -> None:
    loss, metrics, units, activation = CASES[case]
    rs = np.random.RandomState(5)
    x, y = data(case, rs, 75)  # batches of 16: four and a partial one of 11
    vx, vy = data(case, rs, 21)
    model = keras.Sequential(
        [
            keras.Input((6,)),
            layers.Dense(8, activation="relu"),
            layers.Dense(units, activation=activation),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.01),
        loss=loss,
        metrics=eval(metrics, {"keras": keras}),
    )
    model.build((None, 6))
    for name, a in {"x": x, "y": y, "vx": vx, "vy": vy}.items():
        np.save(tmp_path / f"{name}.npy", a)
    for i, w in enumerate(model.get_weights()):
        np.save(tmp_path / f"w{i}.npy", w)
    theirs = run_keras(
        KERAS_FIT.format(units=units, activation=activation, loss=loss, metrics=metrics), tmp_path
    )
    h = model.fit(
        x, y, epochs=3, batch_size=16, shuffle=False, verbose=0, validation_data=(vx, vy)
    ).history
    assert list(h.keys()) == theirs["keys"]
    for key, values in theirs["history"].items():
        np.testing.assert_allclose(h[key], values, atol=1e-4, err_msg=key)
    np.testing.assert_allclose(model.evaluate(x, y, verbose=0), theirs["evaluate"], atol=1e-4)
    mine = model.evaluate(x, y, verbose=0, return_dict=True)
    assert list(mine) == list(theirs["evaluate_dict"])
    np.testing.assert_allclose(
        list(mine.values()), list(theirs["evaluate_dict"].values()), atol=1e-4
    )
