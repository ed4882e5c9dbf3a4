"""Keras's argument checks, shared by layers, optimizers and models, and by the tf modules beside
keras (tf.data, tf.train, ...)."""

import types
from typing import Any, Mapping

import numpy as np

# Where a pip user reads what is supported (every "not supported (yet)" message ends with it).
SEE_SUPPORTED = "see help(crossover) or `python -m crossover --supported` for what is supported"


def reject_unknown(owner: str, kwargs: Mapping[str, Any], *, like: str = "layer") -> None:
    """Keyword arguments `owner` does not take, refused as Keras 3.15 refuses them there:
    like="layer", a keras.layers class's ValueError ("Unrecognized keyword arguments passed to
    Dense: {...}"); "optimizer", the optimizers' ValueError ("Argument(s) not recognized:
    {...}"); "signature", Python's own TypeError for a Keras function or class that takes no
    **kwargs (metrics, losses, schedules): "Accuracy.__init__() got an unexpected keyword
    argument 'foo'" (owner "Accuracy"; a dotted owner such as "Adam.apply_gradients" is the
    function itself)."""
    if not kwargs:
        return
    if like == "layer":
        raise ValueError(f"Unrecognized keyword arguments passed to {owner}: {dict(kwargs)}")
    if like == "optimizer":
        raise ValueError(f"Argument(s) not recognized: {dict(kwargs)}")
    function = owner if "." in owner else f"{owner}.__init__"
    raise TypeError(f"{function}() got an unexpected keyword argument '{next(iter(kwargs))}'")


def reject_unsupported(owner: str, **given: tuple[Any, Any]) -> None:
    """ValueError naming a Keras argument crossover does not run, when it is not at its default.

    Each keyword maps an argument name to (value, default)."""
    for name, (value, default) in given.items():
        if _differs(value, default):
            raise ValueError(
                f"{owner}: argument {name}={_shown(value)} is not supported (yet) by crossover "
                f"(only {name}={default!r}); {SEE_SUPPORTED}"
            )


class Namespace(types.SimpleNamespace):
    """A TensorFlow namespace that is not a module here (tf.config.experimental, tf.compat.v1):
    a name it lacks is the "not supported (yet)" AttributeError, as a module's."""

    def __init__(self, where: str, **names: Any) -> None:
        super().__init__(**names)
        object.__setattr__(self, "_where", where)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        public = ", ".join(sorted(n for n in vars(self) if not n.startswith("_")))
        raise unsupported_attribute(self._where, name, public)


def _shown(value: Any) -> str:
    try:
        if np.ndim(value) > 0:  # an array, not its values
            return f"<{type(value).__name__} of shape {np.shape(value)}>"
    except ValueError:
        pass
    return repr(value)


def _differs(value: Any, default: Any) -> bool:
    """Whether an argument is not at its default (an array given for a None default is)."""
    if value is default:
        return False
    try:
        return bool(value != default)
    except (TypeError, ValueError):  # an array: its != is elementwise
        return True


def unsupported_attribute(where: str, name: str, supported: str) -> AttributeError:
    """The AttributeError for a Keras / TensorFlow name crossover does not have (yet): a module's
    __getattr__ returns it, so `layers.Conv2D` says what is there instead of a bare name."""
    module = f"crossover.{where}" if where else "crossover"
    if name.startswith("__"):  # import machinery, pickle, inspect: the plain error
        return AttributeError(f"module {module!r} has no attribute {name!r}")
    return AttributeError(
        f"{module}.{name} is not supported (yet): crossover runs {supported}; " f"{SEE_SUPPORTED}"
    )
