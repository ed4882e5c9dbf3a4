#!/usr/bin/env python3
"""crossover.keras against TensorFlow 2.21's Keras from the same starting weights (issue 11 item 5).

The seed's SMALL model without its Dropout (Flatten(28,28) -> Dense(128, relu) -> Dense(10,
softmax)), sparse categorical cross-entropy, batch 32, shuffle=False, on data/mnist-10k's 8,000
training images (/255). Keras (TensorFlow backend) draws the initial weights; every run starts
from them (set_weights). Each epoch is one fit(epochs=1) call, so the weights can be compared
after every epoch; the optimizer state carries over between calls, as in one fit.

The reference is Keras on TensorFlow in float32 (oneDNN on, TensorFlow's default). Against it:
  crossover      the run under test
  keras-eigen    Keras on TensorFlow with TF_ENABLE_ONEDNN_OPTS=0: other GEMM and elementwise
                 kernels, the same optimizer arithmetic (a control)
  keras-torch    Keras 3 on its PyTorch backend (when torch is installed): other kernels and
                 Keras's torch Adam, m = m*b1 + g*(1-b1) instead of m += (g-m)*(1-b1) (a control)
  keras-float64  the same Keras run in float64 (how far float32 rounding moves each run)
  numpy-*        (Adam only, --numpy) the model trained by numpy in float32 with numpy's GEMMs and
                 one Adam arithmetic each: Keras's (numpy-keras), the order of Keras's torch
                 backend (numpy-torch), and Keras's with 1 - beta taken from the float32 beta as
                 crossover did before 2026-12-01 (numpy-float-beta); they show which part of the
                 float32 step decides whether a run stays with Keras's
Each runs in its own process (the backend and TF_ENABLE_ONEDNN_OPTS are chosen at import).

Checks (the exit status is 1 when one fails), for crossover only:
  - every epoch's mean training loss agrees within 1e-4 relative (--loss-rtol)
  - after epoch 1 every weight agrees within 1e-3 absolute (--weight-atol)
for Adam() (Keras's defaults) and SGD(learning_rate=0.01, momentum=0.9). The table also says
whether each control would meet them.

Run with the peers' venv (scripts/install-peers) and the module scripts/build made:

    PYTHONPATH=build/python bench/peers/.venv/bin/python bench/keras_fidelity.py [--epochs 3]
        [--numpy] [--trace-steps 40] [--json F] [--markdown F]
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
OPTIMIZERS = ("Adam()", "SGD(0.01, momentum=0.9)")
LR, BETA1, BETA2, EPSILON = 1e-3, 0.9, 0.999, 1e-7  # Keras's Adam defaults


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def load_data():
    with np.load(ROOT / "data" / "mnist-10k" / "mnist-10k.npz") as d:
        x = (d["x_train"] / 255.0).astype(np.float32)
        y = d["y_train"].astype(np.int64)
    return x, y


# ---- one run, in its own process -----------------------------------------------------------


def worker(run: str, optimizer: str, init: str, out: str, epochs: int, trace: int) -> None:
    """Trains one configuration from the weights in `init` and saves what it saw into `out`."""
    x, y = load_data()
    w0 = [a for _, a in sorted(np.load(init).items(), key=lambda kv: int(kv[0][1:]))]
    dtype = "float64" if run == "keras-float64" else "float32"
    if run == "crossover":
        from crossover import keras as k

        kw = {}
    else:
        import keras as k

        kw = {"dtype": dtype}
        if k.backend.backend() == "tensorflow":
            import tensorflow as tf

            tf.config.threading.set_intra_op_parallelism_threads(2)
            tf.config.threading.set_inter_op_parallelism_threads(1)

    def build():
        m = k.Sequential(
            [
                k.layers.Input(shape=(28, 28), **kw),
                k.layers.Flatten(**kw),
                k.layers.Dense(128, activation="relu", **kw),
                k.layers.Dense(10, activation="softmax", **kw),
            ]
        )
        m.set_weights([w.astype(dtype) for w in w0])
        opt = (
            k.optimizers.Adam()
            if optimizer.startswith("Adam")
            else k.optimizers.SGD(learning_rate=0.01, momentum=0.9)
        )
        m.compile(optimizer=opt, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        return m

    xin = x.astype(dtype)
    res = {}
    m = build()
    for e in range(1, epochs + 1):
        t = time.perf_counter()
        h = m.fit(xin, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
        res[f"seconds{e}"] = np.array(time.perf_counter() - t)
        res[f"loss{e}"] = np.array(h.history["loss"][0])
        res[f"accuracy{e}"] = np.array(h.history["accuracy"][0])
        for i, w in enumerate(m.get_weights()):
            res[f"e{e}_w{i}"] = np.asarray(w, np.float64)
    if trace:  # a second model, one batch per fit: the weights after each of the first steps
        m = build()
        for s in range(1, trace + 1):
            b = slice((s - 1) * 32, s * 32)
            m.fit(xin[b], y[b], batch_size=32, epochs=1, shuffle=False, verbose=0)
            for i, w in enumerate(m.get_weights()):
                res[f"s{s}_w{i}"] = np.asarray(w, np.float64)
    np.savez(out, **res)


# ---- numpy float32 training with a chosen Adam arithmetic ------------------------------------


def numpy_adam_run(w0, x, y, epochs: int, arithmetic: str, trace: int) -> dict:
    """SMALL trained by numpy in float32 (its own GEMMs and softmax), Adam in one arithmetic:
    'keras'    Keras 3 (TensorFlow backend): m += (g - m) * f32(1 - b1); v += (g^2 - v) *
               f32(1 - b2), 1 - b computed in double from the Python beta
    'torch'    Keras 3's torch backend: m = m * f32(b1) + g * f32(1 - b1) (likewise v)
    'float-beta'  crossover's constants before 2026-12-01: m = f32(b1) m + (1 - f32(b1)) g, the
               complement taken from the float32 beta (0.100000024, 0.00099998713)
    All three compute alpha as Keras does, in float32 from the float32 beta's powers."""
    f = np.float32
    xs = x.reshape(len(x), -1)
    w = [a.astype(f).copy() for a in w0]
    m = [np.zeros_like(a) for a in w]
    v = [np.zeros_like(a) for a in w]
    res, t = {}, 0
    steps = len(xs) // 32
    for e in range(1, epochs + 1):
        losses = []
        for s in range(steps):
            xb, yb = xs[s * 32 : (s + 1) * 32], y[s * 32 : (s + 1) * 32]
            z1 = xb @ w[0] + w[1]
            a1 = np.maximum(z1, f(0))
            z2 = a1 @ w[2] + w[3]
            mx = z2.max(1, keepdims=True)
            ex = np.exp(z2 - mx)
            se = ex.sum(1, keepdims=True)
            rows = np.arange(len(yb))
            losses.append(np.mean(np.log(se[:, 0].astype(np.float64)) + mx[:, 0] - z2[rows, yb]))
            dz2 = ex / se
            dz2[rows, yb] -= f(1)
            dz2 *= f(1 / len(yb))
            dz1 = np.where(z1 > 0, dz2 @ w[2].T, f(0))
            grads = [xb.T @ dz1, dz1.sum(0), a1.T @ dz2, dz2.sum(0)]
            t += 1
            alpha = f(LR) * np.sqrt(f(1) - f(BETA2) ** f(t)) / (f(1) - f(BETA1) ** f(t))
            for i, g in enumerate(grads):
                if arithmetic == "keras":
                    m[i] = m[i] + (g - m[i]) * f(1 - BETA1)
                    v[i] = v[i] + (g * g - v[i]) * f(1 - BETA2)
                elif arithmetic == "torch":
                    m[i] = m[i] * f(BETA1) + g * f(1 - BETA1)
                    v[i] = v[i] * f(BETA2) + (g * g) * f(1 - BETA2)
                else:
                    m[i] = f(BETA1) * m[i] + (f(1) - f(BETA1)) * g
                    v[i] = f(BETA2) * v[i] + (f(1) - f(BETA2)) * g * g
                w[i] = w[i] - (m[i] * alpha) / (np.sqrt(v[i]) + f(EPSILON))
            if e == 1 and t <= trace:
                for i, a in enumerate(w):
                    res[f"s{t}_w{i}"] = a.astype(np.float64)
        res[f"loss{e}"] = np.array(np.mean(losses))
        res[f"accuracy{e}"] = np.array(np.nan)
        for i, a in enumerate(w):
            res[f"e{e}_w{i}"] = a.astype(np.float64)
    return res


# ---- the comparison ------------------------------------------------------------------------


def weight_stats(p, q) -> dict:
    d = np.concatenate([np.abs(a - b).ravel() for a, b in zip(p, q)])
    return {
        "max": float(d.max()),
        "median": float(np.median(d)),
        "p999": float(np.quantile(d, 0.999)),
        "over_1e-3": int((d > 1e-3).sum()),
        "over_1e-5": int((d > 1e-5).sum()),
        "count": int(d.size),
    }


def weights(run: dict, prefix: str):
    return [run[f"{prefix}_w{i}"] for i in range(4)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--loss-rtol", type=float, default=1e-4)
    ap.add_argument("--weight-atol", type=float, default=1e-3)
    ap.add_argument("--trace-steps", type=int, default=40, help="steps traced against float64")
    ap.add_argument("--numpy", action="store_true", help="add the numpy Adam-arithmetic runs")
    ap.add_argument("--worker", nargs=6, help=argparse.SUPPRESS)
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    args = ap.parse_args()

    if args.worker:
        run, optimizer, init, out, epochs, trace = args.worker
        worker(run, optimizer, init, out, int(epochs), int(trace))
        return 0

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="-1")
    runs = {
        "keras": {"KERAS_BACKEND": "tensorflow", "TF_ENABLE_ONEDNN_OPTS": "1"},
        "crossover": {},
        "keras-eigen": {"KERAS_BACKEND": "tensorflow", "TF_ENABLE_ONEDNN_OPTS": "0"},
        "keras-torch": {"KERAS_BACKEND": "torch"},
        "keras-float64": {"KERAS_BACKEND": "tensorflow", "TF_ENABLE_ONEDNN_OPTS": "1"},
    }
    probe = "import torch"
    if subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True).returncode:
        print("keras-torch: torch is not installed here; that control is left out", flush=True)
        del runs["keras-torch"]

    versions = json.loads(
        subprocess.run(
            [
                sys.executable,
                "-c",
                "import json, keras, tensorflow as tf, crossover; print(json.dumps([tf.__version__,"
                " keras.__version__, getattr(crossover, '__crossover_version__', '?')]))",
            ],
            env=dict(env, KERAS_BACKEND="tensorflow"),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()[-1]
    )
    x, y = load_data()
    results, ok = [], True
    with tempfile.TemporaryDirectory() as tmp:
        init = os.path.join(tmp, "init.npz")
        draw = (
            "import sys, numpy as np, keras; keras.utils.set_random_seed(1234); m = "
            "keras.Sequential([keras.layers.Input(shape=(28, 28)), keras.layers.Flatten(), "
            "keras.layers.Dense(128, activation='relu'), keras.layers.Dense(10, "
            "activation='softmax')]); np.savez(sys.argv[1], **{f'w{i}': w for i, w in "
            "enumerate(m.get_weights())})"
        )
        subprocess.run(
            [sys.executable, "-c", draw, init],
            env=dict(env, KERAS_BACKEND="tensorflow"),
            check=True,
        )
        w0 = [a for _, a in sorted(np.load(init).items(), key=lambda kv: int(kv[0][1:]))]
        for optimizer in OPTIMIZERS:
            data = {}
            for run, extra in runs.items():
                out = os.path.join(tmp, f"{run}.npz")
                subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--worker",
                        run,
                        optimizer,
                        init,
                        out,
                        str(args.epochs),
                        str(args.trace_steps),
                    ],
                    env=dict(env, **extra),
                    check=True,
                )
                data[run] = dict(np.load(out))
                print(f"{optimizer} {run}: done", flush=True)
            if args.numpy and optimizer.startswith("Adam"):
                for arithmetic in ("keras", "torch", "float-beta"):
                    data[f"numpy-{arithmetic}"] = numpy_adam_run(
                        w0, x, y, args.epochs, arithmetic, args.trace_steps
                    )
                    print(f"{optimizer} numpy-{arithmetic}: done", flush=True)
            ref = data["keras"]
            rows = []
            for run, d in data.items():
                if run == "keras":
                    continue
                epochs = []
                for e in range(1, args.epochs + 1):
                    lk, lr_ = float(ref[f"loss{e}"]), float(d[f"loss{e}"])
                    row = {
                        "epoch": e,
                        "keras_loss": lk,
                        "loss": lr_,
                        "loss_rel_diff": abs(lr_ - lk) / abs(lk),
                        "keras_accuracy": float(ref[f"accuracy{e}"]),
                        "accuracy": float(d[f"accuracy{e}"]),
                        "weights": weight_stats(weights(d, f"e{e}"), weights(ref, f"e{e}")),
                    }
                    row["loss_ok"] = row["loss_rel_diff"] <= args.loss_rtol
                    if e == 1:
                        row["weights_ok"] = row["weights"]["max"] <= args.weight_atol
                    epochs.append(row)
                meets = all(r["loss_ok"] for r in epochs) and epochs[0]["weights_ok"]
                trace = []
                if args.trace_steps and "keras-float64" in data and run != "keras-float64":
                    f64 = data["keras-float64"]
                    for s in range(1, args.trace_steps + 1):
                        drift = [
                            max(
                                float(np.max(np.abs(a - b)))
                                for a, b in zip(weights(r, f"s{s}"), weights(f64, f"s{s}"))
                            )
                            for r in (d, ref)
                        ]
                        trace.append(
                            {"step": s, "to_float64": drift[0], "keras_to_float64": drift[1]}
                        )
                rows.append({"run": run, "epochs": epochs, "meets_targets": meets, "trace": trace})
                if run == "crossover":
                    ok = ok and meets
                e1 = epochs[0]
                print(
                    f"{optimizer:24s} {run:18s} epoch-1 loss rel {e1['loss_rel_diff']:.1e}, "
                    f"weights max {e1['weights']['max']:.1e} median {e1['weights']['median']:.1e} "
                    f"over 1e-3: {e1['weights']['over_1e-3']}; losses "
                    + " ".join(f"{r['loss']:.6f}" for r in epochs)
                    + f"; targets {'met' if meets else 'NOT met'}",
                    flush=True,
                )
            results.append(
                {
                    "optimizer": optimizer,
                    "keras_losses": [float(ref[f"loss{e}"]) for e in range(1, args.epochs + 1)],
                    "runs": rows,
                }
            )

    doc = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "cpu": cpu_model(),
        "tensorflow": versions[0],
        "keras": versions[1],
        "crossover": versions[2],
        "loss_rtol": args.loss_rtol,
        "weight_atol": args.weight_atol,
        "results": results,
        "passed": ok,
    }
    lines = [
        f"Keras fidelity ({doc['date']}, {doc['cpu']}; TensorFlow {doc['tensorflow']}, Keras "
        f"{doc['keras']}): SMALL without dropout, mnist-10k (8,000), batch 32, shuffle=False, same "
        "initial weights; each run against Keras on TensorFlow (float32, oneDNN)",
        "",
        "| optimizer | run | epoch | loss | Keras loss | loss rel. diff | max weight diff "
        "| median | 99.9th pct. | weights > 1e-3 | targets |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for r in results:
        for row in r["runs"]:
            for e in row["epochs"]:
                w = e["weights"]
                verdict = ("met" if row["meets_targets"] else "not met") if e["epoch"] == 1 else ""
                lines.append(
                    f"| {r['optimizer']} | {row['run']} | {e['epoch']} | {e['loss']:.6f} | "
                    f"{e['keras_loss']:.6f} | {e['loss_rel_diff']:.1e} | {w['max']:.1e} | "
                    f"{w['median']:.1e} | {w['p999']:.1e} | {w['over_1e-3']} of {w['count']} | "
                    f"{verdict} |"
                )
    if args.trace_steps:
        lines += ["", "Max weight distance to Keras float64 after step s (Adam() only):", ""]
        adam = next(r for r in results if r["optimizer"].startswith("Adam"))
        traced = [row for row in adam["runs"] if row["trace"]]
        if traced:
            lines.append("| step | Keras | " + " | ".join(row["run"] for row in traced) + " |")
            lines.append("| ---: |" + " ---: |" * (len(traced) + 1))
            for s in sorted({1, 3, 8, 20, 24, 25, 30, args.trace_steps}):
                if s > args.trace_steps:
                    continue
                k64 = traced[0]["trace"][s - 1]["keras_to_float64"]
                lines.append(
                    f"| {s} | {k64:.1e} | "
                    + " | ".join(f"{row['trace'][s - 1]['to_float64']:.1e}" for row in traced)
                    + " |"
                )
    lines.append("")
    lines.append(
        f"Targets for crossover: loss within {args.loss_rtol:g} relative every epoch, weights "
        f"within {args.weight_atol:g} after epoch 1: {'met' if ok else 'NOT met'}."
    )
    text = "\n".join(lines)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
