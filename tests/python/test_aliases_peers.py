"""Keras 3.15's other names for its classes and functions (keras.layers.Convolution2D for Conv2D,
MaxPool2D, keras.losses.mse, ...): wherever crossover has the thing under its Keras name, it has
every alias Keras exports for it too, and the alias is the same object. Keras lists them in a
subprocess with the peers' Python (test_keras_archive_peers.run_keras; skipped without one)."""

import json
from pathlib import Path

import pytest

from crossover import keras
from test_keras_archive_peers import run_keras

MODULES = ["layers", "losses", "metrics", "optimizers", "callbacks", "initializers", "activations"]

KERAS_ALIASES = """
    import json
    import keras
    out = {{}}
    for module in {modules!r}:
        m, names = getattr(keras, module), {{}}
        for name in dir(m):
            canonical = getattr(getattr(m, name), "__name__", None)
            if not name.startswith("_") and canonical and canonical != name:
                names[name] = canonical
        out[module] = names
    print(json.dumps(out))
"""


def has(module, name: str) -> bool:
    try:
        getattr(module, name)
        return True
    except (AttributeError, ValueError, NotImplementedError):
        return False


def test_every_keras_alias_of_a_name_crossover_has(tmp_path: Path) -> None:
    theirs = run_keras(KERAS_ALIASES.format(modules=MODULES), tmp_path)
    checked, missing = 0, []
    for module_name, aliases in theirs.items():
        module = getattr(keras, module_name)
        for alias, canonical in sorted(aliases.items()):
            if not has(module, canonical):
                continue  # crossover has not the thing itself
            checked += 1
            if not has(module, alias):
                missing.append(f"keras.{module_name}.{alias} (= {canonical})")
            elif getattr(module, alias) is not getattr(module, canonical):
                missing.append(f"keras.{module_name}.{alias} is not {canonical}")
    assert not missing, missing
    # The aliases this test was written for (a Keras without them would check nothing).
    assert checked >= 5
    assert keras.layers.Convolution2D is keras.layers.Conv2D


@pytest.mark.parametrize(
    "alias,canonical",
    [("Convolution2D", "Conv2D"), ("MaxPool2D", "MaxPooling2D"), ("AvgPool2D", "AveragePooling2D")],
)
def test_a_model_of_aliased_layers_is_written_with_the_class_names(alias, canonical) -> None:
    cls = getattr(keras.layers, alias)
    layer = cls(2, 2) if "Conv" in alias else cls(2)  # Keras 3.15: AvgPool2D has no default
    model = keras.Sequential([keras.Input((6, 6, 1)), layer])
    layers = json.loads(model.to_json())["config"]["layers"]
    names = [entry["class_name"] for entry in layers]
    assert names[-1] == canonical
