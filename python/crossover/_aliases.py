"""`python -m crossover script.py`: `tensorflow`, `tensorflow.keras`, `keras` (and `tf_keras`) and
their submodules imported as crossover's own modules, so an unchanged TensorFlow/Keras script runs
on crossover.

A meta-path finder, first on sys.meta_path, answers those names with the crossover module itself
(`import tensorflow as tf` gives `tf is crossover`, `import keras` gives `crossover.keras`), so
module state (a dtype policy, a seed) is one and the same whichever name set it. A name crossover
lacks (`keras.applications`) is a ModuleNotFoundError saying it is not supported (yet).

TensorFlow's private package, `tensorflow.python...`: the modules scripts import for a public
symbol are served (`_PRIVATE_SERVED`: summary_ops_v2 by tf.summary, client.device_lib by
tf.config); any other is a ModuleNotFoundError in one line naming the public API to use."""

import importlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Optional, Sequence

# The names a script imports -> crossover's (prefix for prefix; the longest match wins).
_PREFIXES = (
    ("tensorflow.keras", "crossover.keras"),
    ("tensorflow", "crossover"),
    ("tf_keras", "crossover.keras"),
    ("keras", "crossover.keras"),
)

# TensorFlow's private modules that scripts import for a public symbol -> crossover's module.
_PRIVATE = "tensorflow.python"
_PRIVATE_SERVED = {
    "tensorflow.python.ops.summary_ops_v2": "crossover._summary_ops_v2",
    "tensorflow.python.client.device_lib": "crossover._device_lib",
}
# The public API for the rest of the private package (prefix for prefix; the longest match wins).
_PRIVATE_PUBLIC = (
    ("tensorflow.python.keras", "tf.keras (import tensorflow.keras, or keras)"),
    ("tensorflow.python.summary", "tf.summary"),
    ("tensorflow.python.ops.summary_ops_v2", "tf.summary"),
    ("tensorflow.python.ops.math_ops", "tf.math"),
    ("tensorflow.python.ops.nn", "tf.nn"),
    ("tensorflow.python.ops.nn_ops", "tf.nn"),
    ("tensorflow.python.ops.random_ops", "tf.random"),
    ("tensorflow.python.ops.init_ops", "tf.keras.initializers"),
    ("tensorflow.python.ops.init_ops_v2", "tf.keras.initializers"),
    ("tensorflow.python.training", "tf.keras.optimizers and tf.keras.callbacks"),
    ("tensorflow.python.data", "tf.data"),
    ("tensorflow.python.framework.config", "tf.config"),
    ("tensorflow.python.eager", "tf.GradientTape and tf.function"),
    ("tensorflow.python.client", "tf.config.list_physical_devices"),
)

_announced = False


def real_name(fullname: str) -> Optional[str]:
    """crossover's module name for an aliased name, or None when the name is not aliased."""
    for alias, real in _PREFIXES:
        if fullname == alias or fullname.startswith(alias + "."):
            return real + fullname[len(alias) :]
    return None


def _announce(fullname: str) -> None:
    global _announced
    if _announced:
        return
    _announced = True
    from . import __crossover_version__, __version__
    from .keras import __version__ as keras_version

    print(
        f"crossover: tensorflow and keras are crossover {__crossover_version__} here (the "
        f"TensorFlow {__version__} / Keras {keras_version} API it implements; `python -m "
        f"crossover --supported` lists what it runs)",
        file=sys.stderr,
        flush=True,
    )


def _resolve(real: str, alias: str) -> types.ModuleType:
    """The crossover module for `real`: a submodule, or a module its parent has as an attribute
    (keras.optimizers.schedules); else ModuleNotFoundError naming the alias."""
    parent_name, _, last = real.rpartition(".")
    try:
        return importlib.import_module(real)
    except ModuleNotFoundError as e:
        if e.name != real:
            raise
    parent = importlib.import_module(parent_name) if parent_name else None
    found = parent.__dict__.get(last) if parent is not None else None
    if isinstance(found, types.ModuleType):
        return found
    raise ModuleNotFoundError(
        f"No module named {alias!r}: {alias} is not supported (yet) by crossover, which runs "
        f"this script in place of TensorFlow/Keras; see `python -m crossover --supported` or "
        f"help(crossover)",
        name=alias,
    )


def _private_public_api(fullname: str) -> str:
    best = ""
    hint = "the public tf.* and tf.keras.* names"
    for prefix, public in _PRIVATE_PUBLIC:
        if (fullname == prefix or fullname.startswith(prefix + ".")) and len(prefix) > len(best):
            best, hint = prefix, public
    return hint


def _private_module(fullname: str) -> types.ModuleType:
    """A module of TensorFlow's private package: the served module, an empty package on the way
    to one (tensorflow.python, tensorflow.python.ops), else the one-line ModuleNotFoundError."""
    if fullname in _PRIVATE_SERVED:
        return importlib.import_module(_PRIVATE_SERVED[fullname])
    if any(served.startswith(fullname + ".") for served in _PRIVATE_SERVED):
        package = types.ModuleType(fullname, f"TensorFlow's private {fullname}")
        package.__path__ = []

        # `from tensorflow.python.ops import math_ops` asks the package first: its answer is the
        # one line (hasattr lets an ImportError through; an AttributeError would become
        # Python's bare "cannot import name").
        def missing(name: str) -> types.ModuleType:
            if name.startswith("_"):
                raise AttributeError(f"module {fullname!r} has no attribute {name!r}")
            child = f"{fullname}.{name}"
            if any(s == child or s.startswith(child + ".") for s in _PRIVATE_SERVED):
                return importlib.import_module(child)
            raise _private_missing(child)

        package.__getattr__ = missing  # type: ignore[method-assign]
        return package
    raise _private_missing(fullname)


def _private_missing(fullname: str) -> ModuleNotFoundError:
    return ModuleNotFoundError(
        f"No module named {fullname!r}: tensorflow.python is TensorFlow's private package, which "
        f"crossover does not have; use the public API: {_private_public_api(fullname)}",
        name=fullname,
    )


class _AliasLoader(importlib.abc.Loader):
    """Gives the import system crossover's module itself for the alias."""

    def __init__(self, alias: str, module: types.ModuleType) -> None:
        self._alias = alias
        self._module = module
        self._spec = module.__spec__

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return self._module

    def exec_module(self, module: types.ModuleType) -> None:
        # The import system set __spec__ to the alias's spec: the module gets its own back (an
        # empty private package made here has none, and keeps the alias's).
        if self._spec is not None:
            module.__spec__ = self._spec
        _register_attribute_modules(self._alias, module)


def _register_attribute_modules(alias: str, module: types.ModuleType) -> None:
    """Python imports `a.b.c` only when `a.b` is a package or `a.b.c` is in sys.modules: the
    crossover modules this one holds as attributes (keras.optimizers.schedules, keras.backend)
    are put in sys.modules under the alias's name."""
    for name, value in list(vars(module).items()):
        if name.startswith("_") or not isinstance(value, types.ModuleType):
            continue
        if value.__name__.startswith("crossover."):
            sys.modules.setdefault(f"{alias}.{name}", value)


class AliasFinder(importlib.abc.MetaPathFinder):
    """Finds tensorflow / keras / tf_keras (and their submodules) as crossover's modules."""

    def find_spec(
        self,
        fullname: str,
        path: Optional[Sequence[str]],
        target: Optional[types.ModuleType] = None,
    ) -> Optional[importlib.machinery.ModuleSpec]:
        real = real_name(fullname)
        if real is None:
            return None
        _announce(fullname)
        if fullname == _PRIVATE or fullname.startswith(_PRIVATE + "."):
            module = _private_module(fullname)
        else:
            module = _resolve(real, fullname)
        return importlib.machinery.ModuleSpec(
            fullname, _AliasLoader(fullname, module), is_package=hasattr(module, "__path__")
        )


def install() -> None:
    """Puts the finder first on sys.meta_path (once)."""
    if not any(isinstance(f, AliasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, AliasFinder())


def uninstall() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, AliasFinder)]
