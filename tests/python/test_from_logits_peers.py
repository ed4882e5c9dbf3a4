"""from_logits=True against Keras 3.15 itself: the same linear-output model from the same initial
weights, one epoch without shuffling, Adam; the epoch's loss (and for the categorical ones the
accuracy), evaluate's loss and the trained weights agree. Keras runs in a subprocess with the
peers' Python ($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python); without one, skipped
with a message saying so."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers, losses
from test_keras_archive_peers import run_keras

KERAS_TRAIN = """
    import json
    import numpy as np
    import keras
    from keras import layers
    x, y = np.load("x.npy"), np.load("y.npy")
    weights = [np.load(f"w{{i}}.npy") for i in range(4)]
    model = keras.Sequential([keras.Input((6,)), layers.Dense(8, activation="relu"),
                              layers.Dense(3)])
    model.set_weights(weights)
    loss = getattr(keras.losses, "{cls}")(from_logits=True)
    model.compile(optimizer=keras.optimizers.Adam(0.01), loss=loss, metrics=["accuracy"])
    h = model.fit(x, y, epochs=1, batch_size=8, shuffle=False, verbose=0).history
    ev = model.evaluate(x, y, verbose=0)
    print(json.dumps({{"loss": h["loss"][0], "accuracy": h["accuracy"][0], "eval": ev[0],
                      "weights": [w.tolist() for w in model.get_weights()],
                      "logits": model.predict(x[:4], verbose=0).tolist()}}))
"""


@pytest.mark.parametrize(
    "cls", ["SparseCategoricalCrossentropy", "CategoricalCrossentropy", "BinaryCrossentropy"]
)
def test_from_logits_trains_as_keras_does(cls: str, tmp_path: Path) -> None:
    rs = np.random.RandomState(5)
    x = rs.rand(40, 6).astype(np.float32)
    labels = rs.randint(0, 3, 40)
    if cls == "SparseCategoricalCrossentropy":
        y = labels.astype(np.float32)
    elif cls == "CategoricalCrossentropy":
        y = np.eye(3, dtype=np.float32)[labels]
    else:
        y = (rs.rand(40, 3) > 0.5).astype(np.float32)
    model = keras.Sequential(
        [keras.Input((6,)), layers.Dense(8, activation="relu"), layers.Dense(3)]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(0.01),
        loss=getattr(losses, cls)(from_logits=True),
        metrics=["accuracy"],
    )
    initial = model.get_weights()
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    for i, w in enumerate(initial):
        np.save(tmp_path / f"w{i}.npy", w)
    theirs = run_keras(KERAS_TRAIN.format(cls=cls), tmp_path)
    h = model.fit(x, y, epochs=1, batch_size=8, shuffle=False, verbose=0).history
    assert h["loss"][0] == pytest.approx(theirs["loss"], abs=1e-4)
    if cls != "BinaryCrossentropy":  # Keras's binary accuracy thresholds the logits at 0.5
        assert h[next(k for k in h if k != "loss")][0] == pytest.approx(theirs["accuracy"])
    for mine, keras_w in zip(model.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(mine, np.array(keras_w), atol=1e-4)
    loss, _ = model.evaluate(x, y, verbose=0)
    assert loss == pytest.approx(theirs["eval"], abs=1e-4)
    # predict gives the logits, as Keras's does.
    np.testing.assert_allclose(model.predict(x[:4], verbose=0), theirs["logits"], atol=1e-4)


# from_logits=True after a final activation, as Keras 3.15 trains it (it warns): after a sigmoid
# or softmax (a Dense's, an Activation's or a Softmax layer's) the loss takes the activation's
# input back as the logits; after another activation (tanh), the activated output is the logits.
# Metrics and predict see the model's activated output. Each case: (name, the final layers as
# Keras text, the loss class, the extra metric).
FINAL_CASES = [
    (
        "dense_sigmoid_scce",
        "layers.Dense(10, activation='sigmoid')",
        "SparseCategoricalCrossentropy",
        None,
    ),
    (
        "dense_softmax_cce",
        "layers.Dense(10, activation='softmax')",
        "CategoricalCrossentropy",
        "mse",
    ),
    (
        "dense_sigmoid_cce",
        "layers.Dense(10, activation='sigmoid')",
        "CategoricalCrossentropy",
        "mae",
    ),
    (
        "softmax_layer_scce",
        "layers.Dense(10), layers.Softmax()",
        "SparseCategoricalCrossentropy",
        None,
    ),
    ("dense_tanh_cce", "layers.Dense(10, activation='tanh')", "CategoricalCrossentropy", "mse"),
]

# from_logits=False: Keras 3.15 on TensorFlow keeps a sigmoid's and a softmax's input on their
# output (_keras_logits), and its cross-entropies read it back as the logits all the same (without
# a warning): a sigmoid output under a categorical cross-entropy trains as softmax logits, a
# softmax output under binary cross-entropy as sigmoid logits, a sigmoid under binary
# cross-entropy unclipped. Probabilities no sigmoid or softmax made (softplus) are renormalised.
PROBABILITY_CASES = [
    (
        "dense_sigmoid_scce",
        "layers.Dense(10, activation='sigmoid')",
        "SparseCategoricalCrossentropy",
        None,
    ),
    (
        "dense_sigmoid_cce",
        "layers.Dense(10, activation='sigmoid')",
        "CategoricalCrossentropy",
        "mae",
    ),
    (
        "activation_sigmoid_scce",
        "layers.Dense(10), layers.Activation('sigmoid')",
        "SparseCategoricalCrossentropy",
        None,
    ),
    ("dense_softmax_bce", "layers.Dense(10, activation='softmax')", "BinaryCrossentropy", "mse"),
    ("dense_sigmoid_bce", "layers.Dense(10, activation='sigmoid')", "BinaryCrossentropy", None),
    (
        "dense_softplus_scce",
        "layers.Dense(10, activation='softplus')",
        "SparseCategoricalCrossentropy",
        None,
    ),
]

KERAS_FINAL = """
    import json, warnings
    import numpy as np
    import keras
    from keras import layers
    x, labels, bits = np.load("x.npy"), np.load("labels.npy"), np.load("bits.npy")
    out = {{}}
    for name, final, cls, metric in {cases!r}:
        y = (labels if cls.startswith("Sparse") else bits if cls.startswith("Binary")
             else np.eye(10, dtype="float32")[labels])
        model = keras.Sequential([keras.Input((4, 4)), layers.Flatten(), *eval("[" + final + "]")])
        model.set_weights([np.load(f"{{name}}_w{{i}}.npy") for i in range(2)])
        loss = getattr(keras.losses, cls)(from_logits={from_logits})
        model.compile(optimizer=keras.optimizers.SGD(0.5), loss=loss,
                      metrics=["accuracy"] + ([metric] if metric else []))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            h = model.fit(x, y, epochs=1, batch_size=32, shuffle=False, verbose=0).history
        ev = model.evaluate(x, y, verbose=0, return_dict=True)
        out[name] = {{"history": {{k: v[0] for k, v in h.items()}}, "eval": ev,
                     "weights": [w.tolist() for w in model.get_weights()],
                     "predict": model.predict(x[:5], verbose=0).tolist(),
                     "warned": any("from_logits=True" in str(w.message) for w in caught)}}
    print(json.dumps(out))
"""


def final_model(final: str):
    return keras.Sequential(
        [keras.Input((4, 4)), layers.Flatten(), *eval("[" + final + "]", {"layers": layers})]
    )


@pytest.mark.parametrize("from_logits", [True, False])
def test_after_a_final_activation_trains_as_keras_does(from_logits: bool, tmp_path: Path) -> None:
    cases = FINAL_CASES if from_logits else PROBABILITY_CASES
    rs = np.random.RandomState(11)
    x = rs.rand(300, 4, 4).astype(np.float32)
    labels = rs.randint(0, 10, 300)
    bits = (rs.rand(300, 10) > 0.5).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "labels.npy", labels)
    np.save(tmp_path / "bits.npy", bits)
    mine = {}
    for name, final, cls, metric in cases:
        y = (
            labels.astype(np.float32)
            if cls.startswith("Sparse")
            else bits if cls.startswith("Binary") else np.eye(10)[labels]
        )
        model = final_model(final)
        model.compile(
            optimizer=keras.optimizers.SGD(0.5),
            loss=getattr(losses, cls)(from_logits=from_logits),
            metrics=["accuracy"] + ([metric] if metric else []),
        )
        for i, w in enumerate(model.get_weights()):
            np.save(tmp_path / f"{name}_w{i}.npy", w)
        h = model.fit(x, y.astype(np.float32), epochs=1, batch_size=32, shuffle=False, verbose=0)
        mine[name] = {
            "history": {k: v[0] for k, v in h.history.items()},
            "eval": model.evaluate(x, y.astype(np.float32), verbose=0, return_dict=True),
            "weights": model.get_weights(),
            "predict": model.predict(x[:5], verbose=0),
        }
    theirs = run_keras(KERAS_FINAL.format(cases=cases, from_logits=from_logits), tmp_path)
    for name, final, cls, _ in cases:
        ours, ref = mine[name], theirs[name]
        assert sorted(ours["history"]) == sorted(ref["history"]), name
        # (Keras 3's "accuracy" of a binary cross-entropy over 10 columns is categorical: it
        # picks by the output's last axis.)
        for key, value in ref["history"].items():
            assert ours["history"][key] == pytest.approx(value, abs=1e-4), (name, key)
        for key, value in ref["eval"].items():
            assert ours["eval"][key] == pytest.approx(value, abs=1e-4), (name, key)
        for w, keras_w in zip(ours["weights"], ref["weights"]):
            np.testing.assert_allclose(w, np.array(keras_w), atol=1e-4, err_msg=name)
        np.testing.assert_allclose(ours["predict"], ref["predict"], atol=1e-5, err_msg=name)
        # Keras warns where from_logits=True takes the logits back from a sigmoid or softmax.
        assert ref["warned"] == (from_logits and "tanh" not in final), name
