"""Writes tests/data/keras/conv_reference.safetensors: what Keras 3 itself computes for Conv2D,
MaxPooling2D, AveragePooling2D and the "Simple MNIST convnet" on fixed weights and inputs (issue
12: forward outputs against Keras, and the convnet's gradients). Not run by the tests (CI has no
TensorFlow); run by hand with any Python that has Keras 3 and TensorFlow:

    /work/main/bench/peers/.venv/bin/python tests/data/keras/make_conv.py

Every input and weight comes from a fixed generator (numpy's default_rng with the seeds below),
so the inputs are the same on every run; Keras's outputs may differ in the last bits between
TensorFlow builds. All arrays are float32, channels last (Keras's default), kernels (kh, kw, in,
out). Tensors, per case C:

    C/x        the input batch (N, H, W, channels)
    C/kernel   C/bias   the layer's weights (conv cases)
    C/y        Keras's output for C/x (checked here against plain float64 loops that pad as
               TensorFlow does, within 1e-5)

Cases (the layer and its arguments are in the header's __metadata__, as JSON):

    conv_valid        Conv2D(4, 3, activation="relu")                       x (2, 7, 7, 2)
    conv_same_s2      Conv2D(3, 3, strides=2, padding="same")               x (2, 8, 8, 2)
                      (even input, odd kernel, stride 2: TensorFlow pads 0 rows on top, 1 below)
    conv_same_k4      Conv2D(2, 4, padding="same", use_bias=False)          x (1, 6, 5, 3)
                      (total padding 3: 1 on top/left, 2 on bottom/right)
    conv_rect         Conv2D(5, (2, 3), strides=(1, 2), activation="relu")  x (2, 6, 7, 1)
    maxpool_2         MaxPooling2D(2)                                       x (2, 7, 7, 3)
                      (odd size: the last row and column are dropped)
    maxpool_ties      MaxPooling2D(2) on an input with equal values in each window
    maxpool_3s2_same  MaxPooling2D(3, strides=2, padding="same")            x (1, 8, 8, 2)
    avgpool_2_same    AveragePooling2D(2, padding="same")                   x (1, 5, 5, 2)
                      (windows at the edge average only the real cells, as TensorFlow does)

and, drawn after the convnet's tensors from a generator of their own (adding them changed no
earlier input or weight; the committed file keeps the earlier tensors of the run before them, as
a rerun moves Keras's outputs in the last bits), dilated convolutions (atrous: the kernel's taps
dilation_rate apart, spanning (kernel - 1) * dilation + 1, which TensorFlow pads for):

    conv_dilated_2     Conv2D(4, 3, dilation_rate=2, activation="relu")     x (2, 9, 8, 3)
                       (spans 5x5: 5x4 outputs)
    conv_dilated_same  Conv2D(3, (3, 2), dilation_rate=(2, 3), padding="same")
                                                                           x (2, 7, 6, 2)
                       (spans 5x4: rows padded 2 and 2, columns 1 and 2)
    conv_dilated_rect  Conv2D(2, (2, 3), dilation_rate=(3, 2), use_bias=False)
                                                                           x (1, 8, 9, 2)

and the convnet (Keras's example: Input(28, 28, 1), Conv2D(32, 3, relu), MaxPooling2D(2),
Conv2D(64, 3, relu), MaxPooling2D(2), Flatten, Dropout(0.5), Dense(10, softmax); 34,826
parameters), with weights drawn from the generator, on the first 8 images of
data/mnist-10k/mnist-10k.npz (/255):

    convnet/x (8, 28, 28, 1), convnet/labels (8,) class indices as floats
    convnet/conv2d/kernel ... convnet/dense/bias   the weights, named as crossover names them
    convnet/y            Keras's predict() (softmax probabilities; dropout off)
    convnet/loss         (1,) sparse categorical cross-entropy, mean over the 8 (dropout off)
    convnet/grad/<name>  d loss / d weight, from tf.GradientTape with training=False

It also writes convnet.weights.h5: Keras's model.save_weights of the same convnet and weights.
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
ROOT = HERE.parents[2]
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


def same_padding(size: int, k: int, s: int, padding: str) -> tuple[int, int, int]:
    """(before, after, output size) as TensorFlow pads: the odd row/column goes after."""
    if padding == "valid":
        return 0, 0, (size - k) // s + 1
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2, out


def reference(x, m, kernel=None, bias=None):
    """The case's output in float64 by plain loops: checks the file against its own description."""
    n, h, w, c = x.shape
    kh, kw = m["kernel_size"] if m["layer"] == "Conv2D" else m["pool_size"]
    sh, sw = m["strides"]
    dh, dw = m.get("dilation_rate", [1, 1])
    pt, _, oh = same_padding(h, (kh - 1) * dh + 1, sh, m["padding"])
    pl, _, ow = same_padding(w, (kw - 1) * dw + 1, sw, m["padding"])
    y = np.zeros((n, oh, ow, kernel.shape[3] if kernel is not None else c))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * sh - pt, j * sw - pl
            rows, cols = slice(max(r0, 0), min(r0 + kh, h)), slice(max(c0, 0), min(c0 + kw, w))
            win = x[:, rows, cols, :].astype(np.float64)
            if (dh, dw) != (1, 1):  # each tap on its own, dilation apart; padding reads 0
                for ki in range(kh):
                    for kj in range(kw):
                        r, q = r0 + ki * dh, c0 + kj * dw
                        if 0 <= r < h and 0 <= q < w:
                            y[:, i, j, :] += x[:, r, q, :].astype(np.float64) @ kernel[ki, kj]
            elif m["layer"] == "Conv2D":
                k = kernel[rows.start - r0:rows.stop - r0, cols.start - c0:cols.stop - c0]
                y[:, i, j, :] = np.tensordot(win, k.astype(np.float64), axes=([1, 2, 3], [0, 1, 2]))
            elif m["layer"] == "MaxPooling2D":
                y[:, i, j, :] = win.max(axis=(1, 2))
            else:
                y[:, i, j, :] = win.mean(axis=(1, 2))
    if bias is not None:
        y += bias
    return np.maximum(y, 0) if m.get("activation") == "relu" else y


def main() -> None:
    rng = np.random.default_rng(20261201)
    tensors, meta = {}, {}

    def case(name, layer, x_shape, args, x=None):
        x = rng.standard_normal(x_shape).astype(np.float32) if x is None else x
        model = keras.Sequential([keras.Input(x_shape[1:]), layer])
        weights = [(rng.standard_normal(w.shape) * 0.5).astype(np.float32)
                   for w in model.get_weights()]
        model.set_weights(weights)
        y = model.predict(x, verbose=0)
        tensors[f"{name}/x"] = x
        if weights:
            tensors[f"{name}/kernel"] = weights[0]
            if len(weights) > 1:
                tensors[f"{name}/bias"] = weights[1]
        tensors[f"{name}/y"] = y
        meta[name] = {"layer": type(layer).__name__, **args}
        ref = reference(x, meta[name], *(weights + [None, None])[:2])
        err = float(np.abs(ref - y).max())
        assert ref.shape == y.shape and err < 1e-5, (name, ref.shape, y.shape, err)

    case("conv_valid", L.Conv2D(4, 3, activation="relu"), (2, 7, 7, 2),
         {"filters": 4, "kernel_size": [3, 3], "strides": [1, 1], "padding": "valid",
          "activation": "relu", "use_bias": True})
    case("conv_same_s2", L.Conv2D(3, 3, strides=2, padding="same"), (2, 8, 8, 2),
         {"filters": 3, "kernel_size": [3, 3], "strides": [2, 2], "padding": "same",
          "activation": "linear", "use_bias": True})
    case("conv_same_k4", L.Conv2D(2, 4, padding="same", use_bias=False), (1, 6, 5, 3),
         {"filters": 2, "kernel_size": [4, 4], "strides": [1, 1], "padding": "same",
          "activation": "linear", "use_bias": False})
    case("conv_rect", L.Conv2D(5, (2, 3), strides=(1, 2), activation="relu"), (2, 6, 7, 1),
         {"filters": 5, "kernel_size": [2, 3], "strides": [1, 2], "padding": "valid",
          "activation": "relu", "use_bias": True})
    case("maxpool_2", L.MaxPooling2D(2), (2, 7, 7, 3),
         {"pool_size": [2, 2], "strides": [2, 2], "padding": "valid"})
    ties = np.repeat(np.repeat(rng.integers(-2, 3, (1, 3, 3, 2)).astype(np.float32), 2, 1), 2, 2)
    case("maxpool_ties", L.MaxPooling2D(2), ties.shape,
         {"pool_size": [2, 2], "strides": [2, 2], "padding": "valid"}, x=ties)
    case("maxpool_3s2_same", L.MaxPooling2D(3, strides=2, padding="same"), (1, 8, 8, 2),
         {"pool_size": [3, 3], "strides": [2, 2], "padding": "same"})
    case("avgpool_2_same", L.AveragePooling2D(2, padding="same"), (1, 5, 5, 2),
         {"pool_size": [2, 2], "strides": [2, 2], "padding": "same"})

    # The convnet.
    model = keras.Sequential([
        keras.Input((28, 28, 1)),
        L.Conv2D(32, 3, activation="relu"), L.MaxPooling2D(2),
        L.Conv2D(64, 3, activation="relu"), L.MaxPooling2D(2),
        L.Flatten(), L.Dropout(0.5), L.Dense(10, activation="softmax"),
    ])
    assert model.count_params() == 34826
    names = ["conv2d/kernel", "conv2d/bias", "conv2d_1/kernel", "conv2d_1/bias",
             "dense/kernel", "dense/bias"]
    weights = []
    for w in model.get_weights():
        # Kernels with unit variance over their fan-in (activations stay O(1)); small biases.
        scale = 1.0 / np.sqrt(np.prod(w.shape[:-1])) if w.ndim > 1 else 0.1
        weights.append((rng.standard_normal(w.shape) * scale).astype(np.float32))
    model.set_weights(weights)
    with np.load(ROOT / "data" / "mnist-10k" / "mnist-10k.npz") as d:
        x = (d["x_train"][:8].astype(np.float32) / np.float32(255.0))[..., None]
        labels = d["y_train"][:8].astype(np.int64)
    y = model.predict(x, verbose=0)
    loss_fn = keras.losses.SparseCategoricalCrossentropy()
    with tf.GradientTape() as tape:
        loss = loss_fn(labels, model(x, training=False))
    grads = tape.gradient(loss, model.trainable_weights)
    tensors["convnet/x"] = x
    tensors["convnet/labels"] = labels.astype(np.float32)
    for n, w in zip(names, weights):
        tensors[f"convnet/{n}"] = w
    tensors["convnet/y"] = y
    tensors["convnet/loss"] = np.array([float(loss)], np.float32)
    for n, g in zip(names, grads):
        tensors[f"convnet/grad/{n}"] = g.numpy()
    meta["convnet"] = {"keras": keras.__version__, "tensorflow": tf.__version__,
                       "parameters": int(model.count_params())}

    # Dilated convolutions, from a generator of their own.
    rng = np.random.default_rng(20261207)
    case("conv_dilated_2", L.Conv2D(4, 3, dilation_rate=2, activation="relu"), (2, 9, 8, 3),
         {"filters": 4, "kernel_size": [3, 3], "strides": [1, 1], "padding": "valid",
          "dilation_rate": [2, 2], "activation": "relu", "use_bias": True})
    case("conv_dilated_same", L.Conv2D(3, (3, 2), dilation_rate=(2, 3), padding="same"),
         (2, 7, 6, 2),
         {"filters": 3, "kernel_size": [3, 2], "strides": [1, 1], "padding": "same",
          "dilation_rate": [2, 3], "activation": "linear", "use_bias": True})
    case("conv_dilated_rect", L.Conv2D(2, (2, 3), dilation_rate=(3, 2), use_bias=False),
         (1, 8, 9, 2),
         {"filters": 2, "kernel_size": [2, 3], "strides": [1, 1], "padding": "valid",
          "dilation_rate": [3, 2], "activation": "linear", "use_bias": False})
    model.save_weights(HERE / "convnet.weights.h5")  # Keras 3's own layout, the same weights
    out = HERE / "conv_reference.safetensors"
    write_safetensors(out, tensors, meta)
    print(f"wrote {out} ({out.stat().st_size} bytes, {len(tensors)} tensors); "
          f"convnet loss {float(loss):.6f}")


if __name__ == "__main__":
    main()
