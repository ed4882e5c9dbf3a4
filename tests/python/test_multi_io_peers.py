"""Functional models of several inputs against Keras 3.15 itself: a 2-input and a 3-input model
are made by Keras and written with to_json(); crossover reads that file, takes Keras's initial
weights and trains one epoch without shuffling on the same list (and dict) of arrays, with
validation_data: the History (its keys and the epoch's losses), evaluate and predict agree with
Keras's within 1e-4. The same models made with crossover's own functional API train the same,
their summary() is Keras's ("Connected to" column), and the JSON crossover writes is one Keras
reads back into the same model. Keras runs in a subprocess with the peers' Python
($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python); without one, skipped with a message
saying so."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import run_keras

# The models, written once for both sides (`keras` and `layers` are each side's). "three" lists
# its inputs in an order that is not the layers' (Keras orders the layers by depth).
BUILD = {
    "two": """
a = keras.Input(shape=(5,), name="left")
b = keras.Input(shape=(3,), name="right")
h = layers.Dense(6, activation="relu")(a)
g = layers.Dense(6, activation="tanh")(b)
s = layers.Add()([h, g])
model = keras.Model(inputs=[a, b], outputs=layers.Dense(3, activation="softmax")(s))
""",
    "three": """
title = keras.Input(shape=(8,), name="title")
body = keras.Input(shape=(4, 2), name="body")
tags = keras.Input(shape=(3,), name="tags")
t = layers.Dense(6, activation="relu")(title)
t = layers.Dense(5, activation="relu")(t)
f = layers.Flatten()(body)
joined = layers.Concatenate()([t, f, tags])
model = keras.Model([tags, title, body], layers.Dense(3, activation="softmax")(joined),
                    name="tickets")
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
names = [t.name for t in model.inputs]
xs = [np.load(f"x_{{n}}.npy") for n in names]
y = np.load("y.npy")
model.compile(optimizer=keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
h = model.fit({{n: a for n, a in zip(names, xs)}} if {as_dict} else xs, y, epochs=1,
              batch_size=8, shuffle=False, verbose=0,
              validation_data=([a[:16] for a in xs], y[:16])).history
ev = model.evaluate(xs, y, verbose=0)
lines = []
model.summary(print_fn=lambda s, **k: lines.append(s))
theirs = keras.models.model_from_json(open("crossover.json").read())
print(json.dumps({{"history": h, "eval": ev,
                  "predict": model.predict(xs, verbose=0).tolist(),
                  "weights": [w.tolist() for w in model.get_weights()],
                  "n": len(model.get_weights()),
                  "names": names,
                  "summary": "\\n".join(lines),
                  "ours": [[l.name, type(l).__name__] for l in theirs.layers],
                  "ours_inputs": [t.name for t in theirs.inputs],
                  "ours_out": theirs.predict([a[:5] for a in xs], verbose=0).tolist()}}))
"""

SHAPES = {"left": (5,), "right": (3,), "title": (8,), "body": (4, 2), "tags": (3,)}


def data(folder: Path, names: list[str]) -> tuple[list[np.ndarray], np.ndarray]:
    rs = np.random.RandomState(11)
    xs = [rs.rand(40, *SHAPES[n]).astype(np.float32) for n in names]
    y = rs.randint(0, 3, 40).astype(np.float32)
    for n, a in zip(names, xs):
        np.save(folder / f"x_{n}.npy", a)
    np.save(folder / "y.npy", y)
    return xs, y


def train(model, xs, y, as_dict: bool, names: list[str]):
    model.compile(
        optimizer=keras.optimizers.Adam(0.01),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    x = dict(zip(names, xs)) if as_dict else xs
    h = model.fit(
        x, y, epochs=1, batch_size=8, shuffle=False, verbose=0,
        validation_data=([a[:16] for a in xs], y[:16]),
    ).history  # fmt: skip
    ev = model.evaluate(xs, y, verbose=0)
    return h, ev


@pytest.mark.parametrize("name,as_dict", [("two", False), ("three", True)])
def test_a_keras_model_of_several_inputs_trains_as_keras_does(
    name: str, as_dict: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")  # both summaries as on an 80-column terminal
    scope = {"keras": keras, "layers": layers}
    exec(BUILD[name], scope)
    ours = scope["model"]
    names = [t.name for t in ours.inputs]
    xs, y = data(tmp_path, names)
    (tmp_path / "crossover.json").write_text(ours.to_json())
    theirs = run_keras(KERAS_SIDE.format(build=BUILD[name], as_dict=as_dict), tmp_path)
    assert theirs["names"] == names
    initial = [np.load(tmp_path / f"w{i}.npy") for i in range(theirs["n"])]

    # 1. Keras's file, read by crossover.
    model = keras.models.model_from_json((tmp_path / "model.json").read_text())
    assert [t.name for t in model.inputs] == names
    model.set_weights(initial)
    h, ev = train(model, xs, y, as_dict, names)
    assert sorted(h) == sorted(theirs["history"])
    for key, values in theirs["history"].items():
        assert h[key][0] == pytest.approx(values[0], abs=1e-4), key
    np.testing.assert_allclose(ev, theirs["eval"], atol=1e-4)
    np.testing.assert_allclose(model.predict(xs, verbose=0), theirs["predict"], atol=1e-4)
    for mine, keras_w in zip(model.get_weights(), theirs["weights"]):
        np.testing.assert_allclose(mine, np.array(keras_w), atol=1e-4)

    # 2. The same model made with crossover's functional API trains the same.
    ours.set_weights(initial)
    h2, ev2 = train(ours, xs, y, as_dict, names)
    for key in h:
        assert h2[key][0] == pytest.approx(h[key][0], abs=1e-6), key
    np.testing.assert_allclose(ev2, ev, atol=1e-6)

    # 3. Keras read crossover's JSON into the same layers and inputs, and it predicts the
    # outputs of its own initial weights (shapes only: Keras drew them).
    assert theirs["ours"] == [[l.name, type(l).__name__] for l in ours.layers]
    assert theirs["ours_inputs"] == names
    assert np.shape(theirs["ours_out"]) == (5, 3)

    # 4. summary() as Keras prints it, "Connected to" column and all.
    lines: list[str] = []
    model.summary(print_fn=lines.append)
    assert "\n".join(lines).rstrip() == theirs["summary"].rstrip()
