"""`.keras` archives both ways with Keras 3.15 itself: Keras saves an MLP and a small convnet and
crossover loads them and predicts the same outputs; crossover saves them and Keras loads them and
predicts the same. Keras runs in a subprocess with the peers' Python: $CROSSOVER_PEERS_PYTHON, else
bench/peers/.venv/bin/python (scripts/install-peers puts TensorFlow 2.21 with Keras 3 there);
without one, these tests are skipped with a message saying so."""

import json
import os
import subprocess
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers

REPO = Path(__file__).resolve().parents[2]
TOLERANCE = 1e-5


def peers_python() -> str:
    given = os.environ.get("CROSSOVER_PEERS_PYTHON")
    path = Path(given) if given else REPO / "bench" / "peers" / ".venv" / "bin" / "python"
    if not path.is_file():
        pytest.skip(
            f"no Keras to compare with: {path} does not exist (set CROSSOVER_PEERS_PYTHON to a "
            "Python with TensorFlow 2.21 and Keras 3, or run scripts/install-peers)"
        )
    return str(path)


def save_arrays(folder: Path, x: Any, y: Any, weights: list) -> None:
    """x.npy, y.npy and w0.npy, w1.npy, ... in `folder`, for a Keras script to load."""
    np.save(folder / "x.npy", x)
    np.save(folder / "y.npy", y)
    for i, w in enumerate(weights):
        np.save(folder / f"w{i}.npy", w)


def run_keras(code: str, folder: Path) -> dict:
    """Runs `code` with the peers' Python and Keras's TensorFlow backend on the CPU, in
    `folder`; its last stdout line is JSON."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(KERAS_BACKEND="tensorflow", TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="")
    result = subprocess.run(
        [peers_python(), "-c", textwrap.dedent(code)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if result.returncode != 0 and "No module named 'keras'" in result.stderr:
        pytest.skip(f"{peers_python()} has no Keras: {result.stderr.strip().splitlines()[-1]}")
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


# The Keras side of predicts_and_trains_as_keras_did: a Sequential of {layers} (its list's items,
# in Keras's words), seeded; its initial weights saved; what it predicts; one epoch as that
# helper trains; its JSON.
KERAS_TRAINS_ONE_EPOCH = """
    import json
    import numpy as np
    import keras
    from keras import layers
    keras.utils.set_random_seed(1)
    x, y = np.load("x.npy"), np.load("y.npy")
    model = keras.Sequential([{layers}])
    model.save_weights("keras.weights.h5")
    predicted = model.predict(x, verbose=0)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    h = model.fit(x, y, epochs=1, batch_size=4, shuffle=False, verbose=0).history
    print(json.dumps({{"predicted": predicted.tolist(), "loss": h["loss"][0],
                      "weights": [w.tolist() for w in model.get_weights()],
                      "json": model.to_json()}}))
"""


def predicts_and_trains_as_keras_did(
    model: keras.Sequential, folder: Path, x: np.ndarray, y: np.ndarray, theirs: dict
) -> None:
    """`model`, given the initial weights Keras saved in folder/keras.weights.h5, predicts what
    Keras predicted (theirs["predicted"]) and trains one epoch as the per-layer peer tests' Keras
    scripts do (Adam(0.01), sparse categorical cross-entropy, batch 4, no shuffling) to Keras's
    loss within 1e-5 and its weights within 1e-4 (theirs["loss"], theirs["weights"])."""
    model.load_weights(str(folder / "keras.weights.h5"))
    np.testing.assert_allclose(
        model.predict(x, verbose=0), np.array(theirs["predicted"]), rtol=1e-5, atol=1e-6
    )
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy")
    h = model.fit(x, y, epochs=1, batch_size=4, shuffle=False, verbose=0).history
    assert h["loss"][0] == pytest.approx(theirs["loss"], abs=1e-5)
    for ours, keras_w in zip(model.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(ours, np.array(keras_w), atol=1e-4)


def inputs(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    rs = np.random.RandomState(7)
    x_mlp, x_conv = rs.rand(32, 6).astype(np.float32), rs.rand(16, 8, 8, 1).astype(np.float32)
    np.save(folder / "x_mlp.npy", x_mlp)
    np.save(folder / "x_conv.npy", x_conv)
    return x_mlp, x_conv


# The same two models in Keras (below, as text) and in crossover.
KERAS_MODELS = """
    import json, sys, warnings
    import numpy as np
    import keras
    from keras import layers

    def mlp():
        return keras.Sequential([keras.Input((6,)), layers.Dense(8, activation="relu"),
                                 layers.Dropout(0.2), layers.Dense(3, activation="softmax")])

    def convnet():
        return keras.Sequential([keras.Input((8, 8, 1)),
                                 layers.Conv2D(4, (3, 3), activation="relu"),
                                 layers.MaxPooling2D((2, 2)), layers.Flatten(),
                                 layers.Dense(3, activation="softmax")])
"""


def mlp() -> keras.Sequential:
    return keras.Sequential(
        [
            keras.Input((6,)),
            layers.Dense(8, activation="relu"),
            layers.Dropout(0.2),
            layers.Dense(3, activation="softmax"),
        ]
    )


def convnet() -> keras.Sequential:
    return keras.Sequential(
        [
            keras.Input((8, 8, 1)),
            layers.Conv2D(4, (3, 3), activation="relu"),
            layers.MaxPooling2D((2, 2)),
            layers.Flatten(),
            layers.Dense(3, activation="softmax"),
        ]
    )


def test_keras_saves_an_mlp_and_a_convnet_and_crossover_loads_them(tmp_path):
    x_mlp, x_conv = inputs(tmp_path)
    keras_info = run_keras(
        KERAS_MODELS
        + """
    keras.utils.set_random_seed(3)
    rs = np.random.RandomState(3)
    out = {"version": keras.__version__}
    for name, make, optimizer in (("mlp", mlp, keras.optimizers.Adam(0.002)),
                                  ("conv", convnet, keras.optimizers.SGD(0.05, momentum=0.9))):
        x = np.load(f"x_{name}.npy")
        model = make()
        model.compile(optimizer, "sparse_categorical_crossentropy", metrics=["accuracy"])
        model.fit(x, rs.randint(0, 3, len(x)), epochs=2, batch_size=8, verbose=0)
        model.save(f"keras_{name}.keras")
        np.save(f"keras_{name}_pred.npy", model.predict(x, verbose=0))
    # Keras's serialized objects in compile_config: a schedule, a loss object, a metric object,
    # a loss function; and BatchNormalization's moving statistics in the weights.
    objects = keras.Sequential([keras.Input((6,)), layers.Dense(8, activation="relu"),
                                layers.BatchNormalization(), layers.Dense(3, activation="softmax")])
    decay = keras.optimizers.schedules.ExponentialDecay(0.01, 100, 0.9, staircase=True)
    objects.compile(keras.optimizers.RMSprop(decay), keras.losses.SparseCategoricalCrossentropy(),
                    metrics=[keras.metrics.SparseCategoricalAccuracy()])
    objects.fit(np.load("x_mlp.npy"), rs.randint(0, 3, 32), epochs=2, batch_size=8, verbose=0)
    objects.save("keras_objects.keras")
    np.save("keras_objects_pred.npy", objects.predict(np.load("x_mlp.npy"), verbose=0))
    function = mlp()
    function.compile("adam", keras.losses.sparse_categorical_crossentropy, metrics=["acc"])
    function.save("keras_function.keras")
    uncompiled = mlp()
    uncompiled.save("keras_uncompiled.keras")
    np.save("keras_uncompiled_pred.npy", uncompiled.predict(np.load("x_mlp.npy"), verbose=0))
    print(json.dumps(out))
    """,
        tmp_path,
    )
    assert keras_info["version"].startswith("3.")
    for name, x in (("mlp", x_mlp), ("conv", x_conv), ("objects", x_mlp), ("uncompiled", x_mlp)):
        model = keras.models.load_model(tmp_path / f"keras_{name}.keras")
        got = model.predict(x, verbose=0)
        want = np.load(tmp_path / f"keras_{name}_pred.npy")
        assert got.shape == want.shape
        assert np.max(np.abs(got - want)) <= TOLERANCE, name
    mlp_model = keras.models.load_model(tmp_path / "keras_mlp.keras")
    assert isinstance(mlp_model.optimizer, keras.optimizers.Adam)
    assert float(mlp_model.optimizer.learning_rate) == pytest.approx(0.002, rel=1e-6)
    conv_model = keras.models.load_model(tmp_path / "keras_conv.keras")
    assert isinstance(conv_model.optimizer, keras.optimizers.SGD)
    assert conv_model.optimizer.momentum == pytest.approx(0.9)
    assert keras.models.load_model(tmp_path / "keras_uncompiled.keras").optimizer is None
    objects = keras.models.load_model(tmp_path / "keras_objects.keras")
    assert isinstance(objects.optimizer, keras.optimizers.RMSprop)
    assert objects.optimizer._schedule is not None and objects.optimizer._schedule.staircase
    assert isinstance(objects.loss, keras.losses.SparseCategoricalCrossentropy)
    function = keras.models.load_model(tmp_path / "keras_function.keras")
    assert function.loss == "sparse_categorical_crossentropy"
    # Compiled from Keras's compile_config: it trains on.
    history = mlp_model.fit(x_mlp, np.zeros(len(x_mlp)), epochs=1, verbose=0)
    assert sorted(history.history) == ["accuracy", "loss"]


def test_crossover_saves_an_mlp_and_a_convnet_and_keras_loads_them(tmp_path):
    x_mlp, x_conv = inputs(tmp_path)
    rs = np.random.RandomState(4)
    for name, model, optimizer, x in (
        ("mlp", mlp(), keras.optimizers.Adam(0.002), x_mlp),
        ("conv", convnet(), keras.optimizers.RMSprop(0.001), x_conv),
    ):
        model.compile(optimizer, "sparse_categorical_crossentropy", metrics=["accuracy"])
        model.fit(x, rs.randint(0, 3, len(x)), epochs=2, batch_size=8, verbose=0)
        model.save(tmp_path / f"crossover_{name}.keras")
        np.save(tmp_path / f"crossover_{name}_pred.npy", model.predict(x, verbose=0))
    ckpt = mlp()
    ckpt.compile("adam", "sparse_categorical_crossentropy")
    ckpt.fit(
        x_mlp,
        rs.randint(0, 3, len(x_mlp)),
        epochs=1,
        verbose=0,
        callbacks=[keras.callbacks.ModelCheckpoint(str(tmp_path / "crossover_ckpt.keras"))],
    )
    np.save(tmp_path / "crossover_ckpt_pred.npy", ckpt.predict(x_mlp, verbose=0))
    mlp().save(tmp_path / "crossover_uncompiled.keras")

    found = run_keras(
        """
    import json, warnings
    import numpy as np
    import keras
    out = {}
    for name, x in (("mlp", "x_mlp"), ("conv", "x_conv"), ("ckpt", "x_mlp"), ("uncompiled", None)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # crossover writes no optimizer state
            model = keras.models.load_model(f"crossover_{name}.keras")
        entry = {"compiled": bool(model.compiled)}
        if x is not None:
            np.save(f"keras_{name}_pred.npy", model.predict(np.load(f"{x}.npy"), verbose=0))
        if model.compiled:
            entry["optimizer"] = type(model.optimizer).__name__
            entry["learning_rate"] = float(model.optimizer.learning_rate)
            entry["loss"] = model.loss
        out[name] = entry
    print(json.dumps(out))
    """,
        tmp_path,
    )
    for name in ("mlp", "conv", "ckpt"):
        got = np.load(tmp_path / f"keras_{name}_pred.npy")
        want = np.load(tmp_path / f"crossover_{name}_pred.npy")
        assert got.shape == want.shape
        assert np.max(np.abs(got - want)) <= TOLERANCE, name
    assert found["mlp"]["optimizer"] == "Adam"
    assert found["mlp"]["learning_rate"] == pytest.approx(0.002, rel=1e-6)
    assert found["mlp"]["loss"] == "sparse_categorical_crossentropy"
    assert found["conv"]["optimizer"] == "RMSprop"
    assert found["conv"]["learning_rate"] == pytest.approx(0.001, rel=1e-6)
    assert found["ckpt"]["compiled"] is True
    assert found["uncompiled"] == {"compiled": False}
