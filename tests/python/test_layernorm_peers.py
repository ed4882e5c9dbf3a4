"""LayerNormalization against Keras 3.15 itself: forward values from the same weights (gamma and
beta not at their initial values, two epsilons, over the last axis of 2-D and 3-D samples), a
model with it trained for one epoch (5 steps, no shuffling, Adam) from the same initial weights,
and the model JSON each side writes read by the other. Keras runs in a subprocess with the
peers' Python ($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python); without one,
skipped with a message saying so."""

import json
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import run_keras

KERAS_FORWARD = """
    import json
    import numpy as np
    import keras
    from keras import layers
    out = {}
    for name, shape, eps, center, scale in [("flat", (7,), 1e-3, True, True),
                                            ("seq", (3, 5), 1e-2, True, True),
                                            ("no_center", (7,), 1e-3, False, True),
                                            ("no_scale", (7,), 1e-3, True, False)]:
        x = np.load(f"x_{name}.npy")
        model = keras.Sequential([keras.Input(shape),
                                  layers.LayerNormalization(epsilon=eps, center=center,
                                                            scale=scale),
                                  layers.Flatten()])
        model.set_weights([np.load(f"w_{name}_{i}.npy") for i in range(len(model.weights))])
        out[name] = model.predict(x, verbose=0).tolist()
    print(json.dumps(out))
"""

CASES = [
    ("flat", (7,), 1e-3, True, True),
    ("seq", (3, 5), 1e-2, True, True),
    ("no_center", (7,), 1e-3, False, True),
    ("no_scale", (7,), 1e-3, True, False),
]


def test_forward_values_are_keras_s(tmp_path: Path) -> None:
    rs = np.random.RandomState(3)
    mine = {}
    for name, shape, eps, center, scale in CASES:
        x = (rs.randn(12, *shape) * 3 + 1).astype(np.float32)
        model = keras.Sequential(
            [
                keras.Input(shape),
                layers.LayerNormalization(epsilon=eps, center=center, scale=scale),
                layers.Flatten(),  # crossover's outputs are flat; Keras's the same values
            ]
        )
        weights = [rs.randn(shape[-1]).astype(np.float32) for _ in model.get_weights()]
        model.set_weights(weights)
        np.save(tmp_path / f"x_{name}.npy", x)
        for i, w in enumerate(weights):
            np.save(tmp_path / f"w_{name}_{i}.npy", w)
        mine[name] = model.predict(x, verbose=0)
    theirs = run_keras(KERAS_FORWARD, tmp_path)
    for name, *_ in CASES:
        np.testing.assert_allclose(mine[name], np.array(theirs[name]), rtol=1e-5, atol=2e-5)


KERAS_TRAIN = """
    import json
    import numpy as np
    import keras
    from keras import layers
    x, y = np.load("x.npy"), np.load("y.npy")
    model = keras.Sequential([keras.Input((6,)), layers.Dense(8, activation="relu"),
                              layers.LayerNormalization(), layers.Dense(3, activation="softmax")])
    model.set_weights([np.load(f"w{i}.npy") for i in range(len(model.weights))])
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    h = model.fit(x, y, epochs=1, batch_size=8, shuffle=False, verbose=0).history
    print(json.dumps({"loss": h["loss"][0], "accuracy": h["accuracy"][0],
                      "eval": model.evaluate(x, y, verbose=0)[0],
                      "weights": [w.tolist() for w in model.get_weights()],
                      "names": [w.path for w in model.weights],
                      "json": model.to_json()}))
"""


def test_a_model_with_it_trains_as_keras_does(tmp_path: Path) -> None:
    rs = np.random.RandomState(5)
    x = rs.rand(40, 6).astype(np.float32)
    y = rs.randint(0, 3, 40).astype(np.float32)
    model = keras.Sequential(
        [
            keras.Input((6,)),
            layers.Dense(8, activation="relu"),
            layers.LayerNormalization(),
            layers.Dense(3, activation="softmax"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.01),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    initial = model.get_weights()
    assert len(initial) == 6  # kernel, bias, gamma, beta, kernel, bias
    np.testing.assert_array_equal(initial[2], np.ones(8, np.float32))
    np.testing.assert_array_equal(initial[3], np.zeros(8, np.float32))
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    for i, w in enumerate(initial):
        np.save(tmp_path / f"w{i}.npy", w)
    theirs = run_keras(KERAS_TRAIN, tmp_path)
    h = model.fit(x, y, epochs=1, batch_size=8, shuffle=False, verbose=0).history
    assert h["loss"][0] == pytest.approx(theirs["loss"], abs=1e-5)
    assert h["accuracy"][0] == pytest.approx(theirs["accuracy"])
    for mine, keras_w in zip(model.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(mine, np.array(keras_w), atol=1e-5)
    loss, _ = model.evaluate(x, y, verbose=0)
    assert loss == pytest.approx(theirs["eval"], abs=1e-5)
    # Keras's variable paths end layer_normalization/gamma, layer_normalization/beta: ours.
    assert model.layers[1].name == "layer_normalization"
    assert [n.split("/", 1)[1] for n in theirs["names"] if "normalization" in n] == [
        "layer_normalization/gamma",
        "layer_normalization/beta",
    ]
    # Keras 3's JSON of this model reads here, and ours as Keras writes it.
    theirs_cfg = json.loads(theirs["json"])["config"]["layers"][2]["config"]
    ours_cfg = json.loads(model.to_json())["config"]["layers"][2]["config"]
    for key in ("axis", "epsilon", "center", "scale", "rms_scaling"):
        assert ours_cfg[key] == theirs_cfg[key], key
    back = keras.models.model_from_json(theirs["json"])
    assert isinstance(back.layers[1], layers.LayerNormalization)
    assert back.layers[1].epsilon == pytest.approx(1e-3)


KERAS_READ = """
    import json
    import keras
    model = keras.models.model_from_json(open("model.json").read())
    ln = model.layers[1]
    print(json.dumps({"class": type(ln).__name__, "epsilon": ln.epsilon, "center": ln.center,
                      "scale": ln.scale, "weights": [w.path for w in ln.weights]}))
"""


def test_keras_reads_the_json_crossover_writes(tmp_path: Path) -> None:
    model = keras.Sequential(
        [
            keras.Input((6,)),
            layers.Dense(5),
            layers.LayerNormalization(epsilon=1e-5, center=False),
            layers.Dense(2, activation="softmax"),
        ]
    )
    (tmp_path / "model.json").write_text(model.to_json())
    theirs = run_keras(KERAS_READ, tmp_path)
    assert theirs["class"] == "LayerNormalization"
    assert theirs["epsilon"] == pytest.approx(1e-5)
    assert (theirs["center"], theirs["scale"]) == (False, True)
    assert [p.split("/")[-1] for p in theirs["weights"]] == ["gamma"]
