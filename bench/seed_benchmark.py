#!/usr/bin/env python3
"""The seed experiment's speed, side by side with the peers, in one run.

One epoch of SMALL and of BIG at batch 32 (and, with --models convnet, Keras's "Simple MNIST
convnet" at batch 128, issue 12) on the 60,000-image set: crossover's seconds per epoch (the better
of two epochs, on --threads threads), its GEMM rate, its ratio to the GEMM floor (the epoch's GEMM
and convolution FLOPs, from crossover's own op list of the step, at the rate oneDNN's sgemm reaches
on a 4096^3 product measured in this run), its ratio to the roofline floor (`crossover explain`'s:
each op of the step at the larger of its FLOPs at the peak rate and its bytes at the bandwidth of
the memory level holding them, issue 26),
and the peers from bench/peers/.venv (scripts/install-peers): PyTorch from PyPI at its best of 1
and --threads threads, TensorFlow 2.21 at --threads. Where the CPU trains in bf16 (AVX512_BF16 or
AMX-BF16: crossover itself decides, and its refusal is printed where it has neither), each model
also gets a bf16 row (`--precision bf16`: bf16 products, fp32 weights and Adam) with its speed-up
over fp32 and its test accuracy beside fp32's, and PyTorch under
`torch.autocast("cpu", dtype=torch.bfloat16)` beside it (issue 26); the floor stays fp32's (issue
10, item 4). Prints the CPU (model, family/model/stepping,
ISA), the peers' versions and the table as markdown, ready to paste into bench/RESULTS.md, with
the issue's targets marked met or not met.

    bench/seed-benchmark [--threads 2] [--data DIR] [--models small,big,convnet]
                         [--peer-big-steps 400] [--peer-small-steps 0] [--peer-convnet-steps 0]
                         [--no-peers] [--no-bf16] [--markdown FILE] [--json FILE]

A quick smoke run (peers timed over a few steps and extrapolated; not for the table):

    bench/seed-benchmark --peer-small-steps 200 --peer-big-steps 100
"""
import argparse, datetime, json, os, platform, subprocess, sys, tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")
PEERS = os.path.join(ROOT, "bench", "peers")
VENV_PYTHON = os.path.join(PEERS, ".venv", "bin", "python")

# Batch size of each model (the peers use the same, bench/peers/peer_common.py).
MODELS = {"small": 32, "big": 32, "convnet": 128}
# The issues' targets (10 for the MLPs, 12 for the convnet): crossover's ratio to the floor at
# most this; its speed-up over each peer at least this.
FLOOR_TARGET = {"small": 3.0, "big": 2.0, "convnet": 3.0}
# Issue 26: the step within this of its roofline floor, and bf16 at least this much faster than
# PyTorch's bf16 autocast where the CPU has bf16.
ROOFLINE_TARGET = {"small": 1.5, "big": 1.5}
BF16_PEER_TARGET = 2.0
PEER_TARGET = {"pytorch": {"small": 5.0, "big": 3.0, "convnet": 2.0},
               "tensorflow": {"small": 10.0, "big": 10.0, "convnet": 1.0}}
PEER_NAME = {"pytorch": "PyTorch", "tensorflow": "TF"}
ISA_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16")


# The GEMM and convolution FLOPs of one training step at batch `batch`, from crossover's own op
# list of that step (`crossover explain --json`: the ops of phase "gemm", convolutions included),
# so that no model is restated here.
def step_gemm_flops(model, batch, data):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "e.json")
        run([os.path.join(BUILD, "crossover"), "explain", "--model", model, "--data", data,
             "--batch-size", str(batch), "--threads", "1", "--steps", "3", "--max-seconds", "5",
             "--no-calibrate", "--quiet", "--json", out])
        with open(out) as f:
            doc = json.load(f)
    return sum(op["flops"] for op in doc["ops"] if op["phase"] == "gemm")


# The roofline floor of one training step at batch `batch` on `threads` threads, and the peak GEMM
# rate it was priced at (`crossover explain --json`'s "floor", issue 26: each op at the larger of
# its FLOPs at the profile's peak GEMM rate and its bytes at the bandwidth of the memory level
# that holds them; this machine's profile, calibrated on demand where it lacks the shapes).
def step_roofline(model, batch, data, threads):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "e.json")
        run([os.path.join(BUILD, "crossover"), "explain", "--model", model, "--data", data,
             "--batch-size", str(batch), "--threads", str(threads), "--steps", "3",
             "--max-seconds", "5", "--quiet", "--json", out])
        with open(out) as f:
            doc = json.load(f)
    floor = doc.get("floor")
    if not floor:
        return None
    return floor["step_seconds"], floor["peak_flops_per_second"]


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


def cpu_info():
    """Vendor, model name, family/model/stepping and the ISA flags that matter (/proc/cpuinfo)."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if not line.strip():
                    break  # the first processor's block is enough
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError:
        pass
    flags = set(fields.get("flags", "").split())
    return {"vendor": fields.get("vendor_id", "?"), "model_name": fields.get("model name", "?"),
            "family": fields.get("cpu family", "?"), "model": fields.get("model", "?"),
            "stepping": fields.get("stepping", "?"), "logical_cpus": os.cpu_count(),
            "isa": {flag: flag in flags for flag in ISA_FLAGS}}


def git_commit():
    try:
        commit = run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"]).strip()
        dirty = run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"]).strip()
        return commit + ("+changes" if dirty else "")
    except (OSError, RuntimeError):
        return "?"


def crossover_epoch(model, threads, data, precision="fp32"):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r.json")
        run([os.path.join(BUILD, "crossover"), "train", "--model", model, "--data", data,
             "--batch-size", str(MODELS[model]), "--epochs", "2", "--threads", str(threads),
             "--precision", precision, "--quiet", "--json", out])
        with open(out) as f:
            doc = json.load(f)
    # The better of two epochs: the first also pays for first-touch page faults.
    secs = min(e["seconds"] for e in doc["history"])
    return secs, doc["data"]["train"], doc["test"]["accuracy"]


def peer(script, model, threads, data, max_steps, extra=()):
    """One peer run (one epoch, or max_steps steps extrapolated): its JSON, with "seconds" added."""
    if not os.access(VENV_PYTHON, os.X_OK):
        return {"available": False, "reason": f"no {VENV_PYTHON}: run scripts/install-peers"}
    cmd = [VENV_PYTHON, os.path.join(PEERS, script), "--model", model, "--threads", str(threads),
           "--data", data]
    if max_steps:
        cmd += ["--max-steps", str(max_steps)]
    cmd += list(extra)
    print(f"  {script} {model} on {threads} thread(s) {' '.join(extra)}...", file=sys.stderr,
          flush=True)
    try:
        doc = last_json_line(run(cmd))
    except Exception as e:  # a peer that cannot run is reported, not fatal
        return {"available": False, "reason": str(e)[-300:]}
    if doc.get("available") is False:
        return doc
    doc["seconds"] = min(doc["seconds_per_epoch"])
    return doc


def bf16_refusal(data):
    """None where crossover trains in bf16 on this CPU, else its one-line refusal."""
    p = subprocess.run([os.path.join(BUILD, "crossover"), "train", "--model", "small", "--data",
                        data, "--epochs", "0", "--precision", "bf16", "--quiet"],
                       capture_output=True, text=True)
    if p.returncode == 0:
        return None
    lines = p.stderr.strip().splitlines()
    return lines[-1] if lines else f"exit {p.returncode}"


def available(p):
    return bool(p) and p.get("available") is not False


def load_average():
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def markdown(doc):
    """The run as a section of bench/RESULTS.md: machine, versions, the table, the targets."""
    cpu, rows = doc["cpu"], doc["rows"]
    isa = ", ".join(f"{flag} {'yes' if has else 'no'}" for flag, has in cpu["isa"].items())
    versions = []
    for key, what in (("pytorch", "PyTorch {} (PyPI, the default wheel)"),
                      ("tensorflow", "TensorFlow {} (PyPI)")):
        runs = [r[key] for r in rows if key in r]
        p = next((p for p in runs if available(p)), None)
        if p:
            versions.append(what.format(p["version"]) +
                            (f" / Keras {p['keras_version']}" if p.get("keras_version") else ""))
        elif runs:
            versions.append(f"{PEER_NAME[key]} not available ({runs[0].get('reason', '?')})")
    threads = doc["threads"]
    torch_threads = " and ".join(str(t) for t in doc["pytorch_threads"])
    lines = [
        f"## {doc['date']}: the seed benchmark on {cpu['model_name']}",
        "",
        f"CPU: {cpu['vendor']} {cpu['model_name']} (family {cpu['family']}, model {cpu['model']}, "
        f"stepping {cpu['stepping']}), {cpu['logical_cpus']} logical CPUs; {isa}. "
        f"Load average {doc['load_before']:.2f} before the run, {doc['load_after']:.2f} after.",
        f"crossover {doc['commit']} on {threads} threads (the better of two epochs). "
        + (f"Peers: {'; '.join(versions)}; PyTorch at the best of {torch_threads} threads, "
           f"TensorFlow at {threads}." if versions else "Peers: not run (--no-peers)."),
        f"Data: {doc['data']} ({rows[0]['samples']:,} train), batch "
        + ", ".join(f"{MODELS[r['model']]} ({r['model'].upper()})" for r in rows
                    if r["precision"] == "fp32")
        + ". Floor: the epoch's GEMM and convolution FLOPs (crossover's op list) at oneDNN's "
        f"sgemm rate on 4096^3 in this run, "
        f"{doc['sgemm_peak']['flops_per_second'] / 1e9:.0f} GFLOP/s on {threads} threads. "
        "Roofline: `crossover explain`'s floor of the step (each op at the larger of its FLOPs at "
        "the profile's peak GEMM rate and its bytes at the bandwidth of the L2, L3 or DRAM that "
        "holds them), times the epoch's steps.",
        "",
        "| model | crossover s/epoch | GEMM GFLOP/s | floor s | x floor | x roofline "
        "| PyTorch s/epoch | crossover faster | TF s/epoch | crossover faster |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    extrapolated, how = [], ""
    for r in rows:
        name = r["model"].upper() + (" bf16" if r["precision"] == "bf16" else "")
        cells = [name, f"{r['seconds']:.3f}", f"{r['gflops_per_second']:.0f}",
                 f"{r['floor_seconds']:.3f}", f"{r['ratio_to_floor']:.2f}x",
                 f"{r['ratio_to_roofline']:.2f}x" if "ratio_to_roofline" in r else "-"]
        for key in ("pytorch", "tensorflow"):
            p = r.get(key)
            if not available(p):
                cells += ["n/a" if p else "-", ""]
                continue
            note = ""
            if p.get("extrapolated"):
                note, how = "*", p["extrapolation"]
                text = f"{r['model'].upper()} {p['timed_steps']} of {p['steps_per_epoch']} steps"
                if text not in extrapolated:
                    extrapolated.append(text)
            if key == "pytorch":
                note += f" ({p['threads']}t" + (", autocast bf16)" if p.get("autocast") else ")")
            cells += [f"{p['seconds']:.2f}{note}", f"{r['speedup_' + key]:.1f}x"]
        lines.append("| " + " | ".join(cells) + " |")
    if extrapolated:
        lines += ["", f"`*`: {'; '.join(extrapolated)} timed ({how})."]
    bf16 = [r for r in rows if r["precision"] == "bf16"]
    if bf16:
        lines += ["", "bf16 rows (`--precision bf16`: bf16 products with fp32 accumulation, fp32 "
                  "weights and Adam; the floor is fp32's): "
                  + "; ".join(f"{r['model'].upper()} {r['speedup_fp32']:.2f}x fp32's speed, "
                              f"test accuracy {r['test_accuracy']:.4f} against "
                              f"{r['fp32_test_accuracy']:.4f} after two epochs" for r in bf16)
                  + "."]
    elif doc.get("bf16_refusal"):
        lines += ["", f"No bf16 rows: {doc['bf16_refusal']}"]
    lines += ["", "| target | this run | |", "| --- | ---: | --- |"]
    for t in doc["targets"]:
        met = {True: "**met**", False: "**not met**", None: "not measured"}[t["met"]]
        value = "" if t["value"] is None else f"{t['value']:.2f}x"
        lines.append(f"| {t['name']} | {value} | {met} |")
    return "\n".join(lines) + "\n"


def targets(rows):
    out = []
    for r in rows:
        m = r["model"]
        if r["precision"] != "fp32":
            continue  # the floor targets are fp32's; bf16 is reported beside them
        out.append({"name": f"{m.upper()} within {FLOOR_TARGET[m]:g}x of the floor",
                    "value": r["ratio_to_floor"], "met": r["ratio_to_floor"] <= FLOOR_TARGET[m]})
        if m in ROOFLINE_TARGET:
            value = r.get("ratio_to_roofline")
            # Below 1 the step beat its floor: the profile's rates are wrong (a calibration on a
            # busy machine), so the target is not measured.
            out.append({"name": f"{m.upper()} within {ROOFLINE_TARGET[m]:g}x of the roofline",
                        "value": value, "met": None if value is None or value < 1 else
                        value <= ROOFLINE_TARGET[m]})
    for key, goals in PEER_TARGET.items():
        for r in rows:
            if key not in r or r["precision"] != "fp32":
                continue
            m = r["model"]
            value = r.get("speedup_" + key)
            out.append({"name": f"{m.upper()} at least {goals[m]:g}x faster than {PEER_NAME[key]}",
                        "value": value, "met": None if value is None else value >= goals[m]})
    for r in rows:
        if r["precision"] == "bf16" and "pytorch" in r:
            value = r.get("speedup_pytorch")
            out.append({"name": f"{r['model'].upper()} bf16 at least {BF16_PEER_TARGET:g}x faster "
                                "than PyTorch's bf16 autocast",
                        "value": value, "met": None if value is None else value >= BF16_PEER_TARGET})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--peer-big-steps", type=int, default=400,
                    help="BIG in the peers: time this many steps and extrapolate (0: a full epoch)")
    ap.add_argument("--peer-small-steps", type=int, default=0,
                    help="SMALL in the peers: time this many steps and extrapolate "
                         "(default 0: a full epoch)")
    ap.add_argument("--peer-convnet-steps", type=int, default=0,
                    help="the convnet in the peers: time this many steps and extrapolate "
                         "(default 0: a full epoch)")
    ap.add_argument("--models", default="small,big",
                    help="comma-separated, of small, big, convnet (default small,big)")
    ap.add_argument("--no-peers", action="store_true")
    ap.add_argument("--no-bf16", action="store_true",
                    help="no bf16 rows (by default each model gets one where the CPU has bf16)")
    ap.add_argument("--markdown", help="also write the markdown section to this file")
    ap.add_argument("--json", help="write the whole run (every peer's JSON too) to this file")
    a = ap.parse_args()
    if a.threads < 1 or min(a.peer_big_steps, a.peer_small_steps, a.peer_convnet_steps) < 0:
        ap.error("--threads must be >= 1 and the step counts >= 0")
    models = [m.strip() for m in a.models.split(",") if m.strip()]
    if not models or any(m not in MODELS for m in models):
        ap.error(f"--models: a comma-separated list of {', '.join(MODELS)}, not '{a.models}'")

    cpu = cpu_info()
    print(f"CPU: {cpu['vendor']} {cpu['model_name']} (family {cpu['family']}, model "
          f"{cpu['model']}, stepping {cpu['stepping']}), {cpu['logical_cpus']} logical CPUs; ISA: "
          + " ".join(f"{f}={'yes' if has else 'no'}" for f, has in cpu["isa"].items()), flush=True)
    commit, load_before = git_commit(), load_average()
    if load_before > 0.5:
        print(f"warning: the machine is busy (load average {load_before:.2f}): the figures will "
              "not be representative; run it at a quiet moment for the table", file=sys.stderr)
    peak = json.loads(run([os.path.join(BUILD, "bench", "sgemm_peak"), str(a.threads)]))
    rate = peak["flops_per_second"]
    print(f"oneDNN sgemm 4096^3 on {a.threads} threads: {rate / 1e9:.0f} GFLOP/s "
          "(the floor's rate)", flush=True)
    torch_threads = sorted({1, a.threads})
    peer_steps = {"small": a.peer_small_steps, "big": a.peer_big_steps,
                  "convnet": a.peer_convnet_steps}
    refusal = "not run (--no-bf16)" if a.no_bf16 else bf16_refusal(a.data)
    rows = []
    for model in models:
        secs, n, acc = crossover_epoch(model, a.threads, a.data)
        batch = MODELS[model]
        # Full batches, and the last partial one at its own size.
        flops = (n // batch) * step_gemm_flops(model, batch, a.data)
        if n % batch:
            flops += step_gemm_flops(model, n % batch, a.data)
        floor = flops / rate
        row = {"model": model, "precision": "fp32", "samples": n, "gemm_flops": flops,
               "seconds": secs,
               "gflops_per_second": flops / secs / 1e9, "floor_seconds": floor,
               "ratio_to_floor": secs / floor, "test_accuracy": acc}
        roof = step_roofline(model, batch, a.data, a.threads)
        if roof:
            # Full steps, and the ragged last one at its share of a full step's floor.
            row["roofline_seconds"] = roof[0] * n / batch
            row["ratio_to_roofline"] = secs / row["roofline_seconds"]
            row["roofline_peak_flops_per_second"] = roof[1]
        print(f"crossover {model}: {secs:.3f} s/epoch, {secs / floor:.2f}x the GEMM floor"
              + (f", {row['ratio_to_roofline']:.2f}x the roofline" if roof else ""), flush=True)
        if roof and row["ratio_to_roofline"] < 1:
            print(f"warning: {model} ran faster than its roofline floor: the CPU profile's rates "
                  "are wrong (calibrated on a busy machine?); recalibrate (`crossover calibrate`) "
                  "on an idle one", file=sys.stderr, flush=True)
        if not a.no_peers:
            steps = peer_steps[model]
            torch = [peer("pytorch_mlp.py", model, t, a.data, steps) for t in torch_threads]
            ok = [t for t in torch if available(t)]
            row["pytorch"] = min(ok, key=lambda t: t["seconds"]) if ok else torch[0]
            row["pytorch_all"] = torch
            row["tensorflow"] = peer("keras_mlp.py", model, a.threads, a.data, steps)
            for key in ("pytorch", "tensorflow"):
                p = row[key]
                if available(p):
                    row["speedup_" + key] = p["seconds"] / secs
                    print(f"{key} {model}: {p['version']}, {p['seconds']:.2f} s/epoch, "
                          f"crossover {row['speedup_' + key]:.1f}x faster", flush=True)
                else:
                    print(f"{key} {model}: not available: {p.get('reason', '?')}", flush=True)
        rows.append(row)
        if refusal is None and model in ("small", "big"):  # the MLPs of issue 10
            secs16, _, acc16 = crossover_epoch(model, a.threads, a.data, "bf16")
            row16 = {"model": model, "precision": "bf16", "samples": n, "gemm_flops": flops,
                     "seconds": secs16, "gflops_per_second": flops / secs16 / 1e9,
                     "floor_seconds": floor, "ratio_to_floor": secs16 / floor,
                     "test_accuracy": acc16, "fp32_test_accuracy": acc,
                     "speedup_fp32": secs / secs16}
            print(f"crossover {model} bf16: {secs16:.3f} s/epoch, {secs / secs16:.2f}x fp32's "
                  f"speed", flush=True)
            if not a.no_peers:  # PyTorch's mixed precision on the same CPU: torch.autocast bf16
                torch16 = [peer("pytorch_mlp.py", model, t, a.data, peer_steps[model],
                                ("--autocast", "bf16")) for t in torch_threads]
                ok = [t for t in torch16 if available(t)]
                row16["pytorch"] = min(ok, key=lambda t: t["seconds"]) if ok else torch16[0]
                row16["pytorch_all"] = torch16
                if ok:
                    row16["speedup_pytorch"] = row16["pytorch"]["seconds"] / secs16
                    print(f"pytorch {model} autocast bf16: {row16['pytorch']['seconds']:.2f} "
                          f"s/epoch, crossover bf16 {row16['speedup_pytorch']:.1f}x faster",
                          flush=True)
            rows.append(row16)

    doc = {"date": datetime.date.today().isoformat(), "machine": platform.node(), "cpu": cpu,
           "commit": commit, "data": a.data, "threads": a.threads,
           "pytorch_threads": torch_threads, "load_before": load_before,
           "load_after": load_average(), "sgemm_peak": peak, "rows": rows,
           "bf16_refusal": refusal,
           "args": vars(a)}
    doc["targets"] = targets(rows)
    doc["markdown"] = markdown(doc)
    print("\n" + doc["markdown"])
    if a.markdown:
        with open(a.markdown, "w") as f:
            f.write(doc["markdown"])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
