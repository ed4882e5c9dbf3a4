#!/usr/bin/env python3
"""keras.mixed_precision's "mixed_bfloat16" in crossover against TensorFlow 2.21's Keras.

The seed's SMALL model without its Dropout (Flatten(28,28) -> Dense(128, relu) -> Dense(10,
softmax)), Adam(), sparse categorical cross-entropy, batch 32, shuffle=False, on data/mnist-10k
(/255), from the same initial weights (Keras draws them), trained for --epochs under the
policies "float32" and "mixed_bfloat16" by each framework (crossover on one thread). Keras's
mixed_bfloat16 computes each layer in bfloat16 (outputs and elementwise work too); crossover's
rounds only the matrix products' operands (docs/PYTHON.md, "Precision"), so the two bf16 runs
are not expected to agree bit for bit: the question is whether bf16 moves each about as far from
its own float32 run, and where the losses and test accuracies land.

    PYTHONPATH=build/python bench/peers/.venv/bin/python bench/keras_mixed_precision.py [--epochs 3]
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
POLICIES = ("float32", "mixed_bfloat16")


def worker(framework: str, epochs: int, folder: Path) -> None:
    """Trains under both policies in this process; writes folder/<framework>.npz."""
    data = np.load(ROOT / "data" / "mnist-10k" / "mnist-10k.npz")
    x, y = (data["x_train"] / 255.0).astype("float32"), data["y_train"].astype("int64")
    x_test, y_test = (data["x_test"] / 255.0).astype("float32"), data["y_test"].astype("int64")
    if framework == "keras":
        os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
        import keras

        keras.utils.set_random_seed(0)  # the initial weights, the same each run
    else:
        import crossover as tf

        keras = tf.keras
        tf.config.threading.set_intra_op_parallelism_threads(1)
    init_path = folder / "init.npz"
    out = {}
    for policy in POLICIES:
        keras.mixed_precision.set_global_policy(policy)
        layers = keras.layers
        model = keras.Sequential(
            [
                layers.Input((28, 28)),
                layers.Flatten(),
                layers.Dense(128, activation="relu"),
                layers.Dense(10, activation="softmax"),
            ]
        )
        model.compile(
            optimizer=keras.optimizers.Adam(),
            loss="sparse_categorical_crossentropy",
            metrics=["accuracy"],
        )
        if not init_path.exists():
            np.savez(init_path, *model.get_weights())
        init = np.load(init_path)
        model.set_weights([init[f"arr_{i}"] for i in range(4)])
        h = model.fit(x, y, batch_size=32, epochs=epochs, shuffle=False, verbose=0)
        for i, w in enumerate(model.get_weights()):
            out[f"{policy}/w{i}"] = np.asarray(w, dtype=np.float32)
        out[f"{policy}/loss"] = np.array(h.history["loss"])
        out[f"{policy}/test"] = np.array(model.evaluate(x_test, y_test, verbose=0))
    np.savez(folder / f"{framework}.npz", **out)


def max_weight_difference(a: dict, p: str, b: dict, q: str) -> float:
    return max(float(np.abs(a[f"{p}/w{i}"] - b[f"{q}/w{i}"]).max()) for i in range(4))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker[0], args.epochs, Path(args.worker[1]))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        for framework in ("keras", "crossover"):  # Keras first: it draws the initial weights
            subprocess.run(
                [sys.executable, __file__, "--epochs", str(args.epochs)]
                + ["--worker", framework, tmp],
                check=True,
            )
        k, c = (dict(np.load(Path(tmp) / f"{f}.npz")) for f in ("keras", "crossover"))
    print(f"SMALL without dropout, mnist-10k, {args.epochs} epochs, same initial weights")
    print("largest weight difference after the last epoch:")
    for label, a, p, b, q in (
        ("Keras mixed_bfloat16 vs Keras float32", k, "mixed_bfloat16", k, "float32"),
        ("crossover mixed_bfloat16 vs crossover float32", c, "mixed_bfloat16", c, "float32"),
        ("crossover float32 vs Keras float32", c, "float32", k, "float32"),
        ("crossover mixed_bfloat16 vs Keras mixed_bfloat16", c, "mixed_bfloat16", k,
         "mixed_bfloat16"),
    ):
        print(f"  {label:50s} {max_weight_difference(a, p, b, q):.3g}")
    for policy in POLICIES:
        for name, r in (("Keras", k), ("crossover", c)):
            losses = ", ".join(f"{v:.5f}" for v in r[f"{policy}/loss"])
            loss, accuracy = r[f"{policy}/test"]
            print(
                f"{policy:15s} {name:10s} losses {losses}; test loss {loss:.5f}, "
                f"accuracy {accuracy:.4f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
