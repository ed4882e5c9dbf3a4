"""crossover: Keras's Sequential API on crossover's C++ training engine.

    import crossover as tf            # in place of: import tensorflow as tf
    model = tf.keras.Sequential([...])

    python -m crossover script.py     # or: an unchanged TensorFlow/Keras script

`python -m crossover --supported` lists what is supported. `crossover.__version__` (so
`tf.__version__`) is the TensorFlow version whose API crossover implements; crossover's own
version is `crossover.__crossover_version__`.
"""

import os
from typing import Any

# OpenMP's idle threads: a short spin, as the command sets from its preinit array
# (src/cli/openmp_env.cpp says why: libgomp's default spin takes a busy machine's cores from the
# thread doing the work; a SMALL epoch ran 100x slower). libgomp reads this when it is loaded,
# which is when crossover._core is first imported below, so it is set first. A value the user set
# is kept; where another package loaded libgomp earlier, its setting stays.
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = "2000"
# numpy's OpenBLAS, which computes TensorFlow's eager ops here (_tensor.py): one thread. Its
# worker threads busy-wait as libgomp's do; an MNIST-size matmul (32 x 784 x 128) is too small
# to share, and on this project's 2-core machine, busy with other work, two threads made a
# from-scratch MLP's epoch 5-40x slower (docs/PYTHON.md, "Eager tensors"). Set when numpy is
# not loaded yet (python -m crossover, or crossover imported first); a value the user set stays.
if not any(v in os.environ for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")):
    os.environ["OPENBLAS_NUM_THREADS"] = "1"

# The engine's compiled floor (x86-64-v3), said as an ImportError before its code is loaded.
from ._cpu import require_floor  # noqa: E402

require_floor()
del require_floor

# The engine itself; a CUDA build whose NVIDIA libraries are missing says which, and where to get
# them, instead of the loader's bare "cannot open shared object file".
try:
    from . import _core  # noqa: E402,F401
except ImportError as _e:
    from ._cpu import nvidia_library_message

    _message = nvidia_library_message(str(_e))
    if _message is None:
        raise
    raise ImportError(_message) from None

from . import keras  # noqa: E402
from . import config, random  # noqa: E402  (api block: tf.config, tf.random)
from ._device import DeviceNotFoundError, device  # noqa: E402
from ._args import unsupported_attribute  # noqa: E402

from . import version  # noqa: E402  (tf.version.VERSION)
from ._versions import CROSSOVER_VERSION, TENSORFLOW_VERSION  # noqa: E402

__version__ = TENSORFLOW_VERSION
__crossover_version__ = CROSSOVER_VERSION
del CROSSOVER_VERSION, TENSORFLOW_VERSION

__all__ = ["keras", "version", "__version__", "__crossover_version__"]
__all__ += ["config", "random", "device", "DeviceNotFoundError"]

# Tensors: what calling a model returns, and the ops scripts apply to it (numpy underneath).
from . import data, distribute, math, nn  # noqa: E402
from . import saved_model  # noqa: E402  (a folder with a .keras archive: saved_model.py)
from . import train  # noqa: E402  (tf.train.Checkpoint, in crossover's own files: train.py)
from ._tensor import (  # noqa: E402
    Tensor,
    TensorShape,
    abs,
    add,
    argmax,
    argmin,
    as_dtype,
    broadcast_to,
    cast,
    clip_by_value,
    concat,
    constant,
    cos,
    convert_to_tensor,
    divide,
    double,
    equal,
    exp,
    expand_dims,
    fill,
    float16,
    floor,
    float32,
    float64,
    gather,
    greater,
    greater_equal,
    half,
    identity,
    int8,
    int16,
    int32,
    int64,
    less,
    less_equal,
    log,
    matmul,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    one_hot,
    ones,
    ones_like,
    pow,
    rank,
    reduce_all,
    reduce_any,
    reduce_max,
    reduce_mean,
    reduce_min,
    reduce_sum,
    reshape,
    round,
    shape,
    sigmoid,
    sign,
    sin,
    size,
    sqrt,
    square,
    squeeze,
    stack,
    subtract,
    tanh,
    tile,
    transpose,
    uint8,
    uint16,
    uint32,
    uint64,
    zeros,
    where,
    zeros_like,
)
from ._tensor import bool_ as bool  # noqa: E402  (tf.bool)
from ._tensor import range_ as range  # noqa: E402  (tf.range)

newaxis = None

__all__ += ["data", "distribute", "math", "nn", "Tensor", "TensorShape", "newaxis", "bool", "range"]
__all__ += ["saved_model", "train"]
__all__ += ["broadcast_to", "fill", "gather", "greater_equal", "identity", "less_equal"]
__all__ += ["negative", "ones_like", "pow", "sign", "zeros_like"]
__all__ += ["sigmoid", "tanh"]  # TensorFlow 2's root has them (tf.math.sigmoid, tf.nn.tanh too)
__all__ += ["sin", "cos", "floor", "round", "tile", "where", "reduce_any", "reduce_all"]
__all__ += ["size", "rank"]
__all__ += [
    "abs",
    "add",
    "argmax",
    "argmin",
    "as_dtype",
    "cast",
    "clip_by_value",
    "concat",
    "constant",
    "convert_to_tensor",
    "divide",
    "double",
    "equal",
    "exp",
    "expand_dims",
    "float16",
    "float32",
    "float64",
    "greater",
    "half",
    "int8",
    "int16",
    "int32",
    "int64",
    "less",
    "log",
    "matmul",
    "maximum",
    "minimum",
    "multiply",
    "not_equal",
    "one_hot",
    "ones",
    "reduce_max",
    "reduce_mean",
    "reduce_min",
    "reduce_sum",
    "reshape",
    "shape",
    "sqrt",
    "square",
    "squeeze",
    "stack",
    "subtract",
    "transpose",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "zeros",
]

# What scripts call to quiet TensorFlow's own logging: TensorFlow's Python logger (crossover logs
# nothing through it), and set_verbosity calls that set its level.
import logging as _logging  # noqa: E402
from ._args import Namespace as _Namespace  # noqa: E402


def get_logger() -> _logging.Logger:
    """tf.get_logger(): the Python logger named "tensorflow", as TensorFlow's."""
    return _logging.getLogger("tensorflow")


def executing_eagerly() -> bool:
    """True: crossover runs no graphs (the training step is compiled C++)."""
    return True


def _set_verbosity(level: int, alsologtostdout: bool = False) -> None:
    get_logger().setLevel(level)


autograph = _Namespace("autograph", set_verbosity=_set_verbosity)
from . import compat  # noqa: E402  (tf.compat.v1: after the names it re-exports)

__all__ += ["get_logger", "executing_eagerly", "autograph", "compat"]

# Custom training loops: tf.GradientTape over the engine's split step (_tape.py), and tf.function,
# which has nothing to compile (the step is C++): the function itself.
from ._tape import GradientTape, UnconnectedGradients  # noqa: E402
from ._tensor import InvalidArgumentError as _InvalidArgumentError  # noqa: E402

errors = _Namespace(
    "errors",
    InvalidArgumentError=_InvalidArgumentError,
    NotFoundError=train.NotFoundError,
    DataLossError=train.DataLossError,
)


def function(
    func: Any = None,
    input_signature: Any = None,
    autograph: bool = True,
    jit_compile: Any = None,
    reduce_retracing: bool = False,
    experimental_implements: Any = None,
    experimental_autograph_options: Any = None,
    experimental_attributes: Any = None,
    experimental_relax_shapes: Any = None,
    experimental_compile: Any = None,
    experimental_follow_type_hints: Any = None,
) -> Any:
    """tf.function, as a decorator with or without arguments: returns the function unchanged
    (it runs eagerly; what it calls on a model runs in the engine)."""
    if func is None:
        return lambda f: f
    return func


__all__ += ["GradientTape", "UnconnectedGradients", "errors", "function"]

# tf.Variable: a float32 variable (a custom layer's weight when set as its attribute), and
# TensorFlow's initializer classes, Keras's (keras/layers.py, keras/initializers.py).
from .keras.layers import Variable  # noqa: E402
from .keras.initializers import Constant as constant_initializer  # noqa: E402
from .keras.initializers import Ones as ones_initializer  # noqa: E402
from .keras.initializers import RandomNormal as random_normal_initializer  # noqa: E402
from .keras.initializers import RandomUniform as random_uniform_initializer  # noqa: E402
from .keras.initializers import Zeros as zeros_initializer  # noqa: E402

__all__ += ["Variable", "constant_initializer", "ones_initializer", "random_normal_initializer"]
__all__ += ["random_uniform_initializer", "zeros_initializer"]

# TensorFlow 2's own names for Keras's modules (tf.optimizers is tf.keras.optimizers, as
# TensorFlow 2.21's lazy loaders make them), and tf.summary (summary.py).
from . import summary  # noqa: E402

optimizers = keras.optimizers
losses = keras.losses
metrics = keras.metrics
initializers = keras.initializers

__all__ += ["summary", "optimizers", "losses", "metrics", "initializers"]

# TensorFlow names a Keras script reaches for next, and what crossover has instead (api block).
_NOT_TENSORFLOW: dict[str, str] = {}


def __getattr__(name: str) -> Any:
    what = "keras, device, config, random.set_seed, data.Dataset and numpy-backed tensor ops"
    if name in _NOT_TENSORFLOW:
        what += f"; not {_NOT_TENSORFLOW[name]}"
    raise unsupported_attribute("", name, what)
