"""The CUDA wheel's check, as a user's Keras script with no device scope (scripts/wheel-check
--cuda, on a machine without a GPU; scripts/gpu-check's cuda-wheel step, on a GPU):

    python cuda_wheel_fit.py DIGITS.npz EXPECTED_DEVICE [EPOCHS]

trains a Dense MLP on the digits, prints the device it trained on (and its accuracy) and where
cuBLASLt and cuDNN were loaded from (/proc/self/maps), and fails unless it trained on
EXPECTED_DEVICE (cpu, cuda:0) with both libraries from the nvidia-* packages beside the crossover
package (site-packages/nvidia)."""

import os
import sys

import numpy as np

import crossover as tf

digits, expected = sys.argv[1], sys.argv[2]
epochs = int(sys.argv[3]) if len(sys.argv) > 3 else 1
d = np.load(digits)
model = tf.keras.Sequential(
    [
        tf.keras.layers.Flatten(input_shape=(28, 28)),
        tf.keras.layers.Dense(128, activation="relu"),
        tf.keras.layers.Dense(10, activation="softmax"),
    ]
)
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
h = model.fit(d["x_train"] / 255.0, d["y_train"], epochs=epochs, verbose=0)
print("trained on", model._core.device_name, "accuracy", h.history["accuracy"][-1])
site = os.path.dirname(os.path.dirname(tf.__file__))
for lib in ("libcublasLt.so", "libcudnn.so"):
    paths = sorted({line.split()[-1] for line in open("/proc/self/maps") if lib in line})
    print(lib, "from", paths)
    assert paths and all(p.startswith(os.path.join(site, "nvidia")) for p in paths), paths
assert model._core.device_name == expected, f"trained on {model._core.device_name}, not {expected}"
