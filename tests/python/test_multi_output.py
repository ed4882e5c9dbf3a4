"""Functional models of several outputs against Keras 3.15 itself: a model of three inputs and
two outputs (a regression and a classification head, as in Deep Learning with Python's chapter
7), made on both sides, trains from Keras's initial weights without shuffling to the same
History (its keys: loss, <output>_loss, <output>_<metric>), the same evaluate list (the loss,
each output's loss in the loss dict's order, the metrics sorted by name), metrics_names and
predictions, within 1e-4 (evaluate on batches of one size: with a smaller last batch Keras 3.15
averages each output's loss over the batches, not the samples);
with its outputs, losses, loss weights, metrics and data as lists and as dicts. Keras runs in a
subprocess with the peers' Python ($CROSSOVER_PEERS_PYTHON, else bench/peers/.venv/bin/python);
without one, the Keras comparisons are skipped with a message saying so."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import run_keras

# The model, written once for both sides (`keras` and `layers` are each side's).
BUILD = """
title = keras.Input(shape=(12,), name="title")
text_body = keras.Input(shape=(12,), name="text_body")
tags = keras.Input(shape=(4,), name="tags")
features = layers.Concatenate()([title, text_body, tags])
features = layers.Dense(16, activation="relu")(features)
priority = layers.Dense(1, activation="sigmoid", name="priority")(features)
department = layers.Dense(3, activation="softmax", name="department")(features)
inputs = [title, text_body, tags]
if as_dict:
    model = keras.Model(inputs={"title": title, "text_body": text_body, "tags": tags},
                        outputs={"priority": priority, "department": department})
else:
    model = keras.Model(inputs=inputs, outputs=[priority, department])
"""

# compile's arguments for each form: lists, dicts (the dict outputs are in sorted order:
# department, priority).
COMPILE = {
    False: dict(
        loss=["mean_squared_error", "categorical_crossentropy"],
        loss_weights=[1.0, 0.5],
        metrics=[["mean_absolute_error"], ["accuracy"]],
    ),
    True: dict(
        loss={"priority": "mse", "department": "categorical_crossentropy"},
        loss_weights={"priority": 2.0, "department": 0.25},
        metrics={"priority": ["mae"], "department": ["accuracy"]},
    ),
}

KERAS_SIDE = """
import json
import numpy as np
import keras
from keras import layers
out = {{}}
for as_dict in (False, True):
    keras.utils.set_random_seed(3)
{build}
    w = model.get_weights()
    for i, a in enumerate(w):
        np.save(f"w_{{as_dict}}_{{i}}.npy", a)
    x = [np.load(f"x{{i}}.npy") for i in range(3)]
    yp, yd = np.load("yp.npy"), np.load("yd.npy")
    if as_dict:
        xs = dict(title=x[0], text_body=x[1], tags=x[2])
        ys = dict(priority=yp, department=yd)
        val = (xs, ys)
    else:
        xs, ys, val = x, [yp, yd], ([a[:16] for a in x], [yp[:16], yd[:16]])
    model.compile(optimizer=keras.optimizers.RMSprop(0.01), **{compile_args}[as_dict])
    h = model.fit(xs, ys, epochs=2, batch_size=8, shuffle=False, verbose=0,
                  validation_data=val).history
    ev = model.evaluate(xs, ys, batch_size=8, verbose=0)
    p = model.predict(xs, verbose=0)
    p = {{k: v.tolist() for k, v in p.items()}} if as_dict else [a.tolist() for a in p]
    out[str(as_dict)] = {{"n": len(w), "history": h, "eval": ev, "names": model.metrics_names,
                         "predict": p,
                         "output_names": list(model.output_names)}}
    # One loss for every output, no metrics.
    keras.utils.set_random_seed(3)
{build}
    model.compile(optimizer=keras.optimizers.RMSprop(0.01), loss="mse")
    h = model.fit(xs, ys, epochs=1, batch_size=8, shuffle=False, verbose=0).history
    out[str(as_dict) + "-one"] = {{"history": h, "names": model.metrics_names,
                                  "weights": [a.tolist() for a in w]}}
keras.utils.set_random_seed(3)
as_dict = False
if True:
{build}
open("keras.json", "w").write(model.to_json())
theirs = keras.models.model_from_json(open("crossover.json").read())
out["json"] = {{"outputs": [t.name.split("/")[0] for t in theirs.outputs],
               "output_names": list(theirs.output_names),
               "predict": [list(a.shape) for a in theirs.predict(
                   [np.load(f"x{{i}}.npy")[:5] for i in range(3)], verbose=0)]}}
print(json.dumps(out))
"""


def data(folder: Path) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    rs = np.random.RandomState(11)
    x = [rs.randint(0, 2, (40, n)).astype(np.float32) for n in (12, 12, 4)]
    yp = rs.rand(40, 1).astype(np.float32)
    yd = np.eye(3, dtype=np.float32)[rs.randint(0, 3, 40)]
    for i, a in enumerate(x):
        np.save(folder / f"x{i}.npy", a)
    np.save(folder / "yp.npy", yp)
    np.save(folder / "yd.npy", yd)
    return x, yp, yd


def build(as_dict: bool):
    scope = {"keras": keras, "layers": layers, "as_dict": as_dict}
    exec(BUILD, scope)
    return scope["model"]


@pytest.fixture(scope="module")
def keras_results(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("multi_output")
    x, yp, yd = data(folder)
    (folder / "crossover.json").write_text(build(False).to_json())
    code = KERAS_SIDE.format(
        build="\n".join("    " + line for line in BUILD.strip().splitlines()),
        compile_args=repr(COMPILE),
    )
    return folder, (x, yp, yd), run_keras(code, folder)


@pytest.mark.parametrize("as_dict", [False, True])
def test_a_model_of_two_outputs_trains_as_keras_does(keras_results, as_dict: bool) -> None:
    folder, (x, yp, yd), theirs_all = keras_results
    theirs = theirs_all[str(as_dict)]
    model = build(as_dict)
    assert model.output_names == theirs["output_names"]
    initial = [np.load(folder / f"w_{as_dict}_{i}.npy") for i in range(theirs["n"])]
    model.set_weights(initial)
    if as_dict:
        xs = dict(title=x[0], text_body=x[1], tags=x[2])
        ys = dict(priority=yp, department=yd)
        val = (xs, ys)
    else:
        xs, ys, val = x, [yp, yd], ([a[:16] for a in x], [yp[:16], yd[:16]])
    model.compile(optimizer=keras.optimizers.RMSprop(0.01), **COMPILE[as_dict])
    h = model.fit(
        xs, ys, epochs=2, batch_size=8, shuffle=False, verbose=0, validation_data=val
    ).history
    assert sorted(h) == sorted(theirs["history"])
    for key, values in theirs["history"].items():
        np.testing.assert_allclose(h[key], values, atol=1e-4, err_msg=key)
    # Batches of one size: Keras 3.15 reports each output's loss as the mean of the batches'
    # means (its total loss is over the samples), crossover as the mean over the samples.
    ev = model.evaluate(xs, ys, batch_size=8, verbose=0)
    np.testing.assert_allclose(ev, theirs["eval"], atol=1e-4)
    assert model.metrics_names == theirs["names"]
    p = model.predict(xs, verbose=0)
    if as_dict:
        assert isinstance(p, dict) and sorted(p) == sorted(theirs["predict"])
        for k in p:
            np.testing.assert_allclose(p[k], theirs["predict"][k], atol=1e-4)
        called = model(xs)
        assert sorted(called) == sorted(p)
        np.testing.assert_allclose(called["priority"].numpy(), p["priority"], atol=1e-6)
    else:
        assert isinstance(p, list) and [a.shape for a in p] == [(40, 1), (40, 3)]
        for mine, keras_p in zip(p, theirs["predict"]):
            np.testing.assert_allclose(mine, keras_p, atol=1e-4)
        called = model(xs)
        assert isinstance(called, list)
        np.testing.assert_allclose(called[1].numpy(), p[1], atol=1e-6)


@pytest.mark.parametrize("as_dict", [False, True])
def test_one_loss_for_every_output_reports_each_outputs_loss(keras_results, as_dict) -> None:
    folder, (x, yp, yd), theirs_all = keras_results
    theirs = theirs_all[str(as_dict) + "-one"]
    model = build(as_dict)
    model.set_weights([np.array(w, dtype=np.float32) for w in theirs["weights"]])
    model.compile(optimizer=keras.optimizers.RMSprop(0.01), loss="mse")
    xs = dict(title=x[0], text_body=x[1], tags=x[2]) if as_dict else x
    ys = dict(priority=yp, department=yd) if as_dict else [yp, yd]
    h = model.fit(xs, ys, epochs=1, batch_size=8, shuffle=False, verbose=0).history
    assert sorted(h) == sorted(theirs["history"])
    for key, values in theirs["history"].items():
        np.testing.assert_allclose(h[key], values, atol=1e-4, err_msg=key)
    assert model.metrics_names == theirs["names"]


def test_what_keras_refuses_is_refused() -> None:
    model = build(False)
    # A flat list of metrics for two outputs: Keras's ValueError.
    with pytest.raises(ValueError, match="Invalid `metrics`"):
        model.compile("rmsprop", loss="mse", metrics=["mae"])
    with pytest.raises(ValueError, match="loss has 1 entries, but the model has 2 outputs"):
        model.compile("rmsprop", loss=["mse"])
    with pytest.raises(ValueError, match="`loss_weights` must match the number of losses"):
        model.compile("rmsprop", loss="mse", loss_weights={"priority": 2.0})
    model.compile("rmsprop", loss=["mse", "categorical_crossentropy"])
    x = [np.zeros((4, n), np.float32) for n in (12, 12, 4)]
    with pytest.raises(ValueError, match="2 outputs"):
        model.fit(x, np.zeros((4, 1), np.float32), verbose=0)
    with pytest.raises(ValueError, match="output 'department' has shape"):
        model.fit(x, [np.zeros((4, 1)), np.zeros((4, 2))], verbose=0)


def test_the_json_of_a_model_of_two_outputs_goes_both_ways(keras_results, tmp_path: Path) -> None:
    folder, (x, yp, yd), theirs_all = keras_results
    # Keras read crossover's JSON into a model of the same two outputs.
    assert theirs_all["json"]["output_names"] == ["priority", "department"]
    assert theirs_all["json"]["predict"] == [[5, 1], [5, 3]]
    # crossover reads Keras's, and its own, into the same outputs, in order.
    for text in ((folder / "keras.json").read_text(), build(False).to_json()):
        model = keras.models.model_from_json(text)
        assert model.output_names == ["priority", "department"]
        assert [t.shape for t in model.outputs] == [(None, 1), (None, 3)]
    # The weights go through a .weights.h5 file and back.
    model = build(False)
    model.compile("rmsprop", loss=["mse", "categorical_crossentropy"])
    model.fit(x, [yp, yd], epochs=1, verbose=0)
    model.save_weights(tmp_path / "m.weights.h5")
    again = keras.models.model_from_json(model.to_json())
    again.load_weights(tmp_path / "m.weights.h5")
    for a, b in zip(model.predict(x, verbose=0), again.predict(x, verbose=0)):
        np.testing.assert_array_equal(a, b)


def test_a_layer_s_input_is_what_its_call_read() -> None:
    model = build(False)
    joined, dense = model.layers[3], model.layers[4]
    assert type(joined).__name__ == "Concatenate"
    assert [t.shape for t in joined.input] == [(None, 12), (None, 12), (None, 4)]
    assert dense.input is joined.output


class Tickets(keras.Model):
    """Deep Learning with Python's subclassed version: a dict of inputs, a tuple of outputs."""

    def __init__(self) -> None:
        super().__init__()
        self.concat_layer = layers.Concatenate()
        self.mixing_layer = layers.Dense(16, activation="relu")
        self.priority_scorer = layers.Dense(1, activation="sigmoid")
        self.department_classifier = layers.Dense(3, activation="softmax")

    def call(self, inputs):
        features = self.concat_layer([inputs["title"], inputs["text_body"], inputs["tags"]])
        features = self.mixing_layer(features)
        return self.priority_scorer(features), self.department_classifier(features)


def test_a_subclassed_model_of_a_dict_of_inputs_and_two_outputs_trains() -> None:
    rs = np.random.RandomState(5)
    sizes = {"title": 12, "text_body": 12, "tags": 4}
    xs = {k: rs.rand(24, n).astype(np.float32) for k, n in sizes.items()}
    yp, yd = rs.rand(24, 1), np.eye(3)[rs.randint(0, 3, 24)]
    model = Tickets()
    priority, department = model(xs)  # traced from the data: three inputs, two outputs
    assert priority.shape == (24, 1) and department.shape == (24, 3)
    model.compile(
        "rmsprop", loss=["mse", "categorical_crossentropy"], metrics=[["mae"], ["accuracy"]]
    )
    h = model.fit(xs, [yp, yd], epochs=2, verbose=0).history
    first, second = (model.layers[i].name for i in (2, 3))
    assert sorted(h) == sorted(
        ["loss", f"{first}_loss", f"{second}_loss", f"{first}_mae", f"{second}_accuracy"]
    )
    np.testing.assert_allclose(
        h["loss"], np.add(h[f"{first}_loss"], h[f"{second}_loss"]), rtol=1e-6
    )
    p, d = model.predict(xs, verbose=0)
    assert p.shape == (24, 1) and d.shape == (24, 3)
