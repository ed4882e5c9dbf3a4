"""Keras's model JSON, `.keras` archives and legacy `.h5` model files read into crossover models
(formats/model_config.h, formats/keras_h5.h): keras.models.model_from_json and load_model,
clone_model's copy. Above the model modules (it makes them); what writes these files, and
load_weights, are _archive.py's (re-exported here: keras.saving.save_model, save_weights, ...)."""

import json
import os
import shutil
import tempfile
import zipfile
from typing import TYPE_CHECKING, Any, Optional

from .. import _core
from .._args import SEE_SUPPORTED, reject_unsupported, unsupported_attribute
from . import layers as layers_module
from ._archive import (  # noqa: F401 (keras.saving's names)
    CONFIG_MEMBER,
    METADATA_MEMBER,
    WEIGHTS_MEMBER,
    _is_legacy_h5,
    _path,
    archive_config,
    load_weights,
    save_model,
    save_weights,
    to_json,
    write_archive,
)
from .optimizers import _deserialize

if TYPE_CHECKING:
    from ._sequential import Sequential


def _layer_from_core(layer: "_core.Layer") -> layers_module.Layer:
    """The Keras layer for one of the library's layers (as model_from_json rebuilt it), made as
    Keras makes it: its class's from_config on the config the library writes for it, so that
    every argument and default is the library's (each kind's unit, src/nn/layers/)."""
    cls = getattr(layers_module, layer.type, None)
    if not (isinstance(cls, type) and issubclass(cls, layers_module.Layer)):
        raise ValueError(f"model_from_json: layer {layer.name!r} of type {layer.type} is unknown")
    config = json.loads(layer.keras_config())
    if layer.input_shape and layer.type != "InputLayer":
        # the shape of a model's input the reader gave its first layer (Keras 2's
        # batch_input_shape, or an InputLayer it folded into a Flatten)
        config["input_shape"] = list(layer.input_shape)
    return cls.from_config(config)


def _sequential_from_json(text: str, where: str) -> "Sequential":
    """A Sequential model, or a functional one (its layers called on each other's outputs again,
    as the file connects them)."""
    from ._sequential import Sequential

    core = _core.model_from_json(text, where)
    if not core.functional:
        return Sequential([_layer_from_core(l) for l in core.layers], name=core.name)
    from . import functional

    # A layer called more than once (shared): one Keras layer, called at each of its entries.
    layers: list[Any] = []
    for i, (l, first) in enumerate(zip(core.layers, core.layer_shared_with)):
        layers.append(_layer_from_core(l) if first < 0 else layers[first])
    tensors: list[Any] = []
    for layer, reads in zip(layers, core.layer_inputs):
        if not reads:
            tensors.append(functional.input_tensor(layer))
        else:
            args = [tensors[j] for j in reads]
            tensors.append(functional.call(layer, args if len(args) > 1 else args[0], {}))
    order = list(core.input_layers)
    inputs = tensors[0] if len(order) == 1 else [tensors[i] for i in order]
    outs = list(core.output_layers)
    outputs = tensors[-1] if len(outs) == 1 else [tensors[i] for i in outs]
    return functional.Functional(inputs, outputs, name=core.name)


def model_from_json(json_string: str, custom_objects: Optional[dict[str, Any]] = None) -> Any:
    """keras.models.model_from_json: a Sequential model (uncompiled, as in Keras) from what
    Keras 3 or tf.keras 2 `to_json()` wrote. Layers crossover does not run (Conv2D, ...) and
    functional models are a ValueError naming the layer's class."""
    reject_unsupported("model_from_json", custom_objects=(custom_objects or None, None))
    if not isinstance(json_string, (str, bytes, bytearray)):
        raise TypeError(f"model_from_json: give the JSON text, got {type(json_string).__name__}")
    if isinstance(json_string, (bytes, bytearray)):
        json_string = json_string.decode("utf-8")
    return _sequential_from_json(json_string, "model_from_json")


# --- the .keras archive (Keras 3's saving_lib: _archive.py writes it) ----------------------------
# Keras's guard against a zip member that unpacks to far more than it stores (CWE-409).
_BOMB_FLOOR_BYTES = 1 << 32
_BOMB_EXPANSION = 100


def _refuse_weights_file(path: str, who: str) -> None:
    """load_model of a `.weights.h5` file: it holds weights only."""
    if path.endswith(".weights.h5") and who == "load_model":
        raise ValueError(
            f"load_model: {path}: a .weights.h5 file holds weights only: build the model "
            "(or load_model a .keras archive) and call model.load_weights on it"
        )


# --- the legacy whole-model .h5 (keras/src/legacy/saving/legacy_h5_format.py) ----------------
# The file itself is the library's (formats/keras_h5.h: attributes model_config, training_config,
# keras_version, backend; model_weights/<layer>/<weight path> datasets); here its JSON: the
# model's config as Keras's legacy model_metadata writes it ({"class_name", "config"}), and the
# compile settings as its training_config (the compile_config with objects serialized the
# legacy way, without "module", and the optimizer apart as "optimizer_config").


def _with_module(value: Any, module: str) -> Any:
    """A legacy serialized object with the Keras 3 module its class is in (for _deserialize)."""
    if isinstance(value, list):
        return [_with_module(v, module) for v in value]
    if isinstance(value, dict) and "class_name" in value and "module" not in value:
        return {**value, "module": module}
    return value


def _compile_config_of(training_config: Any, path: str) -> dict[str, Any]:
    """Keras's compile_args_from_training_config, as a compile_config _compile_from_config takes."""
    if not isinstance(training_config, dict):
        raise ValueError(f"load_model: {path}: training_config is not a JSON object")
    config = {k: v for k, v in training_config.items() if k != "optimizer_config"}
    optimizer = training_config.get("optimizer_config")
    if isinstance(optimizer, dict):
        optimizer = _with_module(optimizer, "keras.optimizers")
        inner = optimizer.get("config")
        if isinstance(inner, dict) and isinstance(inner.get("learning_rate"), dict):
            schedule = _with_module(inner["learning_rate"], "keras.optimizers.schedules")
            optimizer = {**optimizer, "config": {**inner, "learning_rate": schedule}}
        config["optimizer"] = optimizer
    if "loss" in config:
        config["loss"] = _with_module(config["loss"], "keras.losses")
    for key in ("metrics", "weighted_metrics"):
        if key in config:
            config[key] = _with_module(config[key], "keras.metrics")
    return config


def _load_legacy_h5(path: str, compile: bool) -> "Sequential":
    if not os.path.isfile(path):
        raise ValueError(f"load_model: {path}: no such file")
    try:
        texts, layers = _core.read_legacy_h5(path)
    except RuntimeError as e:
        raise ValueError(f"load_model: {e}") from None
    try:
        model_config = json.loads(texts["model_config"])
    except json.JSONDecodeError as e:
        raise ValueError(f"load_model: {path}: model_config is not JSON: {e}") from None
    class_name = model_config.get("class_name") if isinstance(model_config, dict) else None
    if class_name not in ("Sequential", "Functional", "Model"):
        raise ValueError(
            f"load_model: {path}: a model of class {class_name} is not supported (yet): "
            f"crossover loads Sequential and functional models; {SEE_SUPPORTED}"
        )
    model = _sequential_from_json(json.dumps(model_config), f"{path}: model_config")
    if compile and texts["training_config"]:
        try:
            training_config = json.loads(texts["training_config"])
        except json.JSONDecodeError as e:
            raise ValueError(f"load_model: {path}: training_config is not JSON: {e}") from None
        _compile_from_config(model, _compile_config_of(training_config, path), path)
    # Keras's load_weights_from_hdf5_group: the file's layers with weights, in order, into the
    # model's layers with weights.
    saved = [(name, weights) for name, weights in layers if weights]
    targets = [layer for layer in model.layers if layer._weight_kinds()]
    if len(saved) != len(targets):
        raise ValueError(
            f"load_model: {path}: Layer count mismatch when loading weights from file. Model "
            f"expected {len(targets)} layers, found {len(saved)} saved layers."
        )
    for k, ((name, weights), layer) in enumerate(zip(saved, targets)):
        try:
            layer.set_weights([value for _, value in weights])
        except (ValueError, RuntimeError) as e:
            raise ValueError(
                f"load_model: {path}: layer #{k} (named {layer.name} in the model, {name} in the "
                f"file): {e}"
            ) from None
    return model


def _read_member(zf: zipfile.ZipFile, name: str, path: str) -> bytes:
    info = zf.getinfo(name)
    if info.file_size > _BOMB_FLOOR_BYTES and info.file_size > _BOMB_EXPANSION * max(
        info.compress_size, 1
    ):
        raise ValueError(
            f"load_model: {path}: member {name} declares {info.file_size} bytes but stores "
            f"{info.compress_size}: refusing a potential decompression bomb"
        )
    with zf.open(name) as f:
        return f.read()


def _compile_from_config(model: "Sequential", compile_config: Any, path: str) -> None:
    """Keras's compile_from_config: model.compile(**the deserialized compile_config)."""
    try:
        if not isinstance(compile_config, dict):
            raise ValueError(f"compile_config is {type(compile_config).__name__}, not an object")
        model.compile(**{k: _deserialize(v) for k, v in compile_config.items()})
    except (ValueError, TypeError, AttributeError) as e:
        raise ValueError(
            f"load_model: {path}: the compile settings in config.json are not supported: {e} "
            "(load_model(path, compile=False) loads the model uncompiled)"
        ) from None


def load_model(
    filepath: Any, custom_objects: Any = None, compile: bool = True, safe_mode: bool = True
) -> "Sequential":
    """keras.models.load_model / keras.saving.load_model: a Sequential model from a Keras 3
    `.keras` archive (Keras's or crossover's): the layers from config.json, compiled with its
    compile_config when there is one (and compile=True), the weights from model.weights.h5 (the
    optimizer's state in it is not restored: training continues with a fresh one)."""
    reject_unsupported("load_model", custom_objects=(custom_objects or None, None))
    path = _path(filepath, "load_model")
    _refuse_weights_file(path, "load_model")
    if _is_legacy_h5(path):
        return _load_legacy_h5(path, compile)
    if not path.endswith(".keras"):
        raise ValueError(
            f"load_model: {path}: File format not supported: crossover loads Keras 3 .keras "
            "archives (model.save('model.keras')) and legacy .h5 model files"
        )
    if not os.path.isfile(path):
        raise ValueError(
            f"File not found: filepath={path}. Please ensure the file is an accessible `.keras` "
            "zip file."
        )
    if not zipfile.is_zipfile(path):
        raise ValueError(f"load_model: {path}: not a .keras archive (the file is not a zip)")
    try:
        with zipfile.ZipFile(path) as zf, tempfile.TemporaryDirectory() as tmp:
            names = zf.namelist()
            for member in (CONFIG_MEMBER, WEIGHTS_MEMBER):
                if member not in names:
                    npz = " (model.weights.npz, Keras's weights_format='npz', is not read)"
                    hint = npz if member == WEIGHTS_MEMBER and "model.weights.npz" in names else ""
                    raise ValueError(
                        f"load_model: {path}: the archive has no {member}{hint}; it is not a "
                        "Keras 3 .keras file crossover reads"
                    )
            try:
                config = json.loads(_read_member(zf, CONFIG_MEMBER, path).decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise ValueError(f"load_model: {path}: config.json is not JSON: {e}") from None
            class_name = config.get("class_name") if isinstance(config, dict) else None
            if class_name not in ("Sequential", "Functional"):
                raise ValueError(
                    f"load_model: {path}: a model of class {class_name} is not supported (yet): "
                    f"crossover loads Sequential and functional models; {SEE_SUPPORTED}"
                )
            model = _sequential_from_json(json.dumps(config), f"{path}: config.json")
            compile_config = config.get("compile_config")
            if compile and compile_config:
                _compile_from_config(model, compile_config, path)
            weights_file = os.path.join(tmp, WEIGHTS_MEMBER)
            if zf.getinfo(WEIGHTS_MEMBER).file_size > _BOMB_FLOOR_BYTES:
                _read_member(zf, WEIGHTS_MEMBER, path)  # the guard only: raises for a bomb
            with zf.open(WEIGHTS_MEMBER) as src, open(weights_file, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            try:
                load_weights(model, weights_file)
            except (ValueError, RuntimeError, OSError) as e:
                message = str(e).replace(weights_file, f"{path}:{WEIGHTS_MEMBER}")
                raise ValueError(f"load_model: {path}: {WEIGHTS_MEMBER}: {message}") from None
    except zipfile.BadZipFile as e:
        raise ValueError(f"load_model: {path}: a damaged .keras archive: {e}") from None
    return model


# keras.saving's names (to_json and model_from_json here are the models' and keras.models').
__all__ = ["save_model", "load_model", "save_weights", "load_weights"]


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "keras.saving", name, "save_model and load_model (.keras archives of Sequential models)"
    )
