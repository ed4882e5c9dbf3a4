#!/usr/bin/env python3
"""Python's fit against the CLI's epoch, SMALL on Fashion-MNIST 60k (issue 11 item 6: within 3%).

Each round trains the seed's SMALL model for --epochs epochs three ways, interleaved: `crossover
train` (the epochs' own seconds from --json), and Python's `model.fit` wall time (everything the
user waits for: the array checks, the conversion, the loop) on float32 input and on the float64
that `x / 255.0` gives. Same seed, the same thread count (Python's compile takes every core; the CLI gets --threads, default
the core count). Prints the median
over rounds of each per-epoch time and the ratios to the CLI.

    PYTHONPATH=build/python build/venv/bin/python bench/python_overhead.py [--rounds 3]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FASHION = "/usr/share/datasets/fashion-mnist"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    # Python's compile uses every core (the library's default for a model built in code).
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--binary", default=str(ROOT / "build" / "crossover"))
    args = ap.parse_args()
    os.environ["CROSSOVER_DATA"] = FASHION

    import numpy as np

    import crossover as tf

    (x, y), _ = tf.keras.datasets.fashion_mnist.load_data()
    x64 = x / 255.0
    x32 = x64.astype(np.float32)

    def python_epoch(xs) -> float:
        tf.random.set_seed(0)
        model = tf.keras.models.Sequential(
            [
                tf.keras.layers.Flatten(input_shape=(28, 28)),
                tf.keras.layers.Dense(128, activation="relu"),
                tf.keras.layers.Dropout(0.2),
                tf.keras.layers.Dense(10, activation="softmax"),
            ]
        )
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        t = time.perf_counter()
        model.fit(xs, y, epochs=args.epochs, verbose=0)
        return (time.perf_counter() - t) / args.epochs

    def cli_epoch() -> float:
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "r.json"
            subprocess.run(
                [args.binary, "train", "--model=small", f"--data={FASHION}",
                 f"--epochs={args.epochs}", f"--threads={args.threads}", "--quiet",
                 f"--json={out}"],
                check=True,
            )
            history = json.loads(out.read_text())["history"]
            return sum(e["seconds"] for e in history) / len(history)

    times = {"cli": [], "python float32": [], "python float64": []}
    for r in range(args.rounds):
        times["cli"].append(cli_epoch())
        times["python float32"].append(python_epoch(x32))
        times["python float64"].append(python_epoch(x64))
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.3f} s" for k, v in times.items()),
              flush=True)
    cli = statistics.median(times["cli"])
    print(f"\nSMALL, Fashion-MNIST 60k, {args.threads} threads, median of {args.rounds} rounds "
          f"of {args.epochs} epochs (s/epoch):")
    for k, v in times.items():
        m = statistics.median(v)
        print(f"  {k:15s} {m:.3f}  x{m / cli:.3f} of the CLI")
    return 0


if __name__ == "__main__":
    sys.exit(main())
