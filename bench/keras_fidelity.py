#!/usr/bin/env python3
"""crossover.keras against TensorFlow 2.21's Keras from the same starting weights (issue 11 item 5).

The seed's SMALL model without its Dropout (Flatten(28,28) -> Dense(128, relu) -> Dense(10,
softmax)), sparse categorical cross-entropy, batch 32, shuffle=False, on data/mnist-10k's 8,000
training images (/255). Keras builds the model and draws the initial weights; crossover gets them
through set_weights. Each epoch is one fit(epochs=1) call in both, so the weights can be compared
after every epoch; the optimizer state carries over between calls in both, as in one fit.

Checks (the exit status is 1 when one fails):
  - every epoch's mean training loss agrees within 1e-4 relative (--loss-rtol)
  - after epoch 1 every weight agrees within 1e-3 absolute (--weight-atol)
for Adam() (Keras's defaults) and SGD(learning_rate=0.01, momentum=0.9).

Run with the peers' venv (scripts/install-peers) and the module scripts/build made:

    PYTHONPATH=build/python bench/peers/.venv/bin/python bench/keras_fidelity.py [--epochs 3]
        [--json F] [--markdown F]
"""

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--loss-rtol", type=float, default=1e-4)
    ap.add_argument("--weight-atol", type=float, default=1e-3)
    ap.add_argument("--json")
    ap.add_argument("--markdown")
    args = ap.parse_args()

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "-1")
    import keras  # noqa: E402  (TensorFlow's Keras 3)
    import tensorflow as tf  # noqa: E402

    import crossover  # noqa: E402
    from crossover import keras as xk  # noqa: E402

    with np.load(ROOT / "data" / "mnist-10k" / "mnist-10k.npz") as d:
        x = (d["x_train"] / 255.0).astype(np.float32)
        y = d["y_train"].astype(np.int64)

    def build(k, **dtype):
        return k.Sequential(
            [
                k.layers.Input(shape=(28, 28), **dtype),
                k.layers.Flatten(**dtype),
                k.layers.Dense(128, activation="relu", **dtype),
                k.layers.Dense(10, activation="softmax", **dtype),
            ]
        )

    optimizers = {
        "Adam()": (lambda: keras.optimizers.Adam(), lambda: xk.optimizers.Adam()),
        "SGD(0.01, momentum=0.9)": (
            lambda: keras.optimizers.SGD(learning_rate=0.01, momentum=0.9),
            lambda: xk.optimizers.SGD(learning_rate=0.01, momentum=0.9),
        ),
    }
    results = []
    ok = True
    for name, (make_k, make_x) in optimizers.items():
        keras.utils.set_random_seed(1234)
        km = build(keras)
        xm = build(xk)
        xm.set_weights(km.get_weights())
        # The reference: the same Keras run in float64, from the same weights. float32 training
        # drifts from it (rounding, then Adam's normalisation of near-zero gradients and ReLUs
        # that flip); crossover is as faithful as Keras when it drifts as far as Keras does.
        k64 = build(keras, dtype="float64")
        k64.set_weights([w.astype(np.float64) for w in km.get_weights()])
        # The control: Keras float32 again, from weights one ulp away (towards zero). How far
        # that moves Keras from itself is how far float32 rounding alone can move a run.
        kulp = build(keras)
        kulp.set_weights([np.nextafter(w, np.float32(0)) for w in km.get_weights()])
        for m, opt in ((km, make_k()), (xm, make_x()), (k64, make_k()), (kulp, make_k())):
            m.compile(optimizer=opt, loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        rows = []
        for epoch in range(args.epochs):
            t = time.perf_counter()
            hk = km.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
            tk = time.perf_counter() - t
            t = time.perf_counter()
            hx = xm.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
            tx = time.perf_counter() - t
            lk, lx = hk.history["loss"][0], hx.history["loss"][0]
            ak, ax = hk.history["accuracy"][0], hx.history["accuracy"][0]
            h64 = k64.fit(x.astype(np.float64), y, batch_size=32, epochs=1, shuffle=False, verbose=0)
            l64 = h64.history["loss"][0]
            hu = kulp.fit(x, y, batch_size=32, epochs=1, shuffle=False, verbose=0)
            lu = hu.history["loss"][0]
            wk, wx, w64 = km.get_weights(), xm.get_weights(), k64.get_weights()
            wu = kulp.get_weights()

            def maxdiff(p, q):
                return max(float(np.max(np.abs(a - b))) for a, b in zip(p, q))

            wdiff = maxdiff(wk, wx)
            k_drift, x_drift = maxdiff(wk, w64), maxdiff(wx, w64)
            ulp_loss, ulp_w = abs(lu - lk) / abs(lk), maxdiff(wu, wk)
            rel = abs(lx - lk) / abs(lk)
            row = {
                "epoch": epoch + 1,
                "keras_loss": lk,
                "crossover_loss": lx,
                "loss_rel_diff": rel,
                "keras_accuracy": ak,
                "crossover_accuracy": ax,
                "max_weight_abs_diff": wdiff,
                "keras64_loss": l64,
                "keras_loss_rel_to_64": abs(lk - l64) / abs(l64),
                "crossover_loss_rel_to_64": abs(lx - l64) / abs(l64),
                "keras_weight_diff_to_64": k_drift,
                "crossover_weight_diff_to_64": x_drift,
                "keras_ulp_loss_rel_diff": ulp_loss,
                "keras_ulp_max_weight_abs_diff": ulp_w,
                "keras_seconds": tk,
                "crossover_seconds": tx,
            }
            row["loss_ok"] = rel <= args.loss_rtol
            if epoch == 0:
                row["weights_ok"] = wdiff <= args.weight_atol
                ok = ok and row["weights_ok"]
            ok = ok and row["loss_ok"]
            rows.append(row)
            print(
                f"{name:26s} epoch {epoch + 1}: loss keras {lk:.7f} crossover {lx:.7f} "
                f"(rel {rel:.1e}); accuracy {ak:.4f} / {ax:.4f}; max |dW| {wdiff:.1e}; "
                f"to float64 Keras: loss {abs(lk - l64) / l64:.1e} / {abs(lx - l64) / l64:.1e}, "
                f"max |dW| {k_drift:.1e} / {x_drift:.1e}; Keras from 1 ulp away: loss "
                f"{ulp_loss:.1e}, max |dW| {ulp_w:.1e}",
                flush=True,
            )
        results.append({"optimizer": name, "epochs": rows})

    doc = {
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "cpu": cpu_model(),
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "crossover": getattr(crossover, "__version__", "?"),
        "loss_rtol": args.loss_rtol,
        "weight_atol": args.weight_atol,
        "results": results,
        "passed": ok,
    }
    lines = [
        f"Keras fidelity ({doc['date']}, {doc['cpu']}; TensorFlow {doc['tensorflow']}, Keras "
        f"{doc['keras']}): SMALL without dropout, mnist-10k (8,000), batch 32, shuffle=False, same "
        "initial weights",
        "",
        "| optimizer | epoch | Keras loss | crossover loss | rel. diff | Keras acc. | crossover acc. "
        "| max abs weight diff | Keras-f64 loss diff: Keras / crossover "
        "| Keras-f64 max weight diff: Keras / crossover | Keras 1 ulp away: loss rel. diff / "
        "max weight diff |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        for e in r["epochs"]:
            lines.append(
                f"| {r['optimizer']} | {e['epoch']} | {e['keras_loss']:.6f} | "
                f"{e['crossover_loss']:.6f} | {e['loss_rel_diff']:.1e} | "
                f"{e['keras_accuracy']:.4f} | {e['crossover_accuracy']:.4f} | "
                f"{e['max_weight_abs_diff']:.1e} | {e['keras_loss_rel_to_64']:.1e} / "
                f"{e['crossover_loss_rel_to_64']:.1e} | {e['keras_weight_diff_to_64']:.1e} / "
                f"{e['crossover_weight_diff_to_64']:.1e} | {e['keras_ulp_loss_rel_diff']:.1e} / "
                f"{e['keras_ulp_max_weight_abs_diff']:.1e} |"
            )
    lines.append("")
    lines.append(
        f"Targets: loss within {args.loss_rtol:g} relative every epoch, weights within "
        f"{args.weight_atol:g} after epoch 1: {'met' if ok else 'NOT met'}."
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
