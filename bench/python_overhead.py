#!/usr/bin/env python3
"""Python's fit against the CLI's epoch, SMALL on Fashion-MNIST 60k (issue 11 item 6: within 3%).

Each round, interleaved: `crossover train --epochs E` (the epochs' own seconds from --json, the
mean of all and the mean after the first), and Python's `model.fit` wall time (everything the user
waits for: the array checks, any conversion, copying the data into the engine, the loop) for 1
epoch and for 1 + E epochs on a new model each, on float32 input and on the float64 that
`x / 255.0` gives. From those: Python's marginal epoch ((t(1+E) - t(1)) / E, the loop itself)
and its per-fit set-up (t(1) minus a marginal epoch); and the set-up alone, timed directly:
`fit(epochs=0)` on a compiled model (checks, conversion, the data made ready for the engine),
which a busy machine disturbs far less than a difference of epochs. Same seed, the same thread count (--threads,
default the core count: the CLI's --threads and Python's CROSSOVER_THREADS, so that neither
measures its own). Prints the medians over rounds and the ratios to the CLI.

    build/venv/bin/python bench/python_overhead.py [--rounds 5] [--epochs 3] [--set-up-only]
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
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--binary", default=str(ROOT / "build" / "crossover"))
    ap.add_argument("--set-up-only", action="store_true", help="only fit(epochs=0), no epochs")
    args = ap.parse_args()
    os.environ["CROSSOVER_DATA"] = FASHION
    os.environ["CROSSOVER_THREADS"] = str(args.threads)  # Python's fit measures none

    import numpy as np

    import crossover as tf

    (x, y), _ = tf.keras.datasets.fashion_mnist.load_data()
    x64 = x / 255.0
    x32 = x64.astype(np.float32)

    def make_model():
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
        return model

    def python_fit(xs, epochs: int) -> float:
        model = make_model()
        t = time.perf_counter()
        model.fit(xs, y, epochs=epochs, verbose=0)
        return time.perf_counter() - t

    def python_set_up(xs) -> float:
        """fit(epochs=0): everything fit does before its first step."""
        model = make_model()
        model.fit(xs[:64], y[:64], epochs=0, verbose=0)  # the engine's own buffers, once
        t = time.perf_counter()
        model.fit(xs, y, epochs=0, verbose=0)
        return time.perf_counter() - t

    def python_epoch(xs) -> tuple[float, float]:
        """(marginal seconds per epoch, per-fit set-up seconds)."""
        one = python_fit(xs, 1)
        more = python_fit(xs, 1 + args.epochs)
        marginal = (more - one) / args.epochs
        return marginal, one - marginal

    def cli_epoch() -> float:
        with tempfile.TemporaryDirectory() as d:
            out = Path(d) / "r.json"
            subprocess.run(
                [args.binary, "train", "--model=small", f"--data={FASHION}",
                 f"--epochs={args.epochs}", f"--threads={args.threads}", "--quiet",
                 f"--json={out}"],
                check=True,
            )
            seconds = [e["seconds"] for e in json.loads(out.read_text())["history"]]
            return sum(seconds) / len(seconds), sum(seconds[1:]) / max(1, len(seconds) - 1)

    times: dict[str, list[float]] = {
        "cli epoch (mean)": [],
        "cli epoch (after the first)": [],
        "python float32 epoch (marginal)": [],
        "python float32 fit set-up": [],
        "python float64 epoch (marginal)": [],
        "python float64 fit set-up": [],
        "python float32 fit(epochs=0)": [],
        "python float64 fit(epochs=0)": [],
    }
    if args.set_up_only:
        times = {k: v for k, v in times.items() if k.endswith("(epochs=0)")}
    for r in range(args.rounds):
        if args.set_up_only:
            for name, xs in (("float32", x32), ("float64", x64)):
                times[f"python {name} fit(epochs=0)"].append(python_set_up(xs))
            print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.3f}" for k, v in times.items()),
                  flush=True)
            continue
        mean, later = cli_epoch()
        times["cli epoch (mean)"].append(mean)
        times["cli epoch (after the first)"].append(later)
        for name, xs in (("float32", x32), ("float64", x64)):
            marginal, setup = python_epoch(xs)
            times[f"python {name} epoch (marginal)"].append(marginal)
            times[f"python {name} fit set-up"].append(setup)
            times[f"python {name} fit(epochs=0)"].append(python_set_up(xs))
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.3f}" for k, v in times.items()),
              flush=True)
    if args.set_up_only:
        print(f"\nmedian of {args.rounds} rounds (s):")
        for k, v in times.items():
            print(f"  {k:32s} {statistics.median(v):.3f}")
        return 0
    cli = statistics.median(times["cli epoch (mean)"])
    print(f"\nSMALL, Fashion-MNIST 60k, {args.threads} threads, median of {args.rounds} rounds, "
          f"{args.epochs} epochs (s):")
    for k, v in times.items():
        m = statistics.median(v)
        print(f"  {k:32s} {m:.3f}  x{m / cli:.3f} of the CLI's mean epoch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
