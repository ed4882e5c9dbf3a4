"""Keras's weight files, model JSON and `.keras` archives written from a crossover model, on
crossover's library (formats/weights_io.h, formats/keras_h5.h, formats/model_config.h):
Sequential.save_weights / load_weights / to_json / save, ModelCheckpoint's archives. Below the
model modules, which call it; saving.py, which makes models from these files, is above them."""

import datetime
import json
import os
import tempfile
import zipfile
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .. import _core
from .._args import SEE_SUPPORTED, reject_unsupported
from .._versions import KERAS_VERSION
from .layers import _ModelBase

if TYPE_CHECKING:
    from ._sequential import Sequential


def _path(filepath: Any, who: str) -> str:
    try:
        return os.fspath(filepath)
    except TypeError:
        raise TypeError(f"{who}: filepath must be a str or os.PathLike, got {filepath!r}") from None


def _require_built(model: "Sequential", who: str) -> None:
    if not model.built:
        raise ValueError(
            f"You are {who} a model that has not yet been built: give it an input shape "
            "(keras.Input(shape=...) or input_shape=) first"
        )


def save_weights(
    model: "Sequential", filepath: Any, overwrite: bool = True, max_shard_size: Any = None
) -> None:
    """Keras 3's `.weights.h5` layout, or `.safetensors`, picked by the suffix; written to a
    temporary file in the same folder and renamed over `filepath` once complete."""
    reject_unsupported("save_weights", max_shard_size=(max_shard_size, None))
    path = _path(filepath, "save_weights")
    _core.weights_format(path)  # a .keras or legacy .h5 path is refused before anything else
    _require_built(model, "saving the weights of")
    if not overwrite and os.path.exists(path):
        raise ValueError(f"save_weights: {path} exists and overwrite=False")
    _core.save_weights(model._device_model(), path)


def load_weights(model: "Sequential", filepath: Any, skip_mismatch: bool = False) -> None:
    """Weights from a `.weights.h5` (Keras 3's, or crossover's) or `.safetensors` file, into a
    model of the same architecture; a mismatch is a ValueError naming the layer and shapes."""
    reject_unsupported("load_weights", skip_mismatch=(skip_mismatch, False))
    path = _path(filepath, "load_weights")
    _core.weights_format(path)
    _require_built(model, "loading weights into")
    if not os.path.exists(path):
        raise FileNotFoundError(f"load_weights: no such file: {path}")
    _core.load_weights(model._device_model(), path)


def to_json(model: "Sequential", **kwargs: Any) -> str:
    """Keras 3's model JSON (the library's model_to_json), with compile_config only once the
    user compiled; keyword arguments go to json.dumps, as in Keras."""
    inner = getattr(model, "_inner_outputs", None)
    if inner:
        raise NotImplementedError(
            f"model '{model.name}' outputs what other layers of it read, or an input "
            f"({', '.join(inner)}): crossover does not write such a model as Keras's (yet); "
            f"save_weights writes its weights; {SEE_SUPPORTED}"
        )
    config = json.loads(_core.model_to_json(model._model()))
    if not model._user_compiled:  # the library's placeholder compile is not the user's
        config.pop("compile_config", None)
    elif model._output_count() > 1:
        # The library writes one loss; a loss per output is not written (yet).
        config.pop("compile_config", None)
    return json.dumps(config, **kwargs)  # Keras's separators: {"a": 1, ...}


# --- the .keras archive (Keras 3's saving_lib) ------------------------------------------------
# A zip, members stored uncompressed, in Keras's order: metadata.json ({"keras_version",
# "date_saved"}), config.json (the model's Keras 3 JSON: to_json's, with "compile_config": {}
# for a model never compiled, as Keras writes it), model.weights.h5 (Keras 3's .weights.h5, the
# library's writer: the same file save_weights writes).
CONFIG_MEMBER = "config.json"
METADATA_MEMBER = "metadata.json"
WEIGHTS_MEMBER = "model.weights.h5"


def _refuse_legacy_h5(path: str, who: str) -> None:
    """ModelCheckpoint to a legacy whole-model `.h5`: not written by the callback (yet); the line
    names the `.keras` archive (model.save('m.h5') itself writes one)."""
    if _is_legacy_h5(path):
        raise ValueError(
            f"{who}: {path}: the legacy HDF5 whole-model format (.h5) is not supported (yet) "
            "here: use Keras 3's .keras archive (ModelCheckpoint('model.keras')), or "
            "save_weights_only=True with 'model.weights.h5'"
        )


def _is_legacy_h5(path: str) -> bool:
    """Keras's legacy whole-model HDF5 (`model.save('m.h5')`): `.h5`/`.hdf5`, not `.weights.h5`."""
    return path.endswith((".h5", ".hdf5")) and not path.endswith(".weights.h5")


# --- the legacy whole-model .h5 (keras/src/legacy/saving/legacy_h5_format.py) ----------------
# The file itself is the library's (formats/keras_h5.h: attributes model_config, training_config,
# keras_version, backend; model_weights/<layer>/<weight path> datasets); here its JSON: the
# model's config as Keras's legacy model_metadata writes it ({"class_name", "config"}), and the
# compile settings as its training_config (the compile_config with objects serialized the
# legacy way, without "module", and the optimizer apart as "optimizer_config").


def _legacy_serialized(value: Any) -> Any:
    """A compile_config value as Keras's legacy serialization writes it: {"class_name", "config"}
    objects (no "module" or "registered_name")."""
    if isinstance(value, list):
        return [_legacy_serialized(v) for v in value]
    if isinstance(value, dict):
        return {
            k: _legacy_serialized(v)
            for k, v in value.items()
            if not ("class_name" in value and k in ("module", "registered_name"))
        }
    return value


def _training_config(model: "Sequential") -> str:
    """training_config: "" for a model never compiled (Keras writes none)."""
    compile_config = json.loads(to_json(model)).get("compile_config")
    if not compile_config:
        return ""
    config = {k: _legacy_serialized(v) for k, v in compile_config.items() if k != "optimizer"}
    optimizer = compile_config.get("optimizer")
    if isinstance(optimizer, dict):
        config["optimizer_config"] = _legacy_serialized(optimizer)
    return json.dumps(config)


def _layer_weights_for_h5(model: "Sequential") -> list[tuple[str, list[tuple[str, Any]]]]:
    """Each of model.layers' weights, named by path as Keras 3 names its variables
    ("sequential/dense/kernel"); a layer without weights has none."""
    out = []
    for layer in model.layers:
        values = layer.get_weights()
        kinds = [name for name, _ in layer._weight_kinds()]
        if len(kinds) != len(values):
            kinds = [f"variable_{i}" for i in range(len(values))]
        elif len(set(kinds)) != len(kinds):  # a model used as a layer: its layers' kernels, ...
            kinds = [f"{k}_{i}" for i, k in enumerate(kinds)]
        names = [f"{model.name}/{layer.name}/{k}" for k in kinds]
        arrays = [np.ascontiguousarray(v, dtype=np.float32) for v in values]
        out.append((layer.name, list(zip(names, arrays))))
    return out


def _save_legacy_h5(model: "Sequential", path: str) -> None:
    config = json.loads(to_json(model))
    model_config = json.dumps({"class_name": config["class_name"], "config": config["config"]})
    _core.write_legacy_h5(
        path,
        model_config,
        _training_config(model),
        KERAS_VERSION,
        "tensorflow",
        _layer_weights_for_h5(model),
    )


def archive_config(model: "Sequential") -> str:
    """config.json: the model's Keras 3 JSON as Keras's saving_lib writes it."""
    config = json.loads(to_json(model))
    config.setdefault("compile_config", {})  # Keras 3.15 writes {} for a model never compiled
    return json.dumps(config)


def _metadata() -> str:
    return json.dumps(
        {
            "keras_version": KERAS_VERSION,
            "date_saved": datetime.datetime.now().strftime("%Y-%m-%d@%H:%M:%S"),
        }
    )


def write_archive(
    model: "Sequential", path: str, weights: Callable[[str], None], who: str = "save"
) -> None:
    """Writes the `.keras` archive of `model` to `path` atomically: `weights(p)` puts the
    weights file at p (a .weights.h5 in a temporary folder beside `path`), the archive is made
    beside it, synced, and renamed over `path`. On any failure `path` is as it was and the
    temporary folder is gone."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{who}: {path}: the folder {folder} does not exist")
    if os.path.isdir(path):
        raise IsADirectoryError(f"{who}: {path} is a folder; give a file path ending in .keras")
    config, metadata = archive_config(model), _metadata()
    with tempfile.TemporaryDirectory(dir=folder, prefix=".crossover-save-") as tmp:
        weights_file = os.path.join(tmp, WEIGHTS_MEMBER)
        weights(weights_file)
        partial = os.path.join(tmp, "archive.keras")
        with open(partial, "wb") as f:
            with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as zf:
                zf.writestr(METADATA_MEMBER, metadata)
                zf.writestr(CONFIG_MEMBER, config)
                zf.write(weights_file, WEIGHTS_MEMBER)
            f.flush()
            os.fsync(f.fileno())
        os.replace(partial, path)


def save_model(
    model: "Sequential", filepath: Any, overwrite: bool = True, zipped: Any = None, **kwargs: Any
) -> None:
    """model.save / keras.saving.save_model: Keras 3's `.keras` archive (see write_archive)."""
    if not isinstance(model, _ModelBase):
        raise TypeError(f"save_model: give a crossover.keras Sequential model, got {model!r}")
    kwargs.pop("include_optimizer", None)  # Keras 3 ignores it for .keras too
    save_format = kwargs.pop("save_format", None)
    if kwargs:
        raise ValueError(f"The following argument(s) are not supported: {list(kwargs.keys())}")
    reject_unsupported("save", zipped=(zipped, None if zipped is None else True))
    path = _path(filepath, "save")
    if _is_legacy_h5(path) or save_format in ("h5", "hdf5"):
        _require_built(model, "saving")
        if not overwrite and os.path.exists(path):
            raise ValueError(f"save: {path} exists and overwrite=False")
        _save_legacy_h5(model, path)
        return
    if save_format and not path.endswith(".keras"):
        raise ValueError(
            "The `save_format` argument is deprecated in Keras 3. Please remove this argument "
            f"and pass a file path with a `.keras` extension. Received: save_format={save_format}"
        )
    if not path.endswith(".keras"):
        raise ValueError(
            "Invalid filepath extension for saving. Please add a `.keras` extension for the "
            "native Keras format, or `.h5` for the legacy HDF5 format (crossover writes no "
            "SavedModel). "
            f"Received: filepath={path}."
        )
    _require_built(model, "saving")
    if not overwrite and os.path.exists(path):
        raise ValueError(f"save: {path} exists and overwrite=False")
    core = model._device_model()
    write_archive(model, path, lambda p: _core.save_weights(core, p))
