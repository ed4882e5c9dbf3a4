"""Writes tests/data/keras/batchnorm_reference.safetensors and batchnorm.weights.h5: what Keras 3
itself computes for BatchNormalization on fixed weights and inputs (issue 12: forward outputs in
training and inference, the moving statistics after a training call and after one fit step). Not
run by the tests (CI has no TensorFlow); run by hand with any Python that has Keras 3 and
TensorFlow:

    /work/main/bench/peers/.venv/bin/python tests/data/keras/make_batchnorm.py

Every input and weight comes from numpy's default_rng(20261202), so the inputs are the same on
every run; Keras's outputs may differ in the last bits between TensorFlow builds. All arrays are
float32, channels last. Tensors, per layer case C (a model of Input and the one layer):

    C/x                       the input batch
    C/gamma, C/beta           the layer's weights (when scale / center), random
    C/moving_mean, C/moving_variance   random (the variance positive)
    C/y_inference             model(x, training=False): normalised with the moving statistics
    C/y_training              model(x, training=True): with the batch's own statistics
    C/moving_mean_after, C/moving_variance_after   the moving statistics after that training call

Cases (the layer's arguments are in the header's __metadata__, as JSON):

    dense      BatchNormalization()                              x (8, 5)
    image      BatchNormalization(momentum=0.9, epsilon=0.01)    x (3, 4, 4, 3)
    no_center  BatchNormalization(center=False)                  x (6, 4)

and one fit step of Input(6), Dense(4), BatchNormalization(), Dense(3, softmax) with Adam(1e-2),
sparse categorical cross-entropy, batch 8, shuffle off, on 8 samples:

    fit/x (8, 6), fit/labels (8,) class indices as floats
    fit/<name>         the weights before the step, named as crossover names them
                       (dense/kernel, ..., batch_normalization/moving_variance, dense_1/bias)
    fit/after/<name>   the weights after the step (Adam's update of the trainable ones; the moving
                       statistics updated from the batch)

batchnorm.weights.h5 is Keras's model.save_weights of that model after the step.
"""

import json
import os
import struct
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

HERE = Path(__file__).resolve().parent
L = keras.layers


def write_safetensors(path: Path, tensors: dict, metadata: dict) -> None:
    header, offset, blobs = {"__metadata__": {k: json.dumps(v) for k, v in metadata.items()}}, 0, []
    for name, a in tensors.items():
        a = np.ascontiguousarray(a, dtype="<f4")
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        blobs.append(a.tobytes())
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main() -> None:
    rng = np.random.default_rng(20261202)
    tensors, meta = {}, {}

    def case(name, x_shape, args):
        layer = L.BatchNormalization(**args)
        model = keras.Sequential([keras.Input(x_shape[1:]), layer])
        x = (rng.standard_normal(x_shape) * 2 + 0.5).astype(np.float32)
        names = [v.path.split("/")[-1] for v in layer.weights]  # gamma, beta, moving_mean, ...
        weights = []
        for n, w in zip(names, layer.get_weights()):
            v = rng.standard_normal(w.shape).astype(np.float32)
            weights.append(np.abs(v) + 0.5 if n in ("gamma", "moving_variance") else v)
        layer.set_weights(weights)
        tensors[f"{name}/x"] = x
        for n, w in zip(names, weights):
            tensors[f"{name}/{n}"] = w
        y_inf = model(x, training=False).numpy()
        y_train = model(x, training=True).numpy()  # also updates the moving statistics
        tensors[f"{name}/y_inference"] = y_inf
        tensors[f"{name}/y_training"] = y_train
        tensors[f"{name}/moving_mean_after"] = layer.moving_mean.numpy()
        tensors[f"{name}/moving_variance_after"] = layer.moving_variance.numpy()
        meta[name] = {"momentum": 0.99, "epsilon": 0.001, "center": True, "scale": True, **args}
        # Checks the file against its own description, in float64.
        axes = tuple(range(x.ndim - 1))
        w = dict(zip(names, [a.astype(np.float64) for a in weights]))
        mean, var = x.astype(np.float64).mean(axes), x.astype(np.float64).var(axes)
        gamma, beta = w.get("gamma", 1.0), w.get("beta", 0.0)
        ref_train = (x - mean) / np.sqrt(var + meta[name]["epsilon"]) * gamma + beta
        ref_inf = (x - w["moving_mean"]) / np.sqrt(w["moving_variance"] + meta[name]["epsilon"])
        ref_inf = ref_inf * gamma + beta
        m = meta[name]["momentum"]
        assert np.abs(ref_train - y_train).max() < 1e-5, name
        assert np.abs(ref_inf - y_inf).max() < 1e-5, name
        assert np.abs(w["moving_variance"] * m + var * (1 - m)
                      - tensors[f"{name}/moving_variance_after"]).max() < 1e-6, name

    case("dense", (8, 5), {})
    case("image", (3, 4, 4, 3), {"momentum": 0.9, "epsilon": 0.01})
    case("no_center", (6, 4), {"center": False})

    # One fit step.
    model = keras.Sequential([keras.Input((6,)), L.Dense(4), L.BatchNormalization(),
                              L.Dense(3, activation="softmax")])
    names = ["dense/kernel", "dense/bias", "batch_normalization/gamma",
             "batch_normalization/beta", "batch_normalization/moving_mean",
             "batch_normalization/moving_variance", "dense_1/kernel", "dense_1/bias"]
    weights = []
    for n, w in zip(names, model.get_weights()):
        v = (rng.standard_normal(w.shape) * 0.5).astype(np.float32)
        weights.append(np.abs(v) + 0.5 if n.endswith(("gamma", "variance")) else v)
    model.set_weights(weights)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    labels = rng.integers(0, 3, 8)
    model.compile(keras.optimizers.Adam(1e-2), "sparse_categorical_crossentropy")
    model.fit(x, labels, batch_size=8, epochs=1, shuffle=False, verbose=0)
    tensors["fit/x"] = x
    tensors["fit/labels"] = labels.astype(np.float32)
    for n, w in zip(names, weights):
        tensors[f"fit/{n}"] = w
    for n, w in zip(names, model.get_weights()):
        tensors[f"fit/after/{n}"] = w
    meta["fit"] = {"keras": keras.__version__, "tensorflow": tf.__version__,
                   "parameters": int(model.count_params())}
    model.save_weights(HERE / "batchnorm.weights.h5")
    out = HERE / "batchnorm_reference.safetensors"
    write_safetensors(out, tensors, meta)
    print(f"wrote {out} ({out.stat().st_size} bytes, {len(tensors)} tensors)")


if __name__ == "__main__":
    main()
