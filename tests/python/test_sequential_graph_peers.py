"""A Sequential model's graph against Keras 3.15 itself: once the model knows its input shape (an
Input first, input_shape= on its first layer, build(), fit or evaluate on data), each layer has
its `input` and `output` (symbolic tensors) and the model its `inputs` and `outputs`, so that
keras.Model(model.inputs, [layer.output for layer in model.layers]) gives every layer's
activations (the activation-visualisation idiom); model.input / model.output are Keras's
AttributeError (a Sequential never called as a layer has no node). One probe runs on each side
(the same outcomes), then the activation model predicts Keras's numbers from Keras's weights.
Keras runs in a subprocess with the peers' Python (skipped without one)."""

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import run_keras

PROBE = """
def make(keras, layers, first):
    conv = dict(input_shape=(8, 8, 1)) if first == "input_shape" else {}
    stack = [layers.Conv2D(4, 3, activation="relu", **conv), layers.MaxPooling2D(2),
             layers.Flatten(), layers.Dense(10, activation="softmax")]
    if first == "Input":
        stack = [keras.Input((8, 8, 1))] + stack
    return keras.Sequential(stack)


def outcome(f):
    try:
        value = f()
        return list(value) if isinstance(value, tuple) else value
    except Exception as e:
        return type(e).__name__ + ": " + str(e).split(".")[0]


def probe(keras, layers, np):
    x = np.random.RandomState(0).rand(6, 8, 8, 1).astype("float32")
    y = np.arange(6) % 10
    out = {}
    for how in ["made", "fit", "evaluate", "build"]:
        for first in ["Input", "input_shape", "none"]:
            if how == "build" and first != "none":
                continue  # Keras makes a second graph when built again (its layers' 2nd calls)
            m = make(keras, layers, first)
            m.compile("adam", "sparse_categorical_crossentropy")
            if how == "fit":
                m.fit(x, y, epochs=1, verbose=0)
            elif how == "evaluate":
                m.evaluate(x, y, verbose=0)
            elif how == "build":
                m.build((None, 8, 8, 1))
            key = how + "/" + first
            out[key + " input"] = outcome(lambda: m.input.shape)
            out[key + " output"] = outcome(lambda: m.output.shape)
            out[key + " inputs"] = outcome(lambda: [list(t.shape) for t in m.inputs])
            out[key + " outputs"] = outcome(lambda: [list(t.shape) for t in m.outputs])
            out[key + " layer outputs"] = outcome(
                lambda: [list(l.output.shape) for l in m.layers])
            out[key + " layer inputs"] = outcome(lambda: [list(l.input.shape) for l in m.layers])
            out[key + " chained"] = outcome(
                lambda: m.layers[0].input is m.inputs[0]
                and all(a.output is b.input for a, b in zip(m.layers, m.layers[1:])))
            out[key + " last is outputs"] = outcome(lambda: m.layers[-1].output is m.outputs[0])

            def activations():
                shown = keras.Model(inputs=m.inputs, outputs=[l.output for l in m.layers])
                a = shown.predict(x, verbose=0)
                same = np.allclose(a[-1], m.predict(x, verbose=0), atol=1e-6)
                return [list(v.shape) for v in a] + [same, len(shown.layers)]

            out[key + " activations"] = outcome(activations)
    return out
"""

KERAS_SIDE = """
import json
import numpy as np
import keras
from keras import layers
keras.utils.set_random_seed(3)
{probe}
out = probe(keras, layers, np)
m = make(keras, layers, "input_shape")
for i, w in enumerate(m.get_weights()):
    np.save(f"w{{i}}.npy", w)
shown = keras.Model(inputs=m.inputs, outputs=[l.output for l in m.layers])
a = shown.predict(np.load("x.npy"), verbose=0)
print(json.dumps({{"probe": out, "activations": [v.tolist() for v in a],
                  "names": shown.output_names}}))
"""


def test_the_graph_of_a_sequential_as_keras_has_it(tmp_path: Path) -> None:
    x = np.random.RandomState(1).rand(3, 8, 8, 1).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    theirs = run_keras(KERAS_SIDE.format(probe=PROBE), tmp_path)
    scope: dict = {}
    exec(textwrap.dedent(PROBE), scope)
    ours = json.loads(json.dumps(scope["probe"](keras, layers, np)))
    assert sorted(ours) == sorted(theirs["probe"])
    for key, value in theirs["probe"].items():
        # Keras numbers its models in its messages (sequential_3): the text before them.
        if isinstance(value, str):
            assert ours[key].split("sequential")[0] == value.split("sequential")[0], key
        else:
            assert ours[key] == value, key
    # The activation model predicts Keras's activations from Keras's weights.
    m = scope["make"](keras, layers, "input_shape")
    m.set_weights([np.load(tmp_path / f"w{i}.npy") for i in range(len(m.get_weights()))])
    shown = keras.Model(inputs=m.inputs, outputs=[l.output for l in m.layers])
    assert shown.output_names == theirs["names"]
    for ours_a, theirs_a in zip(shown.predict(x, verbose=0), theirs["activations"]):
        np.testing.assert_allclose(ours_a, np.array(theirs_a), rtol=1e-5, atol=1e-6)


def test_layer_outputs_need_a_known_input_shape() -> None:
    m = keras.Sequential([layers.Dense(4), layers.Dense(2)])
    with pytest.raises(AttributeError, match="dense has never been called and thus has no "):
        m.layers[0].output
    with pytest.raises(AttributeError, match="has no defined inputs yet"):
        m.inputs
    with pytest.raises(AttributeError, match="has never been called and thus has no defined inp"):
        m.input
    # Known from then on (build), and again after add(): the new layer's output follows.
    m.build((None, 3))
    assert m.layers[1].output.shape == (None, 2) and m.inputs[0].shape == (None, 3)
    m.add(layers.Dense(5))
    assert m.layers[2].output.shape == (None, 5) and m.outputs[0] is m.layers[2].output
    shown = keras.Model(m.inputs, [m.layers[0].output, m.outputs[0]])
    x = np.ones((2, 3), np.float32)
    first, last = shown.predict(x, verbose=0)
    assert first.shape == (2, 4)
    np.testing.assert_allclose(last, m.predict(x, verbose=0), rtol=1e-6)
