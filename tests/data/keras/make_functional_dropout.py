"""Writes tests/data/keras/functional_dropout_keras3.json, functional_dropout.weights.h5 and
functional_dropout_reference.safetensors: a Keras 3 functional model with Dropout and
BatchNormalization, whose to_json() records each call's keyword arguments as Keras 3.15 writes
them ({"training": false} for the Dropout node, {"mask": null} for the BatchNormalization node;
issue 39 item 5). Not run by the tests (CI has no TensorFlow); run by hand with any Python that has
Keras 3 and TensorFlow:

    /work/main/bench/peers/.venv/bin/python tests/data/keras/make_functional_dropout.py

The model: x = Input((6,)); Dense(8, relu); Dropout(0.1); BatchNormalization(); Dense(3,
softmax). Its weights (the moving variance positive) and the input come from numpy's
default_rng(20261208). Tensors: x (5, 6), the input; y (5, 3), model.predict(x).
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

import keras  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_batchnorm import write_safetensors  # noqa: E402

L = keras.layers


def main() -> None:
    rng = np.random.default_rng(20261208)
    x_in = keras.Input((6,))
    h = L.Dense(8, activation="relu")(x_in)
    h = L.Dropout(0.1)(h)
    h = L.BatchNormalization()(h)
    model = keras.Model(x_in, L.Dense(3, activation="softmax")(h))
    weights = []
    for v in model.weights:
        w = rng.standard_normal(v.shape).astype(np.float32)
        weights.append(np.abs(w) + 0.5 if v.path.endswith("moving_variance") else w)
    model.set_weights(weights)
    x = rng.standard_normal((5, 6)).astype(np.float32)
    (HERE / "functional_dropout_keras3.json").write_text(model.to_json())
    model.save_weights(str(HERE / "functional_dropout.weights.h5"))
    write_safetensors(
        HERE / "functional_dropout_reference.safetensors",
        {"x": x, "y": model.predict(x, verbose=0)},
        {"keras": keras.__version__},
    )


if __name__ == "__main__":
    main()
