"""keras.models: Sequential (its class in _sequential.py), Model and Functional (functional.py),
and the functions that make a model from a file or from another model: model_from_json and
load_model (saving.py), clone_model. Above the model modules: none of them imports it."""

from typing import Any

from .._args import reject_unsupported, unsupported_attribute
from . import saving
from ._sequential import Sequential, _dynamic_display, _floats  # noqa: F401 (tests use them here)
from .callbacks import History
from .functional import Functional, Model


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "keras.models",
        name,
        "Sequential, Model, model_from_json, load_model, save_model and clone_model",
    )


model_from_json = saving.model_from_json
load_model = saving.load_model
save_model = saving.save_model


def clone_model(
    model: Any,
    input_tensors: Any = None,
    clone_function: Any = None,
    call_function: Any = None,
    recursive: bool = False,
    **kwargs: Any,
) -> "Sequential":
    """keras.models.clone_model, Keras 3's: a new model of the same architecture (its layers
    made again from their configs, with the same names, the model's name too) and freshly
    initialized weights (drawn from the global seed state, as any new model's); compiled with the
    same compile settings when the model is compiled (a new optimizer)."""
    import json

    reject_unsupported(
        "clone_model",
        input_tensors=(input_tensors, None),
        clone_function=(clone_function, None),
        call_function=(call_function, None),
        recursive=(recursive, False),
    )
    if kwargs:
        raise ValueError(f"clone_model: unexpected keyword argument(s): {sorted(kwargs)}")
    if not isinstance(model, Model):
        raise ValueError(
            f"clone_model: expected a crossover.keras model, got {type(model).__name__}"
        )
    config = json.loads(saving.to_json(model))
    compile_config = config.pop("compile_config", None)
    clone = saving._sequential_from_json(json.dumps(config), "clone_model")
    if model._user_compiled and compile_config:
        saving._compile_from_config(clone, compile_config, "clone_model")
    return clone


__all__ = ["Sequential", "Model", "Functional", "History", "model_from_json", "load_model"]
__all__ += ["clone_model"]
__all__ += ["save_model"]
