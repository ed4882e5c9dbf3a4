#!/usr/bin/env python3
"""The seed experiment's speed, side by side with the peers, in one run.

One epoch of SMALL and of BIG at batch 32 on the 60,000-image set, with 2 CPU threads: crossover's
seconds per epoch, its GEMM rate, its ratio to the GEMM floor (the epoch's GEMM FLOPs at the rate
oneDNN reaches on a 4096^3 product measured in this run), and PyTorch (best of 1 and 2 threads)
and TensorFlow/Keras where installed, as ratios. Usage:

    bench/seed-benchmark [--threads 2] [--data DIR] [--peer-big-steps 400] [--json FILE]
"""
import argparse, datetime, json, os, platform, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")

# GEMM FLOPs per sample of one training step: forward and weight gradient of every Dense, input
# gradient of every Dense but the first.
def gemm_flops_per_sample(widths):
    fwd = sum(2 * a * b for a, b in zip(widths, widths[1:]))
    dx = sum(2 * a * b for a, b in list(zip(widths, widths[1:]))[1:])
    return 2 * fwd + dx

MODELS = {"small": [784, 128, 10], "big": [784, 1000, 1000, 10]}


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-500:]}")
    return p.stdout


def last_json_line(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            return json.loads(line)
    raise RuntimeError("no JSON line in output")


def crossover_epoch(model, threads, data):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        run([os.path.join(BUILD, "crossover"), "train", "--model", model, "--data", data,
             "--epochs", "2", "--threads", str(threads), "--quiet", "--json", out])
        doc = json.load(open(out))
    # The better of two epochs: the first also pays for first-touch page faults.
    secs = min(e["seconds"] for e in doc["history"])
    return secs, doc["data"]["train"], doc["test"]["accuracy"]


def peer(script, python, model, threads, data, max_steps=None):
    cmd = [python, os.path.join(ROOT, "bench", "peers", script), "--model", model,
           "--threads", str(threads), "--data", data]
    if max_steps:
        cmd += ["--max-steps", str(max_steps)]
    try:
        doc = last_json_line(run(cmd))
    except Exception as e:  # a peer that cannot run is reported, not fatal
        return {"available": False, "reason": str(e)[-300:]}
    if doc.get("available") is False:
        return doc
    doc["seconds"] = min(doc["seconds_per_epoch"])
    return doc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--peer-big-steps", type=int, default=400,
                    help="BIG in the peers: time this many steps and extrapolate (0: a full epoch)")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()

    peak = json.loads(run([os.path.join(BUILD, "bench", "sgemm_peak"), str(a.threads)]))
    rate = peak["flops_per_second"]
    print(f"oneDNN sgemm 4096^3 on {a.threads} threads: {rate / 1e9:.0f} GFLOP/s (the floor's rate)")
    rows = []
    for model, widths in MODELS.items():
        secs, n, acc = crossover_epoch(model, a.threads, a.data)
        flops = gemm_flops_per_sample(widths) * n
        floor = flops / rate
        row = {"model": model, "samples": n, "gemm_flops": flops, "seconds": secs,
               "gflops_per_second": flops / secs / 1e9, "floor_seconds": floor,
               "ratio_to_floor": secs / floor, "test_accuracy": acc}
        if not a.no_peers:
            steps = a.peer_big_steps if model == "big" and a.peer_big_steps else None
            torch = [peer("pytorch_mlp.py", "/usr/bin/python3", model, t, a.data, steps) for t in (1, 2)]
            ok = [t for t in torch if t.get("available", True) is not False]
            row["pytorch"] = min(ok, key=lambda t: t["seconds"]) if ok else torch[0]
            venv = os.path.join(ROOT, "bench", "peers", ".venv", "bin", "python")
            row["tensorflow"] = peer("keras_mlp.py", venv if os.path.exists(venv) else "/usr/bin/python3",
                                     model, a.threads, a.data, steps)
        rows.append(row)

    print(f"\n{'model':6} {'crossover s/epoch':>17} {'GFLOP/s':>8} {'floor s':>8} {'x floor':>8} "
          f"{'PyTorch s':>10} {'x faster':>9} {'TF/Keras s':>11} {'x faster':>9}")
    for r in rows:
        def peer_cols(p):
            if not p or p.get("available") is False:
                return f"{'n/a':>10} {'':>9}"
            note = "*" if p.get("extrapolated") else ""
            return f"{p['seconds']:>9.2f}{note or ' '} {p['seconds'] / r['seconds']:>8.1f}x"
        print(f"{r['model']:6} {r['seconds']:>17.3f} {r['gflops_per_second']:>8.0f} "
              f"{r['floor_seconds']:>8.3f} {r['ratio_to_floor']:>7.2f}x "
              f"{peer_cols(r.get('pytorch'))} {peer_cols(r.get('tensorflow'))}")
    print("* extrapolated from the first steps of the epoch (see --peer-big-steps)")
    if any("pytorch" in r for r in rows):
        for r in rows:
            p = r.get("pytorch", {})
            if p.get("threads"):
                print(f"PyTorch's best for {r['model']}: {p['threads']} thread(s)")
    doc = {"date": datetime.date.today().isoformat(), "machine": platform.node(),
           "cpu": subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                                 capture_output=True, text=True).stdout.strip(),
           "threads": a.threads, "sgemm_peak": peak, "rows": rows}
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
