"""tf.compat.v1: what TensorFlow 1 scripts that train Keras models use of it. Every name crossover
has at its top level (keras, nn, math, random, data, __version__, ...) is here too, as
TensorFlow 2's tf.compat.v1 has tf.keras; eager execution is on, as in TensorFlow 2
(enable_eager_execution is accepted); graphs, sessions and placeholders are not supported."""

import logging as _logging
from typing import Any

import crossover as _tf

from .._args import Namespace as _Namespace
from .._args import unsupported_attribute as _unsupported


def enable_eager_execution(config: Any = None, device_policy: Any = None,
                           execution_mode: Any = None) -> None:
    """Accepted: crossover always runs eagerly (there are no graphs to turn off)."""


def enable_v2_behavior() -> None:
    """Accepted: crossover is TensorFlow 2's behaviour."""


def executing_eagerly() -> bool:
    return True


logging = _Namespace(
    "compat.v1.logging",
    set_verbosity=_tf._set_verbosity,
    DEBUG=_logging.DEBUG,
    INFO=_logging.INFO,
    WARN=_logging.WARN,
    ERROR=_logging.ERROR,
    FATAL=_logging.FATAL,
)

_GRAPHS = {
    "Session": "sessions",
    "InteractiveSession": "sessions",
    "placeholder": "placeholders",
    "disable_eager_execution": "graph mode",
    "disable_v2_behavior": "TensorFlow 1's graph mode",
    "global_variables_initializer": "TensorFlow 1 variables",
    "get_variable": "TensorFlow 1 variables",
    "train": "TensorFlow 1 optimizers (use keras.optimizers)",
}


def __getattr__(name: str) -> Any:
    if not name.startswith("_") and name in getattr(_tf, "__all__", ()):
        return getattr(_tf, name)
    if name == "__version__":
        return _tf.__version__
    what = "TensorFlow 2's names (keras, nn, math, ...) and enable_eager_execution"
    if name in _GRAPHS:
        what += f"; not {_GRAPHS[name]}: crossover runs Keras models, not TensorFlow 1 graphs"
    raise _unsupported("compat.v1", name, what)


__all__ = ["enable_eager_execution", "enable_v2_behavior", "executing_eagerly", "logging"]
