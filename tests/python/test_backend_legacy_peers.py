"""tf.keras.backend's legacy functions (K.int_shape, K.ndim, K.dtype, K.shape, K.count_params,
K.is_keras_tensor and the element-wise and reduction ones) against TensorFlow 2.21 itself: one
probe runs on each side, with `tf`, `keras` and `K` (tf.keras.backend) bound to its own modules,
on symbolic tensors, tensors, numpy arrays and variables; the results (or the exception's type)
must agree. Keras runs in a subprocess with the peers' Python (skipped without one)."""

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

import crossover as tf
from crossover import keras
from test_keras_archive_peers import run_keras

PROBE = """
def probe(tf, keras, K, np):
    values = {
        "input": keras.Input((28, 28, 1)),
        "dense_output": keras.layers.Dense(3)(keras.Input((4,))),
        "tensor": tf.ones((2, 3)),
        "numpy": np.ones((2, 3), np.float32),
        "variable": tf.Variable(np.ones((2, 3), np.float32)),
        "list": [1, 2],
    }
    out = {}
    for fn in ["int_shape", "ndim", "dtype", "shape", "count_params", "is_keras_tensor"]:
        for name, x in values.items():
            try:
                r = getattr(K, fn)(x)
                r = np.asarray(r).tolist() if fn == "shape" else r
                out[f"{fn}({name})"] = list(r) if isinstance(r, tuple) else r
            except Exception as e:
                out[f"{fn}({name})"] = type(e).__name__
    t = tf.constant([[-1.0, 4.0], [2.0, 0.25]])
    out["square"] = np.asarray(K.square(t)).tolist()
    out["sqrt"] = np.asarray(K.sqrt(t)).tolist()
    out["exp"] = np.asarray(K.exp(t)).tolist()
    out["log"] = np.asarray(K.log(K.abs(t))).tolist()
    out["maximum"] = np.asarray(K.maximum(t, 1.0)).tolist()
    out["minimum"] = np.asarray(K.minimum(t, 1.0)).tolist()
    out["equal"] = np.asarray(K.equal(t, 2.0)).tolist()
    out["cast"] = [K.dtype(K.cast(t, "int32")), np.asarray(K.cast(t, "int32")).tolist()]
    out["mean"] = np.asarray(K.mean(t, axis=1, keepdims=True)).tolist()
    out["mean_bool"] = float(K.mean(tf.constant([True, False, False, False])))
    out["sum"] = float(K.sum(t))
    out["clip"] = np.asarray(K.clip(t, 0.0, 1.0)).tolist()
    out["clip_swapped"] = np.asarray(K.clip(t, 1.0, 0.0)).tolist()
    r = K.random_normal((3, 4), mean=1.0, stddev=0.5, seed=3)
    out["random_normal"] = [K.dtype(r), list(K.int_shape(r))]
    return out
"""

KERAS_SIDE = """
import json
import numpy as np
import tensorflow as tf
import keras
K = tf.keras.backend
{probe}
print(json.dumps(probe(tf, keras, K, np)))
"""


def test_legacy_backend_functions_as_tensorflow_has_them(tmp_path: Path) -> None:
    theirs = run_keras(KERAS_SIDE.format(probe=PROBE), tmp_path)
    scope: dict = {}
    exec(textwrap.dedent(PROBE), scope)
    ours = json.loads(json.dumps(scope["probe"](tf, keras, tf.keras.backend, np)))
    assert sorted(ours) == sorted(theirs)
    for key, value in theirs.items():
        if isinstance(value, list) and value and isinstance(value[0], list):
            np.testing.assert_allclose(ours[key], value, rtol=1e-6, err_msg=key)
        else:
            assert ours[key] == value, key


def test_int_shape_in_a_functional_model() -> None:
    """The idiom that needs it: a decoder sized from an encoder's symbolic output."""
    K = tf.keras.backend
    inputs = keras.Input((8, 8, 1))
    x = keras.layers.Conv2D(4, 3, strides=2, padding="same")(inputs)
    shape = K.int_shape(x)
    assert shape == (None, 4, 4, 4) and type(shape) is tuple
    latent = keras.layers.Dense(shape[1] * shape[2] * shape[3])(keras.layers.Flatten()(x))
    back = keras.layers.Reshape((shape[1], shape[2], shape[3]))(latent)
    assert K.int_shape(back) == (None, 4, 4, 4)
    assert K.is_keras_tensor(back) and not K.is_keras_tensor(np.ones(2))
    with pytest.raises(ValueError, match="A KerasTensor cannot be used as input"):
        K.shape(back)
    with pytest.raises(AttributeError):
        K.ndim(back)  # TensorFlow's: a KerasTensor's shape is a tuple, without .rank
    assert K.int_shape(tf.zeros((3, 2))) == (3, 2) and K.ndim(tf.zeros((3, 2))) == 2
