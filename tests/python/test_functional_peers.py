"""Functional models against Keras 3.15 itself (issue 25's test): a model with a skip connection
(Input -> Dense -> Dense -> Add with the first Dense's output -> Dense softmax), one with
Concatenate, and three with a layer called twice (shared weights) are made by Keras, written with
to_json(); crossover reads that file, takes the same initial weights, and trains one epoch without
shuffling or dropout: the epoch's loss, evaluate's loss and the trained weights agree with Keras's
within 1e-4. The same models made with crossover's own functional API train the same, and the
JSON crossover writes is one Keras reads back into the same model. Keras runs in a subprocess with
the peers' Python ($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python); without one,
skipped with a message saying so."""

import json
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import run_keras

# The two models, written once for both sides (`keras` and `layers` are each side's).
BUILD = {
    "skip": """
inputs = keras.Input(shape=(6,))
d1 = layers.Dense(8, activation="relu")(inputs)
d2 = layers.Dense(8, activation="tanh")(d1)
s = layers.Add()([d2, d1])
model = keras.Model(inputs=inputs, outputs=layers.Dense(3, activation="softmax")(s))
""",
    "concat": """
inputs = keras.Input(shape=(6,))
a = layers.Dense(5, activation="relu")(inputs)
b = layers.Dense(4, activation="sigmoid")(inputs)
c = layers.Concatenate()([a, b, inputs])
h = layers.Dense(7, activation="relu")(c)
model = keras.Model(inputs, layers.Dense(3, activation="softmax")(h), name="joined")
""",
    # A layer called twice, its second call on a layer Keras lists after it.
    "shared": """
inputs = keras.Input(shape=(6,))
d = layers.Dense(6, activation="tanh")
a = d(inputs)
c = d(layers.Dense(6, activation="relu")(a))
model = keras.Model(inputs, layers.Dense(3, activation="softmax")(layers.Add()([a, c])))
""",
    # A layer's second call read first: Keras numbers the calls as they were made.
    "reversed": """
inputs = keras.Input(shape=(6,))
d = layers.Dense(6, activation="tanh")
a = d(inputs)
b = d(layers.Dense(6, activation="relu")(inputs))
model = keras.Model(inputs, layers.Dense(3, activation="softmax")(layers.Add()([b, a])))
""",
    # A siamese pair: one tower on the input and on a transformed copy of it.
    "siamese": """
inputs = keras.Input(shape=(6,))
tower = layers.Dense(5, activation="relu")
left = tower(inputs)
right = tower(layers.Dense(6, activation="sigmoid")(inputs))
h = layers.Concatenate()([left, right])
model = keras.Model(inputs, layers.Dense(3, activation="softmax")(h), name="siamese")
""",
}

KERAS_SIDE = """
import json
import numpy as np
import keras
from keras import layers
keras.utils.set_random_seed(3)
{build}
open("model.json", "w").write(model.to_json())
for i, w in enumerate(model.get_weights()):
    np.save(f"w{{i}}.npy", w)
x, y = np.load("x.npy"), np.load("y.npy")
model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
h = model.fit(x, y, epochs=1, batch_size=8, shuffle=False, verbose=0).history
ev = model.evaluate(x, y, verbose=0)
lines = []
model.summary(print_fn=lambda s, **k: lines.append(s))
theirs = keras.models.model_from_json(open("crossover.json").read()) if {read_ours} else None
print(json.dumps({{"loss": h["loss"][0], "accuracy": h["accuracy"][0], "eval": ev[0],
                  "weights": [w.tolist() for w in model.get_weights()],
                  "n": len(model.get_weights()),
                  "summary": "\\n".join(lines),
                  "ours": None if theirs is None else
                          [[l.name, type(l).__name__] for l in theirs.layers],
                  "ours_out": None if theirs is None else
                              theirs.predict(x[:5], verbose=0).tolist()}}))
"""


def call_reads(doc: dict) -> list[list[list[int]]]:
    """Per layer of a functional model's JSON, per call, the node index of each call it reads
    (the names aside: each side numbers its automatic names on its own)."""
    out = []
    for layer in doc["config"]["layers"]:
        calls = []
        for node in layer["inbound_nodes"]:
            args = node["args"][0]
            tensors = args if isinstance(args, list) else [args]
            calls.append([t["config"]["keras_history"][1] for t in tensors])
        out.append(calls)
    return out


def data(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    rs = np.random.RandomState(11)
    x = rs.rand(48, 6).astype(np.float32)
    y = rs.randint(0, 3, 48).astype(np.float32)
    np.save(folder / "x.npy", x)
    np.save(folder / "y.npy", y)
    return x, y


def train(model, x, y):
    model.compile(
        optimizer=keras.optimizers.Adam(0.01),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    h = model.fit(x, y, epochs=1, batch_size=8, shuffle=False, verbose=0).history
    loss, _ = model.evaluate(x, y, verbose=0)
    return h, loss


@pytest.mark.parametrize("name", ["skip", "concat", "shared", "reversed", "siamese"])
def test_a_keras_functional_file_trains_as_keras_does(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # both summaries as on an 80-column terminal
    x, y = data(tmp_path)
    # crossover's own model of the same architecture, written for Keras to read back.
    scope = {"keras": keras, "layers": layers}
    exec(BUILD[name], scope)
    ours = scope["model"]
    (tmp_path / "crossover.json").write_text(ours.to_json())
    theirs = run_keras(KERAS_SIDE.format(build=BUILD[name], read_ours=True), tmp_path)
    initial = [np.load(tmp_path / f"w{i}.npy") for i in range(theirs["n"])]

    # 1. Keras's file, read by crossover.
    model = keras.models.model_from_json((tmp_path / "model.json").read_text())
    assert type(model).__name__ == "Functional"
    model.set_weights(initial)
    h, loss = train(model, x, y)
    assert h["loss"][0] == pytest.approx(theirs["loss"], abs=1e-4)
    assert h["accuracy"][0] == pytest.approx(theirs["accuracy"])
    assert loss == pytest.approx(theirs["eval"], abs=1e-4)
    for mine, keras_w in zip(model.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(mine, np.array(keras_w), atol=1e-4)

    # 2. The same model made with crossover's functional API trains the same.
    ours.set_weights(initial)
    h2, loss2 = train(ours, x, y)
    assert h2["loss"][0] == pytest.approx(h["loss"][0], abs=1e-6)
    assert loss2 == pytest.approx(loss, abs=1e-6)

    # 3. Keras read crossover's JSON into the same layers; each layer's calls read the same
    # calls (node indices) in both files.
    assert theirs["ours"] == [[l.name, type(l).__name__] for l in ours.layers]
    keras_file = json.loads((tmp_path / "model.json").read_text())
    assert call_reads(json.loads(ours.to_json())) == call_reads(keras_file)

    # 4. summary() as Keras prints it, "Connected to" column and all.
    lines: list[str] = []
    model.summary(print_fn=lines.append)
    assert "\n".join(lines).rstrip() == theirs["summary"].rstrip()
