"""keras.models.clone_model as Keras 3.15 does it: the same architecture (layer classes, configs and
names, the model's name), freshly initialized weights (kernels drawn anew, zero biases), compiled
with the same settings when the original is, for Sequential and functional models. The facts are
computed the same way on Keras (in a subprocess with the peers' Python, test_keras_archive_peers.
run_keras; skipped without one) and on crossover, and compared."""

import json
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import run_keras

BUILD = """
    def sequential():
        m = keras.Sequential([keras.Input((4,)), layers.Dense(3, activation="relu", name="d1"),
                              layers.Dropout(0.1, name="drop"), layers.Dense(2, name="o")],
                             name="mine")
        m.compile(optimizer=keras.optimizers.Adam(0.003), loss="mse", metrics=["mae"])
        return m

    def functional():
        i = keras.Input((4,))
        h = layers.Dense(3, activation="tanh", name="h")(i)
        return keras.Model(i, layers.Dense(2, name="out")(h), name="fun")

    # The layers other than the InputLayer (Keras names a functional clone's input anew), as the
    # model's JSON has them, and their names.
    def layer_entries(m):
        entries = json.loads(m.to_json())["config"]["layers"]
        return [(e["class_name"], e["config"]) for e in entries if e["class_name"] != "InputLayer"]

    def compiled(m):
        return bool(getattr(m, "compiled", False) or getattr(m, "_user_compiled", False))

    def facts(model, clone):
        pairs = list(zip(model.get_weights(), clone.get_weights()))
        names = [c["name"] for _, c in layer_entries(model)]
        rate = float(np.asarray(clone.optimizer.learning_rate)) if compiled(clone) else None
        return {
            "class": type(clone).__name__,
            "same_name": clone.name == model.name,
            "layer_names": names,
            "same_layers_in_json": layer_entries(model) == layer_entries(clone),
            "shapes_equal": len(pairs) == 4 and all(a.shape == b.shape for a, b in pairs),
            "kernels_differ": all(not np.array_equal(a, b) for a, b in pairs if a.ndim == 2),
            "biases_zero": all(not b.any() for a, b in pairs if a.ndim == 1),
            "compiled": compiled(clone),
            "shares_a_layer": any(a is b for a, b in zip(model.layers, clone.layers)),
            "learning_rate": rate,
        }
"""

KERAS = """
    import json
    import numpy as np
    import keras
    from keras import layers
    {build}
    s, f = sequential(), functional()
    print(json.dumps({{"sequential": facts(s, keras.models.clone_model(s)),
                      "functional": facts(f, keras.models.clone_model(f))}}))
"""


def crossover_facts() -> dict:
    namespace = {"keras": keras, "layers": layers, "np": np, "json": json}
    exec(BUILD.replace("\n    ", "\n"), namespace)
    s, f = namespace["sequential"](), namespace["functional"]()
    facts = namespace["facts"]
    return {
        "sequential": facts(s, keras.models.clone_model(s)),
        "functional": facts(f, keras.models.clone_model(f)),
    }


def test_clone_model_is_what_keras_makes(tmp_path: Path) -> None:
    mine = crossover_facts()
    # What the test is about, on crossover's side whatever Keras says.
    for kind in ("sequential", "functional"):
        assert mine[kind]["kernels_differ"] and mine[kind]["same_layers_in_json"], mine[kind]
    assert mine["sequential"]["learning_rate"] == pytest.approx(0.003)
    theirs = run_keras(KERAS.format(build=BUILD), tmp_path)
    assert json.loads(json.dumps(mine)) == theirs


def test_clone_model_refuses_what_it_does_not_do() -> None:
    model = keras.Sequential([keras.Input((4,)), layers.Dense(2)])
    with pytest.raises(ValueError, match="clone_function"):
        keras.models.clone_model(model, clone_function=lambda layer: layer)
    with pytest.raises(ValueError, match="expected a crossover.keras model"):
        keras.models.clone_model(layers.Dense(2))
