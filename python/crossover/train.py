"""tf.train's checkpoints: `Checkpoint`, `CheckpointManager`, `latest_checkpoint` (and
`get_checkpoint_state`, `list_variables`, `load_variable`), as TensorFlow 2.21 names, numbers and
lists them, in crossover's own file format.

What a checkpoint holds: the objects given to `Checkpoint(name=obj, ...)` or set as its
attributes (`ckpt.step = tf.Variable(1)`), and what they hold in turn, each at its path of
attribute names, as TensorFlow's object graph does: a `tf.Variable` its value; a model (Sequential,
functional or subclassed) its weights, layer by layer (`model/layer_with_weights-0/kernel`), and
the optimizer it was compiled with; a layer its weights; an optimizer its step count
(`_iterations`), its learning rate, and the slots (Adam's momentum and velocity, ...) it keeps
for the `tf.Variable`s the checkpoint also holds, which it updates itself (a from-scratch loop's
`apply_gradients`); a nested Checkpoint, list or dict its own children; the Checkpoint its
`save_counter`. An object reached by two paths is saved once, at the first (breadth first).
What is NOT kept: the slots of an optimizer that trains a model in the engine (a compiled model's,
or a custom loop's on a model's trainable_variables): they live in the C++ engine, which crossover
does not read from Python (yet); a restore trains on from fresh slots (said on stderr, once).

Restoring matches values to objects by those paths. A model that is not built yet (a subclassed
model before its first call, a Sequential without an input shape) gets its weights when it is built
(TensorFlow's deferred restore); an attribute set on the Checkpoint after `restore` gets its value
then. Shapes and dtypes must agree (a `ValueError` / `tf.errors.InvalidArgumentError` naming the
object, the key, both shapes and the file); values the objects leave unused, and objects the
checkpoint lacks, are what `status.assert_consumed()` and `assert_existing_objects_matched()`
report (a status dropped without `expect_partial()` says on stderr which values were unused).

Files, as TensorFlow names them: `prefix-N.index` and `prefix-N.data-00000-of-00001`, and the
folder's `checkpoint` file (TensorFlow's CheckpointState text: `model_checkpoint_path: "ckpt-3"`,
`all_model_checkpoint_paths: ...`), which `latest_checkpoint` reads. The bytes of the first two are
crossover's, not TensorFlow's: the index is JSON (format, keys, shapes, dtypes) and the data a
numpy `.npz` of the values, each written to a temporary file in the folder, synced and renamed
over the target, so an interrupted save leaves the previous files whole. TensorFlow cannot read
them, and a TensorFlow-written checkpoint is refused here with a NotImplementedError naming the way
across (`model.save_weights('x.weights.h5')`, which both read)."""

import collections
import glob
import json
import logging
import os
import re
import secrets
import sys
import time
import zipfile
from typing import Any, Callable, Iterable, Optional

import numpy as np

from ._args import reject_unsupported, unsupported_attribute
from ._tensor import InvalidArgumentError

FORMAT = "crossover tf.train.Checkpoint"
VERSION = 1
INDEX_SUFFIX = ".index"
DATA_SUFFIX = ".data-00000-of-00001"
STATE_FILE = "checkpoint"  # the folder's CheckpointState, as TensorFlow names it
_VALUE = "/.ATTRIBUTES/VARIABLE_VALUE"  # TensorFlow's key suffix of a variable's value
_SLOT = "/.OPTIMIZER_SLOT/"
# The last 8 bytes of a TensorFlow (LevelDB table) .index file: kTableMagicNumber.
_TF_TABLE_MAGIC = bytes.fromhex("57fb808b247547db")
_DTYPES = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16"}
_DTYPES |= {"uint32", "uint64", "bool"}


class NotFoundError(FileNotFoundError):
    """tf.errors.NotFoundError here: no checkpoint (or no key in it) where one was asked for. A
    FileNotFoundError, so an OSError."""


class DataLossError(ValueError):
    """tf.errors.DataLossError here: a checkpoint file that is damaged or not crossover's."""


def _logger() -> logging.Logger:
    return logging.getLogger("tensorflow")


def _say(line: str) -> None:
    print(f"crossover: {line}", file=sys.stderr, flush=True)


def _path_arg(value: Any, who: str, what: str) -> str:
    try:
        path = os.fspath(value)
    except TypeError:
        raise TypeError(
            f"{who}: {what} must be a path (str or os.PathLike), got {value!r}"
        ) from None
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    return path


# --- the folder's `checkpoint` file: TensorFlow's CheckpointState in protobuf text format --------
class CheckpointState:
    """tf.train.get_checkpoint_state's answer: the latest checkpoint's path, the paths of those
    kept (oldest first), their times, and the last time a checkpoint was kept for good
    (CheckpointManager's keep_checkpoint_every_n_hours). str() is the file's text."""

    def __init__(
        self,
        model_checkpoint_path: str = "",
        all_model_checkpoint_paths: Optional[list[str]] = None,
        all_model_checkpoint_timestamps: Optional[list[float]] = None,
        last_preserved_timestamp: float = 0.0,
    ) -> None:
        self.model_checkpoint_path = model_checkpoint_path
        self.all_model_checkpoint_paths = list(all_model_checkpoint_paths or [])
        self.all_model_checkpoint_timestamps = list(all_model_checkpoint_timestamps or [])
        self.last_preserved_timestamp = float(last_preserved_timestamp)

    def __str__(self) -> str:
        lines = []
        if self.model_checkpoint_path:
            lines.append(f"model_checkpoint_path: {_quote(self.model_checkpoint_path)}")
        lines += [
            f"all_model_checkpoint_paths: {_quote(p)}" for p in self.all_model_checkpoint_paths
        ]
        lines += [
            f"all_model_checkpoint_timestamps: {t!r}" for t in self.all_model_checkpoint_timestamps
        ]
        if self.last_preserved_timestamp:
            lines.append(f"last_preserved_timestamp: {self.last_preserved_timestamp!r}")
        return "".join(line + "\n" for line in lines)

    def __repr__(self) -> str:
        return str(self)


def _quote(text: str) -> str:
    """A protobuf text-format string: C escapes, bytes outside ASCII's printable range as octal
    (protobuf's CEscape, as TensorFlow writes the file)."""
    named = {10: "\\n", 13: "\\r", 9: "\\t", 34: '\\"', 39: "\\'", 92: "\\\\"}
    out = []
    for b in text.encode("utf-8"):
        if b in named:
            out.append(named[b])
        elif b < 0x20 or b >= 0x7F:
            out.append(f"\\{b:03o}")
        else:
            out.append(chr(b))
    return '"' + "".join(out) + '"'


_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"|\'((?:[^\'\\\n]|\\.)*)\'')
_ESCAPE = re.compile(r"\\(?:([0-7]{1,3})|x([0-9a-fA-F]{1,2})|(.))", re.S)
_SIMPLE_ESCAPES = {"n": 10, "r": 13, "t": 9, '"': 34, "'": 39, "\\": 92, "a": 7, "b": 8}
_SIMPLE_ESCAPES.update({"f": 12, "v": 11, "?": 63})


def _unquote(body: str) -> str:
    out = bytearray()
    at = 0
    for m in _ESCAPE.finditer(body):
        out += body[at : m.start()].encode("utf-8")
        octal, hexa, char = m.groups()
        if octal:
            out.append(int(octal, 8) & 0xFF)
        elif hexa:
            out.append(int(hexa, 16))
        elif char in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[char])
        else:
            raise ValueError(f"unknown escape \\{char}")
        at = m.end()
    out += body[at:].encode("utf-8")
    return out.decode("utf-8")


def _parse_state(text: str) -> CheckpointState:
    """The CheckpointState of a `checkpoint` file's text; ValueError where it is not one."""
    state = CheckpointState()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        name, colon, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if not colon:
            raise ValueError(f"line {number}: expected `field: value`, got {raw!r}")
        if name in ("model_checkpoint_path", "all_model_checkpoint_paths"):
            pieces = list(_STRING.finditer(value))  # "a" "b" is "ab", as protobuf reads it
            if not pieces or _STRING.sub("", value).strip():
                raise ValueError(f"line {number}: {name} needs a quoted string, got {value!r}")
            path = "".join(_unquote(m.group(1) if m.group(1) is not None else m.group(2))
                           for m in pieces)  # fmt: skip
            if name == "model_checkpoint_path":
                state.model_checkpoint_path = path
            else:
                state.all_model_checkpoint_paths.append(path)
        elif name in ("all_model_checkpoint_timestamps", "last_preserved_timestamp"):
            try:
                number_value = float(value)
            except ValueError:
                raise ValueError(f"line {number}: {name} needs a number, got {value!r}") from None
            if name == "last_preserved_timestamp":
                state.last_preserved_timestamp = number_value
            else:
                state.all_model_checkpoint_timestamps.append(number_value)
        else:
            raise ValueError(f"line {number}: no field {name!r} in a CheckpointState")
    return state


def _read_state_file(path: str) -> CheckpointState:
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("it is not text") from None
    return _parse_state(text)


def get_checkpoint_state(
    checkpoint_dir: Any, latest_filename: Any = None
) -> Optional[CheckpointState]:
    """tf.train.get_checkpoint_state(checkpoint_dir): the folder's `checkpoint` file (or
    `latest_filename`), its relative paths joined to the folder; None when there is none or it
    does not parse (with TensorFlow's warning on its logger)."""
    folder = _path_arg(checkpoint_dir, "tf.train.get_checkpoint_state", "checkpoint_dir")
    path = os.path.join(folder, latest_filename or STATE_FILE)
    if not os.path.isfile(path):
        return None
    try:
        state = _read_state_file(path)
    except (OSError, ValueError) as e:
        _logger().warning("%s: %s", type(e).__name__, e)
        _logger().warning("%s: Checkpoint ignored", path)
        return None
    if not state.model_checkpoint_path:
        raise ValueError(f"Invalid checkpoint state loaded from {folder}")
    if not os.path.isabs(state.model_checkpoint_path):
        state.model_checkpoint_path = os.path.join(folder, state.model_checkpoint_path)
    state.all_model_checkpoint_paths = [
        p if os.path.isabs(p) else os.path.join(folder, p) for p in state.all_model_checkpoint_paths
    ]
    return state


def latest_checkpoint(checkpoint_dir: Any, latest_filename: Any = None) -> Optional[str]:
    """tf.train.latest_checkpoint(checkpoint_dir): the prefix of the latest checkpoint the folder's
    `checkpoint` file names (`dir/ckpt-3`), if its files are there; else None."""
    state = get_checkpoint_state(checkpoint_dir, latest_filename)
    if state is None or not state.model_checkpoint_path:
        return None
    path = state.model_checkpoint_path
    if os.path.exists(path + INDEX_SUFFIX) or os.path.isfile(path):
        return path
    _logger().error("Couldn't match files for checkpoint %s", path)
    return None


def _relative(path: str, folder: str) -> str:
    """The path as the `checkpoint` file writes it: relative to its folder (TensorFlow's
    save_relative_paths)."""
    return os.path.relpath(os.path.abspath(path), os.path.abspath(folder or "."))


def _check_state_file(folder: str, who: str) -> None:
    """A `checkpoint` in the folder that is not a CheckpointState (a folder, or a file of
    something else) is left alone: checked before a save writes anything."""
    path = os.path.join(folder, STATE_FILE)
    if os.path.isdir(path):
        raise IsADirectoryError(
            f"{who}: {path} is a folder, where the checkpoint state file `{STATE_FILE}` goes: "
            "save the checkpoints in another folder"
        )
    if os.path.lexists(path):
        try:
            _read_state_file(path)
        except (OSError, ValueError) as e:
            raise ValueError(
                f"{who}: {path} exists and is not a checkpoint state file (`model_checkpoint_path: "
                f'"..."` lines) ({e}): crossover does not overwrite it; save the checkpoints in '
                "another folder, or remove it"
            ) from None


def _write_state(folder: str, state: CheckpointState, who: str) -> None:
    """Writes the folder's `checkpoint` file (atomically), where _check_state_file allows."""
    _check_state_file(folder, who)
    text = str(state).encode("utf-8")
    _atomic_write(os.path.join(folder, STATE_FILE), lambda f: f.write(text))


# --- files ------------------------------------------------------------------------------------
def _atomic_write(path: str, fill: Callable[[Any], Any]) -> None:
    """Writes a file through a temporary file in its folder, synced and renamed over it: a reader
    sees the old file or the new one, never half of one."""
    folder = os.path.dirname(path) or "."
    base = os.path.basename(path)
    while True:
        tmp = os.path.join(folder, f".{base}.{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
    try:
        with os.fdopen(fd, "wb") as f:
            fill(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # the rename itself, on disk
        dir_fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)


class _Entry:
    """One value of a checkpoint: its key, its array, and what it was (for messages)."""

    def __init__(self, key: str, array: np.ndarray, what: str, owner: str, **meta: Any) -> None:
        self.key = key
        self.array = array
        self.what = what
        self.owner = owner  # the path of the object it belongs to
        self.meta = meta  # "slot": {"variable": path, "optimizer": path, "name": ...}


def _write_checkpoint(
    prefix: str, entries: list[_Entry], objects: list[dict[str, Any]], who: str
) -> None:
    """prefix.data-00000-of-00001 (the arrays, an .npz), then prefix.index (JSON naming them);
    the index, written last, is what makes the checkpoint exist."""
    folder = os.path.dirname(prefix)
    if folder:
        os.makedirs(folder, exist_ok=True)
    index, data = prefix + INDEX_SUFFIX, prefix + DATA_SUFFIX
    for path in (index, data):
        if os.path.isdir(path):
            raise IsADirectoryError(f"{who}: {path} is a folder, where a checkpoint file goes")
    seen: dict[str, str] = {}
    for e in entries:
        if e.key in seen:
            raise ValueError(
                f"{who}: two values would be saved under one key {e.key!r} ({seen[e.key]} and "
                f"{e.what}): give the objects different names"
            )
        seen[e.key] = e.what
    token = secrets.token_hex(16)
    arrays = {f"a{i}": np.array(e.array, order="C") for i, e in enumerate(entries)}
    arrays["token"] = np.frombuffer(token.encode("ascii"), dtype=np.uint8)
    _atomic_write(data, lambda f: np.savez(f, **arrays))
    from ._versions import CROSSOVER_VERSION

    described = []
    for i, e in enumerate(entries):
        item = {"key": e.key, "array": f"a{i}", "shape": list(e.array.shape)}
        item.update(dtype=e.array.dtype.name, what=e.what, owner=e.owner, **e.meta)
        described.append(item)
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "written_by": f"crossover {CROSSOVER_VERSION}",
        "note": "crossover's checkpoint format (read by crossover, not by TensorFlow)",
        "data_file": os.path.basename(data),
        "token": token,
        "entries": described,
        "objects": objects,
    }
    text = _index_text(meta).encode("utf-8")
    _atomic_write(index, lambda f: f.write(text))


def _index_text(meta: dict[str, Any]) -> str:
    """The index's JSON, one entry (and one object) a line."""
    lines = []
    for name, value in meta.items():
        if isinstance(value, list) and value:
            items = ",\n".join("  " + json.dumps(item) for item in value)
            lines.append(f" {json.dumps(name)}: [\n{items}\n ]")
        else:
            lines.append(f" {json.dumps(name)}: {json.dumps(value)}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


class _Stored:
    """A checkpoint read back: its entries by key (arrays loaded), and where it is."""

    def __init__(
        self, prefix: str, entries: dict[str, _Entry], objects: list[dict[str, Any]]
    ) -> None:
        self.prefix = prefix
        self.entries = entries
        self.objects = objects


def _not_found(prefix: str, who: str) -> NotFoundError:
    index = prefix + INDEX_SUFFIX
    why = f"{index} does not exist"
    if os.path.isdir(prefix):
        latest = latest_checkpoint(prefix)
        hint = f" (the latest there: {latest!r})" if latest else ""
        why = (
            f"{prefix} is a folder, not a checkpoint's prefix: give the prefix its files start "
            f"with, as tf.train.latest_checkpoint({prefix!r}) returns it{hint}"
        )
    elif prefix.endswith((INDEX_SUFFIX, DATA_SUFFIX)):
        bare = prefix[: -len(INDEX_SUFFIX)] if prefix.endswith(INDEX_SUFFIX) else prefix
        bare = bare[: -len(DATA_SUFFIX)] if bare.endswith(DATA_SUFFIX) else bare
        why = f"give the checkpoint's prefix, without the file's suffix: {bare!r}"
    elif glob.glob(glob.escape(prefix) + "-*" + INDEX_SUFFIX):
        why += (
            "; you may be missing the checkpoint's number (the '-1' in 'path/to/ckpt-1', as "
            "save() returns it)"
        )
    return NotFoundError(f"{who}: no checkpoint at {prefix}: {why}")


def _read_checkpoint(prefix: str, who: str) -> _Stored:
    index, data = prefix + INDEX_SUFFIX, prefix + DATA_SUFFIX
    if not os.path.isfile(index):
        raise _not_found(prefix, who)
    with open(index, "rb") as f:
        raw = f.read()
    if not raw.lstrip().startswith(b"{"):
        if raw.endswith(_TF_TABLE_MAGIC):
            raise NotImplementedError(
                f"{who}: {prefix} is a TensorFlow checkpoint ({index} is TensorFlow's table "
                "format): crossover reads the checkpoints crossover writes, not TensorFlow's. To "
                "bring a model's weights across, save them under TensorFlow with "
                "model.save_weights('model.weights.h5') (or model.save('model.keras')) and load "
                "them here with model.load_weights (or keras.models.load_model)"
            )
        raise DataLossError(
            f"{who}: {index} is not a checkpoint index (neither crossover's nor TensorFlow's)"
        )
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as e:
        raise DataLossError(f"{who}: {index} is damaged: it does not parse as JSON ({e})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise DataLossError(f"{who}: {index} is not a crossover checkpoint index")
    if meta.get("version") != VERSION:
        raise DataLossError(
            f"{who}: {index} is version {meta.get('version')!r} of crossover's checkpoint format; "
            f"this crossover reads version {VERSION} (it was written by "
            f"{meta.get('written_by', 'another crossover')})"
        )
    if not os.path.isfile(data):
        raise NotFoundError(
            f"{who}: the checkpoint {prefix} has no data file: {data} does not exist"
        )
    described = meta.get("entries")
    if not isinstance(described, list):
        raise DataLossError(f"{who}: {index} is damaged: it lists no entries")
    entries: dict[str, _Entry] = {}
    try:
        with np.load(data, allow_pickle=False) as npz:
            token = bytes(npz["token"]).decode("ascii") if "token" in npz.files else None
            if token != meta.get("token"):
                raise DataLossError(
                    f"{who}: {data} does not belong to {index} (they were written by different "
                    "saves: one of them was replaced or copied alone)"
                )
            for item in described:
                key, name = item["key"], item["array"]
                shape, dtype = tuple(int(d) for d in item["shape"]), str(item["dtype"])
                if not isinstance(key, str) or dtype not in _DTYPES or key in entries:
                    raise DataLossError(f"{who}: {index} is damaged: bad entry {item!r}")
                array = npz[name]
                if array.shape != shape or array.dtype.name != dtype:
                    raise DataLossError(
                        f"{who}: {data} is damaged: {key} has shape {array.shape} and dtype "
                        f"{array.dtype.name}, its index says {shape} and {dtype}"
                    )
                extra = {k: v for k, v in item.items() if k == "slot"}
                entries[key] = _Entry(
                    key, array, str(item.get("what", key)), str(item.get("owner", "")), **extra
                )
    except DataLossError:
        raise
    except (OSError, ValueError, KeyError, TypeError, zipfile.BadZipFile, EOFError) as e:
        raise DataLossError(
            f"{who}: {data} is damaged or not crossover's ({type(e).__name__}: {e})"
        ) from None
    objects = meta.get("objects") if isinstance(meta.get("objects"), list) else []
    return _Stored(prefix, entries, objects)


# --- the object graph -------------------------------------------------------------------------
def _classes() -> tuple[Any, Any, Any, Any]:
    from .keras.layers import Layer, Weight
    from .keras.models import Model
    from .keras.optimizers import Optimizer

    return Weight, Model, Layer, Optimizer


def _kind(obj: Any) -> Optional[str]:
    """What the checkpoint keeps of an object, or None when it keeps nothing of it (not a
    trackable object)."""
    Weight, Model, Layer, Optimizer = _classes()
    if isinstance(obj, Checkpoint):
        return "checkpoint"
    if isinstance(obj, Weight):
        return "variable"
    if isinstance(obj, Model):
        return "model"
    if isinstance(obj, Layer):
        return "layer"
    if isinstance(obj, Optimizer):
        return "optimizer"
    if isinstance(obj, dict):
        return "dict" if all(_kind(v) is not None for v in obj.values()) else None
    if isinstance(obj, (list, tuple)):
        return "list" if all(_kind(v) is not None for v in obj) else None
    return None


def _not_trackable(name: str, value: Any) -> ValueError:
    return ValueError(
        f"`Checkpoint` was expecting {name} to be a trackable object (an object derived from "
        f"`Trackable`), got {value!r}. crossover's tf.train.Checkpoint keeps tf.Variables, "
        "keras models, layers and optimizers, other Checkpoints, and lists and dicts of them"
    )


def _escape(name: str) -> str:
    """An attribute name as a key's part (TensorFlow's escaping of '.' and '/')."""
    return name.replace(".", "..").replace("/", ".S")


def _join(path: str, name: str) -> str:
    return f"{path}/{name}" if path else name


def _children(obj: Any) -> list[tuple[str, Any]]:
    kind = _kind(obj)
    if kind == "checkpoint":
        items = list(obj._tracked.items())
        if obj._save_counter is not None:
            items.append(("save_counter", obj._save_counter))
        return items
    if kind == "dict":
        return [(str(k), v) for k, v in obj.items()]
    if kind == "list":
        return [(str(i), v) for i, v in enumerate(obj)]
    if kind == "model":
        optimizer = obj.__dict__.get("optimizer")
        if _kind(optimizer) == "optimizer":
            return [("optimizer", optimizer)]
    return []


def _walk(roots: Iterable[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """(path, object) of every object reachable from the roots, each once, breadth first (its
    shortest path, as TensorFlow names an object reached by several)."""
    order: list[tuple[str, Any]] = []
    seen: set[int] = set()
    queue = collections.deque(roots)
    while queue:
        path, obj = queue.popleft()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        order.append((path, obj))
        for name, child in _children(obj):
            queue.append((_join(path, _escape(name)), child))
    return order


def _variable_name(var: Any) -> str:
    return str(getattr(var, "name", "variable"))


def _model_keys(model: Any, count: int) -> list[tuple[str, str]]:
    """(key part, weight's name) of each of a model's weights, in get_weights() order: layer by
    layer (those with weights numbered from 0) and by the weight's own name, as tf.keras 2 keyed
    a Sequential's (`layer_with_weights-0/kernel`)."""
    out: list[tuple[str, str]] = []
    numbered = 0
    for layer in model._weight_leaves():
        kinds = layer._weight_kinds()
        if not kinds:
            continue
        name = getattr(layer, "name", "layer")
        for kind, _ in kinds:
            out.append((f"layer_with_weights-{numbered}/{_escape(kind)}", f"{name}/{kind}"))
        numbered += 1
    if len(out) != count or len({k for k, _ in out}) != count:
        out = [(f"weights/{i}", f"weight {i}") for i in range(count)]
    return out


def _layer_keys(layer: Any, count: int) -> list[tuple[str, str]]:
    names = [kind for kind, _ in layer._weight_kinds()]
    if len(names) == count and len(set(names)) == count:
        return [(_escape(n), f"{layer.name}/{n}") for n in names]
    return [(f"weights/{i}", f"{layer.name} weight {i}") for i in range(count)]


def _slot_names(optimizer: Any) -> list[str]:
    from . import _core
    from .keras import optimizers

    return list(_core.optimizer_slot_names(optimizers.get(optimizer)))


def _engine_bound(optimizer: Any) -> bool:
    """Whether the optimizer trains a model in the engine (compiled with it, or a custom loop on
    a model's trainable_variables): its slots and step count are the engine's then."""
    loop = optimizer._loop_model() if optimizer._loop_model is not None else None
    return optimizer._core_model() is not None or loop is not None


_warned_engine_state: set[str] = set()


def _refuse_untraced(model: Any, path: str, who: str) -> None:
    """A subclassed model whose call() ran in Python on data (it could not be traced) has
    weights in its layers but no list of them: saving none would lose them silently."""
    from .keras._eager import _held_layers

    if any(layer.get_weights() for layer in _held_layers(model)):
        raise NotImplementedError(
            f"{who}: model {model.name!r} ({path}) has weights in its layers, but it is not built "
            "(its call() ran in Python on data, not traced into the engine's graph), so crossover "
            "has no list of its weights to save (yet): save the layers themselves "
            "(tf.train.Checkpoint(dense=model.dense, ...)), or make call() traceable"
        )


def _collect(roots: list[tuple[str, Any]], who: str) -> tuple[list[_Entry], list[dict[str, Any]]]:
    """The values to save, and the objects they belong to."""
    nodes = _walk(roots)
    entries: list[_Entry] = []
    objects: list[dict[str, Any]] = []
    variables: dict[int, str] = {}  # id(variable) -> its path, for the optimizers' slots
    optimizers: list[tuple[str, Any]] = []
    for path, obj in nodes:
        kind = _kind(obj)
        objects.append({"path": path, "kind": kind, "class": type(obj).__name__})
        if kind == "variable":
            variables[id(obj)] = path
            array = np.array(obj.numpy(), dtype=np.dtype(obj.dtype))
            what = f"variable {_variable_name(obj)!r}"
            entries.append(_Entry(path + _VALUE, array, what, path))
        elif kind == "model":
            if not obj.built:
                _refuse_untraced(obj, path, who)
                objects[-1]["built"] = False  # no weights yet (TensorFlow saves none either)
                continue
            weights = obj.get_weights()
            for (part, name), w in zip(_model_keys(obj, len(weights)), weights):
                what = f"weight {name!r} of model {obj.name!r}"
                entries.append(_Entry(_join(path, part) + _VALUE, np.asarray(w), what, path))
        elif kind == "layer":
            weights = obj.get_weights()
            for (part, name), w in zip(_layer_keys(obj, len(weights)), weights):
                what = f"weight {name!r} of layer {obj.name!r}"
                entries.append(_Entry(_join(path, part) + _VALUE, np.asarray(w), what, path))
        elif kind == "optimizer":
            optimizers.append((path, obj))
            label = f"optimizer {obj.name!r} ({type(obj).__name__})"
            steps = int(obj.iterations)
            entries.append(
                _Entry(
                    _join(path, "_iterations") + _VALUE,
                    np.array(steps, np.int64),
                    f"the step count of {label}",
                    path,
                )
            )
            if obj._schedule is None:
                rate = np.array(obj._current_learning_rate(), np.float32)
                entries.append(
                    _Entry(
                        _join(path, "_learning_rate") + _VALUE,
                        rate,
                        f"the learning rate of {label}",
                        path,
                    )
                )
            stateful = any(_slot_names(obj))
            if _engine_bound(obj) and stateful and steps > 0:
                objects[-1]["engine_state"] = True
                if obj.name not in _warned_engine_state:
                    _warned_engine_state.add(obj.name)
                    _say(
                        f"{who}: {label} is saved with its step count ({steps}) and learning "
                        "rate, not its slots: they are in the engine of the model it trains, "
                        "which crossover does not read from Python (yet); a restore trains on "
                        "from fresh slots"
                    )
    for path, opt in optimizers:
        state = getattr(opt, "_array_state", None)
        if state is None:
            continue
        names = _slot_names(opt)
        label = f"optimizer {opt.name!r}"
        for var, *slots in state[1].values():
            var_path = variables.get(id(var))
            if var_path is None:
                continue  # a variable the checkpoint does not hold: its slots are not kept
            for name, array in zip(names, slots):
                if name:
                    key = f"{var_path}{_SLOT}{path}/{name}{_VALUE}"
                    what = f"the {name} slot of {label} for variable {_variable_name(var)!r}"
                    slot = {"variable": var_path, "optimizer": path, "name": name}
                    entries.append(_Entry(key, np.array(array, np.float32), what, path, slot=slot))
    return entries, objects


# --- restoring --------------------------------------------------------------------------------
class _Group:
    """Values restored together into one object: their keys with (what, shape, dtype), and how
    they are set once all are checked."""

    def __init__(self, path: str, obj: Any, label: str, exact_dtype: bool) -> None:
        self.path = path
        self.obj = obj
        self.label = label
        self.exact_dtype = exact_dtype
        self.specs: dict[str, tuple[str, tuple[int, ...], np.dtype]] = {}
        self.apply: Callable[[dict[str, np.ndarray]], None] = lambda values: None
        # An optimizer's slots for the variables restored with it: id(var) -> (var, {name: array}).
        self.slots: dict[int, tuple[Any, dict[str, np.ndarray]]] = {}


def _variable_group(path: str, var: Any) -> _Group:
    group = _Group(path, var, f"variable {_variable_name(var)!r}", exact_dtype=True)
    value = np.asarray(var.numpy())
    group.specs[path + _VALUE] = (group.label, tuple(value.shape), np.dtype(var.dtype))

    def apply(values: dict[str, np.ndarray]) -> None:
        if path + _VALUE in values:
            var.assign(values[path + _VALUE])

    group.apply = apply
    return group


def _weights_group(
    path: str, obj: Any, keys: list[tuple[str, str]], current: list[np.ndarray], label: str
) -> _Group:
    group = _Group(path, obj, label, exact_dtype=False)
    order = []
    for (part, name), w in zip(keys, current):
        key = _join(path, part) + _VALUE
        group.specs[key] = (f"weight {name!r} of {label}", tuple(np.shape(w)), np.dtype(np.float32))
        order.append(key)

    def apply(values: dict[str, np.ndarray]) -> None:
        if not values:
            return
        new = [values.get(k, w) for k, w in zip(order, current)]
        obj.set_weights([np.asarray(w, np.float32) for w in new])

    group.apply = apply
    return group


def _model_group(path: str, model: Any) -> _Group:
    current = model.get_weights()
    keys = _model_keys(model, len(current))
    return _weights_group(path, model, keys, current, f"model {model.name!r}")


def _optimizer_group(path: str, opt: Any) -> _Group:
    label = f"optimizer {opt.name!r} ({type(opt).__name__})"
    group = _Group(path, opt, label, exact_dtype=True)
    steps_key = _join(path, "_iterations") + _VALUE
    rate_key = _join(path, "_learning_rate") + _VALUE
    group.specs[steps_key] = (f"the step count of {label}", (), np.dtype(np.int64))
    if opt._schedule is None:
        group.specs[rate_key] = (f"the learning rate of {label}", (), np.dtype(np.float32))

    def apply(values: dict[str, np.ndarray]) -> None:
        if rate_key in values:
            opt.learning_rate = float(values[rate_key])
        if steps_key in values:
            _set_steps(opt, int(values[steps_key]))
        if group.slots:
            _set_slots(opt, group.slots)

    group.apply = apply
    return group


def _set_steps(opt: Any, steps: int) -> None:
    """The optimizer's step count, for the variables it updates itself: a fresh engine brought to
    that step (empty steps: Adam's bias correction, a schedule's rate and Nadam's product go on
    from there exactly), keeping the slots it has."""
    from . import _core
    from .keras import optimizers

    if _engine_bound(opt):
        if int(opt.iterations) != steps:
            _say(
                f"tf.train.Checkpoint.restore: optimizer {opt.name!r} trains a model in the "
                f"engine, whose step count ({int(opt.iterations)}) crossover cannot set from "
                f"Python (yet): the checkpoint's {steps} is not restored"
            )
        return
    state = getattr(opt, "_array_state", None)
    slots = state[1] if state is not None else {}
    engine = _core.ArrayOptimizer(optimizers.get(opt))
    for _ in range(steps):
        engine.step([])
    opt._array_state = (engine, slots)
    opt._array_state_steps = 0
    opt._iterations = steps


def _set_slots(opt: Any, per_variable: dict[int, tuple[Any, dict[str, np.ndarray]]]) -> None:
    """The optimizer's slots for these variables (the checkpoint's; a slot it lacks starts as a
    fresh one does), beside those it keeps for others."""
    state = getattr(opt, "_array_state", None)
    if state is None:
        _set_steps(opt, int(opt._iterations))
        state = opt._array_state
    engine, slots = state
    names = _slot_names(opt)
    for var, values in per_variable.values():
        shape = tuple(np.shape(var._eager_read()))
        first = np.float32(engine.initial_slot_value)
        arrays = [
            np.full(shape, first, np.float32),
            np.zeros(shape, np.float32),
            np.zeros(shape if engine.third_slot else (0,), np.float32),
        ]
        for i, name in enumerate(names):
            if name and name in values:
                arrays[i] = np.array(values[name], dtype=np.float32, order="C")
        slots[id(var)] = (var, *arrays)


class _Restore:
    """One restore's bookkeeping: what the checkpoint holds, which of its values found their
    object, the objects that found none, and the models still waiting to be built."""

    def __init__(self, stored: _Stored, who: str, skip: Optional[Any] = None) -> None:
        self.stored = stored
        self.who = who
        self.skip = skip  # an object not restored (read()'s save_counter)
        self.used: set[str] = set()
        self.claimed: set[str] = set()  # the values of models not built yet
        self.unmatched_objects: list[str] = []
        self.pending: dict[int, str] = {}  # id(model) -> what it is (models not built yet)
        self.partial_ok = False

    @property
    def unused(self) -> list[str]:
        return [k for k in self.stored.entries if k not in self.used and k not in self.claimed]

    def restore_into(self, roots: list[tuple[str, Any]]) -> None:
        """Matches the checkpoint's values to the objects reachable from the roots, checks each
        (shape, dtype), then sets them; a model not built yet gets its values when it is."""
        stored = self.stored.entries
        groups: list[_Group] = []
        variables: dict[str, Any] = {}  # path -> variable
        optimizers: dict[str, _Group] = {}
        deferred: list[tuple[str, Any, dict[str, _Entry]]] = []
        for path, obj in _walk(roots):
            kind = _kind(obj)
            if obj is self.skip:
                continue
            if kind == "variable":
                variables[path] = obj
                groups.append(_variable_group(path, obj))
            elif kind == "model":
                if obj.built:
                    groups.append(_model_group(path, obj))
                else:
                    mine = self._owned_by(path)
                    if mine:
                        self._check_deferrable(path, obj)
                        deferred.append((path, obj, mine))
            elif kind == "layer":
                weights = obj.get_weights()
                if obj._weight_kinds() and not weights:
                    if self._owned_by(path):
                        raise NotImplementedError(
                            f"{self.who}: layer {obj.name!r} ({path}) is not built yet, so its "
                            f"weights from {self.stored.prefix} have nowhere to go: restore the "
                            "model that holds it, or build it first (call it on data, or build "
                            "its model)"
                        )
                    continue
                keys = _layer_keys(obj, len(weights))
                groups.append(_weights_group(path, obj, keys, weights, f"layer {obj.name!r}"))
            elif kind == "optimizer":
                group = _optimizer_group(path, obj)
                optimizers[path] = group
                groups.append(group)
        values: dict[int, dict[str, np.ndarray]] = {}
        for group in groups:
            mine = values.setdefault(id(group), {})
            for key, (what, shape, dtype) in group.specs.items():
                entry = stored.get(key)
                if entry is None:
                    if key != "save_counter" + _VALUE:  # a checkpoint write() made has none
                        self.unmatched_objects.append(f"{what} ({key})")
                    continue
                mine[key] = self._checked(entry, what, shape, dtype, group.exact_dtype)
        # The optimizers' slots, for the variables restored with them.
        slot_keys = []
        for key, entry in stored.items():
            slot = entry.meta.get("slot")
            if not isinstance(slot, dict):
                continue
            group = optimizers.get(str(slot.get("optimizer")))
            var = variables.get(str(slot.get("variable")))
            if group is None or var is None:
                continue
            shape = tuple(np.shape(var._eager_read()))
            name = str(slot.get("name"))
            what = f"the {name} slot of {group.label} for variable {_variable_name(var)!r}"
            array = self._checked(entry, what, shape, np.dtype(np.float32), True)
            group.slots.setdefault(id(var), (var, {}))[1][name] = array
            slot_keys.append(key)
        # Checked: now set.
        for group in groups:
            group.apply(values[id(group)])
            self.used.update(values[id(group)])
        self.used.update(slot_keys)
        for path, group in optimizers.items():
            self._say_what_optimizer_lacks(path, group)
        for path, model, mine in deferred:
            self._defer(path, model, mine)

    def _owned_by(self, path: str) -> dict[str, _Entry]:
        """The checkpoint's weights of the object at `path`."""
        return {
            k: e
            for k, e in self.stored.entries.items()
            if e.owner == path and "slot" not in e.meta and k not in self.used
        }

    def _checked(
        self, entry: _Entry, what: str, shape: tuple[int, ...], dtype: np.dtype, exact: bool
    ) -> np.ndarray:
        array = entry.array
        if tuple(array.shape) != tuple(shape):
            raise ValueError(
                f"{self.who}: {what} has shape {tuple(shape)}, but the checkpoint "
                f"{self.stored.prefix} holds shape {tuple(array.shape)} for it ({entry.key}, "
                f"saved as {entry.what}): the checkpoint was written for another model or variable"
            )
        if array.dtype != dtype and (exact or array.dtype.kind != "f"):
            raise InvalidArgumentError(
                f"{self.who}: {what} is {dtype.name}, but the checkpoint {self.stored.prefix} "
                f"holds {array.dtype.name} for it ({entry.key}): expected dtype {dtype.name} does "
                f"not equal original dtype {array.dtype.name}"
            )
        return array.astype(dtype, copy=True)

    def _say_what_optimizer_lacks(self, path: str, group: _Group) -> None:
        info = next((o for o in self.stored.objects if o.get("path") == path), {})
        if info.get("engine_state"):
            _say(
                f"{self.who}: {group.label} is restored without its slots (its step count and "
                f"learning rate only): {self.stored.prefix} was saved while it trained a model in "
                "the engine, whose slots crossover does not read from Python (yet); training goes "
                "on from fresh slots"
            )

    def _check_deferrable(self, path: str, model: Any) -> None:
        """A Sequential compiled before its input shape is known is built by the engine inside
        fit, where no Python runs: its weights could not be given then."""
        from .keras.functional import Subclassed

        core = model.__dict__.get("_core")
        if not isinstance(model, Subclassed) and core is not None and core.compiled:
            raise NotImplementedError(self._unbuilt_message(f"model {model.name!r} ({path})"))

    def _defer(self, path: str, model: Any, mine: dict[str, _Entry]) -> None:
        """A model not built yet: its weights wait for the build (TensorFlow's deferred restore),
        through the model's _model(), which every build goes through: a subclassed model's trace
        (its first call, fit, predict or build), a Sequential's first use with an input shape."""
        from .keras.functional import Subclassed

        what = f"model {model.name!r} ({path})"
        self.pending[id(model)] = what
        self.claimed.update(mine)
        restore = self
        # Another restore waiting for the same build goes first (the later one wins).
        earlier = model.__dict__.get("_model")
        original = earlier if earlier is not None else type(model)._model.__get__(model)

        def _model_then_restore() -> Any:
            core = original()
            if model.built:
                model.__dict__.pop("_model", None)
                restore.pending.pop(id(model), None)
                restore.claimed.difference_update(mine)
                restore._restore_built(path, model, mine)
            elif not isinstance(model, Subclassed):
                model.__dict__.pop("_model", None)
                restore.pending.pop(id(model), None)
                restore.claimed.difference_update(mine)
                raise NotImplementedError(restore._unbuilt_message(what))
            return core

        model.__dict__["_model"] = _model_then_restore

    def _unbuilt_message(self, what: str) -> str:
        return (
            f"{self.who}: {what} waits for its weights from {self.stored.prefix}, and compiled "
            "before its input shape is known it is built by the engine inside fit, where "
            "crossover cannot give them: give the model its input shape before restoring or "
            "compiling (keras.Input(shape=...) as its first layer, or model.build((None, ...)))"
        )

    def _restore_built(self, path: str, model: Any, mine: dict[str, _Entry]) -> None:
        group = _model_group(path, model)
        values = {}
        for key, (what, shape, dtype) in group.specs.items():
            entry = mine.get(key)
            if entry is None:
                self.unmatched_objects.append(f"{what} ({key})")
                continue
            values[key] = self._checked(entry, what, shape, dtype, False)
        group.apply(values)
        self.used.update(values)


def _describe(keys: list[str], stored: _Stored, limit: int = 8) -> str:
    shown = [f"{stored.entries[k].what} ({k})" for k in keys[:limit]]
    more = f", and {len(keys) - limit} more" if len(keys) > limit else ""
    return "; ".join(shown) + more


class CheckpointLoadStatus:
    """What Checkpoint.restore (and read) return: assert_consumed() (every value used and every
    object given one), assert_existing_objects_matched() (every object given one),
    assert_nontrivial_match() (something restored), expect_partial() (silences the line said
    when the status is dropped with values unused). Each assert returns the status."""

    def __init__(self, restore: _Restore) -> None:
        self._restore = restore

    def assert_consumed(self) -> "CheckpointLoadStatus":
        r = self._restore
        if r.pending:
            raise AssertionError(
                f"Unresolved objects in checkpoint {r.stored.prefix}: not built yet: "
                f"{', '.join(r.pending.values())} (a model's weights are restored when it is "
                "built: its first call, fit, predict or build)"
            )
        unused = r.unused
        if unused:
            raise AssertionError(
                f"Unresolved object in checkpoint {r.stored.prefix}: {len(unused)} values found no "
                f"object at their place: {_describe(unused, r.stored)}"
            )
        return self.assert_existing_objects_matched()

    def assert_existing_objects_matched(self) -> "CheckpointLoadStatus":
        r = self._restore
        missing = r.unmatched_objects
        if missing:
            shown = "; ".join(missing[:8]) + (
                f", and {len(missing) - 8} more" if len(missing) > 8 else ""
            )
            raise AssertionError(
                f"Found {len(missing)} Python objects that were not bound to checkpointed values "
                f"in {r.stored.prefix}, likely due to changes in the Python program: {shown}"
            )
        return self

    def assert_nontrivial_match(self) -> "CheckpointLoadStatus":
        r = self._restore
        if not r.used and not r.pending:
            raise AssertionError(
                f"Nothing except the root object matched a checkpointed value in "
                f"{r.stored.prefix}. Typically this means that the checkpoint does not match the "
                "Python program"
            )
        return self

    def expect_partial(self) -> "CheckpointLoadStatus":
        self._restore.partial_ok = True
        return self

    def run_restore_ops(self, session: Any = None) -> None:
        """Nothing to run: the values are set when restore() returns (or at a model's build)."""

    def initialize_or_restore(self, session: Any = None) -> None:
        """As run_restore_ops."""

    def __del__(self) -> None:
        try:
            r = self._restore
            # read() of a checkpoint save() wrote leaves its save_counter: not worth a line.
            unused = [k for k in r.unused if k != "save_counter" + _VALUE]
            if unused and not r.partial_ok:
                _say(
                    f"{r.who}({r.stored.prefix!r}): {len(unused)} values in the checkpoint were "
                    f"not restored (no object at their place): {_describe(unused, r.stored, 4)} "
                    "(status.expect_partial() silences this; status.assert_consumed() raises it)"
                )
        except Exception:  # interpreter shutdown: nothing to say it with
            pass


class InitializationOnlyStatus:
    """Checkpoint.restore(None): nothing restored (a script's first run, before any save)."""

    _MESSAGE = "No checkpoint specified (save_path=None); nothing is being restored."

    def assert_consumed(self) -> Any:
        raise AssertionError(self._MESSAGE)

    def assert_existing_objects_matched(self) -> Any:
        raise AssertionError(self._MESSAGE)

    def assert_nontrivial_match(self) -> Any:
        raise AssertionError(self._MESSAGE)

    def expect_partial(self) -> "InitializationOnlyStatus":
        return self

    def run_restore_ops(self, session: Any = None) -> None:
        pass

    def initialize_or_restore(self, session: Any = None) -> None:
        pass


# --- tf.train.Checkpoint ------------------------------------------------------------------------
class Checkpoint:
    """tf.train.Checkpoint(root=None, **kwargs): the objects to save and restore, by name; more
    can be set as attributes later (`ckpt.step = tf.Variable(1)`). save(file_prefix) numbers
    the files (prefix-1, prefix-2, ... by `save_counter`) and records the latest in the folder's
    `checkpoint` file; write(file_prefix) writes exactly there; restore(path) (and read) sets
    the objects' values from a checkpoint. See the module's text for what is kept."""

    def __init__(self, root: Any = None, **kwargs: Any) -> None:
        object.__setattr__(self, "_tracked", {})
        object.__setattr__(self, "_save_counter", None)
        object.__setattr__(self, "_restores", [])
        if root is not None and _kind(root) is None:
            raise _not_trackable("root", root)
        object.__setattr__(self, "_root", root)
        for name, value in kwargs.items():
            if _kind(value) is None:
                raise _not_trackable(name, value)
            setattr(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)
        if name.startswith("_"):
            return
        if _kind(value) is None:
            self._tracked.pop(name, None)
            return
        self._tracked[name] = value
        for restore in list(self._restores):  # TensorFlow's restore-on-assignment
            restore.restore_into([(_escape(name), value)])

    def __delattr__(self, name: str) -> None:
        object.__delattr__(self, name)
        self._tracked.pop(name, None)

    @property
    def save_counter(self) -> Any:
        """The number of save() calls (a tf.Variable, int64), saved with the checkpoint and
        restored by restore(): CheckpointManager and save() number the files by it."""
        if self._save_counter is None:
            from .keras.layers import Variable

            counter = Variable(0, dtype=np.int64, trainable=False, name="save_counter")
            object.__setattr__(self, "_save_counter", counter)
        return self._save_counter

    def _roots(self) -> list[tuple[str, Any]]:
        roots = [("", self)]
        if self._root is not None:
            roots.insert(0, ("", self._root))
        return roots

    def _write(self, prefix: str, who: str) -> str:
        entries, objects = _collect(self._roots(), who)
        _write_checkpoint(prefix, entries, objects, who)
        return prefix

    def save(self, file_prefix: Any, options: Any = None) -> str:
        """Writes `file_prefix-N` (N: save_counter after adding 1), records it as the folder's
        latest checkpoint, and returns that path."""
        who = "tf.train.Checkpoint.save"
        reject_unsupported(who, options=(options, None))
        prefix = _path_arg(file_prefix, who, "file_prefix")
        counter = self.save_counter
        before = int(np.asarray(counter.numpy()))
        counter.assign(before + 1)
        path = f"{prefix}-{before + 1}"
        try:
            folder = os.path.dirname(path) or "."
            _check_state_file(folder, who)
            self._write(path, who)
            name = _relative(path, folder)
            _write_state(folder, CheckpointState(name, [name]), who)
        except BaseException:
            counter.assign(before)  # a save that failed does not count
            raise
        return path

    def write(self, file_prefix: Any, options: Any = None) -> str:
        """Writes the checkpoint at exactly `file_prefix` (no number, no `checkpoint` file, the
        counter unchanged) and returns that path."""
        who = "tf.train.Checkpoint.write"
        reject_unsupported(who, options=(options, None))
        return self._write(_path_arg(file_prefix, who, "file_prefix"), who)

    def restore(self, save_path: Any, options: Any = None) -> Any:
        """Sets the objects' values (and save_counter) from the checkpoint at `save_path` (a
        prefix, as save() and latest_checkpoint() return it); None restores nothing."""
        return self._restore_from(save_path, options, "tf.train.Checkpoint.restore", True)

    def read(self, save_path: Any, options: Any = None) -> Any:
        """As restore, for a checkpoint write() wrote: save_counter is not restored."""
        return self._restore_from(save_path, options, "tf.train.Checkpoint.read", False)

    def _restore_from(self, save_path: Any, options: Any, who: str, with_counter: bool) -> Any:
        reject_unsupported(who, options=(options, None))
        if save_path is None:
            return InitializationOnlyStatus()
        stored = _read_checkpoint(_path_arg(save_path, who, "save_path"), who)
        if with_counter and "save_counter" + _VALUE in stored.entries:
            self.save_counter  # made, to be restored (TensorFlow's)
        restore = _Restore(stored, who, skip=None if with_counter else self._save_counter)
        restore.restore_into(self._roots())
        if restore.unused:  # attributes set later get theirs
            self._restores[:] = [restore]
        return CheckpointLoadStatus(restore)

    def __repr__(self) -> str:
        names = ", ".join(self._tracked)
        return f"<crossover.train.Checkpoint ({names})>"


# --- tf.train.CheckpointManager -----------------------------------------------------------------
class CheckpointManager:
    """tf.train.CheckpointManager(checkpoint, directory, max_to_keep, ...): save() writes
    `directory/ckpt-N` (N: the checkpoint's save_counter, or checkpoint_number), keeps the
    latest `max_to_keep` (deleting the older ones' files; None keeps all;
    keep_checkpoint_every_n_hours keeps one for good each that many hours) and records them in
    the folder's `checkpoint` file, which a new manager on the folder reads back; as
    TensorFlow's."""

    def __init__(
        self,
        checkpoint: Checkpoint,
        directory: Any,
        max_to_keep: Optional[int],
        keep_checkpoint_every_n_hours: Optional[float] = None,
        checkpoint_name: str = "ckpt",
        step_counter: Any = None,
        checkpoint_interval: Optional[int] = None,
        init_fn: Optional[Callable[[], Any]] = None,
        last_checkpoint_step: Any = None,
    ) -> None:
        if not isinstance(checkpoint, Checkpoint):
            raise TypeError(
                f"tf.train.CheckpointManager: checkpoint must be a tf.train.Checkpoint, got "
                f"{type(checkpoint).__name__}"
            )
        if max_to_keep is not None and max_to_keep <= 0:
            raise ValueError(
                f"Expected a positive integer or `None` for `max_to_keep`, got {max_to_keep}."
            )
        self._checkpoint = checkpoint
        self._max_to_keep = max_to_keep
        self._keep_checkpoint_every_n_hours = keep_checkpoint_every_n_hours
        self._directory = _path_arg(directory, "tf.train.CheckpointManager", "directory")
        self._checkpoint_prefix = os.path.join(self._directory, checkpoint_name)
        self._init_fn = init_fn
        if checkpoint_interval is not None:
            if step_counter is None:
                raise ValueError(
                    "`step_counter` should be passed if `checkpoint_interval` is not None."
                )
            self._last_checkpoint_step = last_checkpoint_step
            self._step_counter = step_counter
        self._checkpoint_interval = checkpoint_interval
        recovered = get_checkpoint_state(self._directory)
        now = time.time()
        self._maybe_delete: "collections.OrderedDict[str, float]" = collections.OrderedDict()
        if recovered is None:
            self._latest_checkpoint: Optional[str] = None
            self._last_preserved_timestamp = now - 1.0
        else:
            self._latest_checkpoint = recovered.model_checkpoint_path
            self._last_preserved_timestamp = recovered.last_preserved_timestamp
            if now < self._last_preserved_timestamp:
                self._last_preserved_timestamp = now
            paths = recovered.all_model_checkpoint_paths
            stamps = recovered.all_model_checkpoint_timestamps
            if not stamps:
                stamps = [self._last_preserved_timestamp] * len(paths)
            for path, stamp in zip(paths, stamps):
                stamp = min(stamp, now)
                if stamp > self._last_preserved_timestamp:
                    self._maybe_delete[path] = stamp

    @property
    def directory(self) -> str:
        return self._directory

    @property
    def checkpoint(self) -> Checkpoint:
        return self._checkpoint

    @property
    def checkpoint_interval(self) -> Optional[int]:
        return self._checkpoint_interval

    @property
    def latest_checkpoint(self) -> Optional[str]:
        """The prefix of the latest checkpoint (this manager's, or the folder's when it was
        made), or None."""
        return self._latest_checkpoint

    @property
    def checkpoints(self) -> list[str]:
        """The checkpoints managed (oldest first); those kept for good are not listed."""
        return list(self._maybe_delete.keys())

    def _sweep(self) -> None:
        if not self._max_to_keep:
            return
        while len(self._maybe_delete) > self._max_to_keep:
            filename, stamp = self._maybe_delete.popitem(last=False)
            hours = self._keep_checkpoint_every_n_hours
            if hours and stamp - hours * 3600.0 >= self._last_preserved_timestamp:
                self._last_preserved_timestamp = stamp
                continue
            _remove_checkpoint(filename)

    def _record_state(self) -> None:
        folder = self._directory
        paths = [_relative(p, folder) for p in self._maybe_delete]
        latest = _relative(self._latest_checkpoint or "", folder)
        state = CheckpointState(
            latest, paths, list(self._maybe_delete.values()), self._last_preserved_timestamp
        )
        _write_state(folder, state, "tf.train.CheckpointManager.save")

    def save(
        self, checkpoint_number: Any = None, check_interval: bool = True, options: Any = None
    ) -> Optional[str]:
        """Writes a checkpoint numbered by the checkpoint's save_counter (added 1 to, also when
        checkpoint_number is given) or by checkpoint_number, deletes what max_to_keep drops,
        records the state; returns the path, or None when checkpoint_interval skips it."""
        who = "tf.train.CheckpointManager.save"
        reject_unsupported(who, options=(options, None))
        _check_state_file(self._directory, who)
        if self._checkpoint_interval is not None:
            current = int(np.asarray(_value(self._step_counter)))
            if self._last_checkpoint_step is not None:
                if current == self._last_checkpoint_step:
                    return None
                if (
                    check_interval
                    and current < self._last_checkpoint_step + self._checkpoint_interval
                ):
                    return None
            self._last_checkpoint_step = current
        counter = self._checkpoint.save_counter
        counter.assign_add(1)
        number = counter if checkpoint_number is None else checkpoint_number
        try:
            number = int(np.asarray(_value(number)))
        except (TypeError, ValueError):
            raise TypeError(
                f"{who}: checkpoint_number must be an integer (or an integer variable), got "
                f"{checkpoint_number!r}"
            ) from None
        path = f"{self._checkpoint_prefix}-{number}"
        self._checkpoint._write(path, who)
        stamp = time.time()
        self._maybe_delete.pop(path, None)
        self._maybe_delete[path] = stamp
        self._latest_checkpoint = path
        self._record_state()
        self._sweep()
        self._record_state()
        return path

    def restore_or_initialize(self) -> Optional[str]:
        """Restores the latest checkpoint and returns its path; without one, runs init_fn (if
        given) and returns None."""
        if self._latest_checkpoint is not None:
            self._checkpoint.restore(self._latest_checkpoint)
            if self._checkpoint_interval is not None:
                self._last_checkpoint_step = int(np.asarray(_value(self._step_counter)))
            return self._latest_checkpoint
        if self._init_fn is not None:
            self._init_fn()
        return None

    def sync(self) -> None:
        """Nothing to wait for: saves are finished when save() returns."""


def _value(x: Any) -> Any:
    from ._tensor import _is_var

    return x._eager_read() if _is_var(x) else getattr(x, "numpy", lambda: x)()


def _remove_checkpoint(prefix: str) -> None:
    """Deletes one checkpoint's files (its .index and .data-?????-of-????? files, nothing else),
    as TensorFlow's manager does."""
    pattern = glob.escape(prefix) + ".data-?????-of-?????"
    for path in [prefix + INDEX_SUFFIX] + glob.glob(pattern):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


# --- reading a checkpoint's values directly -------------------------------------------------------
def _checkpoint_at(ckpt_dir_or_file: Any, who: str) -> _Stored:
    path = _path_arg(ckpt_dir_or_file, who, "ckpt_dir_or_file")
    if os.path.isdir(path):
        latest = latest_checkpoint(path)
        if latest is None:
            raise NotFoundError(
                f"{who}: no checkpoint found in {path} (it has no `checkpoint` file naming one)"
            )
        path = latest
    return _read_checkpoint(path, who)


def list_variables(ckpt_dir_or_file: Any) -> list[tuple[str, list[int]]]:
    """tf.train.list_variables: (key, shape) of each value in a checkpoint (the latest one in a
    folder), sorted by key."""
    stored = _checkpoint_at(ckpt_dir_or_file, "tf.train.list_variables")
    return sorted((k, list(e.array.shape)) for k, e in stored.entries.items())


def load_variable(ckpt_dir_or_file: Any, name: str) -> np.ndarray:
    """tf.train.load_variable: one value of a checkpoint, by its key (as list_variables gives
    it; `W` is taken as `W/.ATTRIBUTES/VARIABLE_VALUE`)."""
    who = "tf.train.load_variable"
    stored = _checkpoint_at(ckpt_dir_or_file, who)
    key = name[:-2] if name.endswith(":0") else name
    for candidate in (key, key + _VALUE):
        if candidate in stored.entries:
            array = stored.entries[candidate].array.copy()
            return array[()] if array.ndim == 0 else array  # a numpy scalar, as TensorFlow's
    keys = sorted(stored.entries)
    shown = ", ".join(keys[:10]) + (", ..." if len(keys) > 10 else "")
    raise NotFoundError(
        f"{who}: Key {name} not found in checkpoint {stored.prefix} (its keys: {shown})"
    )


def __getattr__(name: str) -> Any:
    what = (
        "Checkpoint, CheckpointManager, latest_checkpoint, get_checkpoint_state, list_variables "
        "and load_variable (crossover's own checkpoint files)"
    )
    if name.endswith("Optimizer"):  # tf.compat.v1.train.AdamOptimizer, ...
        what += f"; not TensorFlow 1's {name}: use keras.optimizers"
    elif name == "Saver":
        what += "; not TensorFlow 1's Saver: use tf.train.Checkpoint"
    raise unsupported_attribute("train", name, what)


__all__ = [
    "Checkpoint",
    "CheckpointManager",
    "CheckpointState",
    "latest_checkpoint",
    "get_checkpoint_state",
    "list_variables",
    "load_variable",
]
