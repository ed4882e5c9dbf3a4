"""The seed's script (bench/seed_script/seed.py) with only its import changed runs on crossover,
SMALL and BIG, and reaches the CLI's test accuracy: the same numbers, since both use the seeds the
script's models draw from the global seed 0 (SMALL's is 0)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "bench" / "seed_script" / "seed.py"
MNIST_10K = ROOT / "data" / "mnist-10k" / "mnist-10k.npz"


@pytest.fixture(scope="module")
def seed_run(tmp_path_factory):
    """The script's printed results, run as a user would: mnist.npz in ~/.keras/datasets."""
    tmp = tmp_path_factory.mktemp("seed")
    datasets = tmp / "home" / ".keras" / "datasets"
    datasets.mkdir(parents=True)
    shutil.copyfile(MNIST_10K, datasets / "mnist.npz")
    text = SEED.read_text()
    assert text.count("import tensorflow as tf\n") == 1
    script = tmp / "seed_crossover.py"
    script.write_text(text.replace("import tensorflow as tf\n", "import crossover as tf\n"))
    env = {k: v for k, v in os.environ.items() if k not in ("CROSSOVER_DATA", "KERAS_HOME")}
    # One thread count on both sides: BIG's GEMMs sum in another order at another count, and the
    # two measured choices (the script's in its own HOME, the CLI's) may differ on a busy machine.
    env.update(HOME=str(tmp / "home"), EPOCHS="1", CROSSOVER_THREADS="2")
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    results = {}
    for m in re.finditer(r"^(\w+) (\S+): t1 \S+ s, test loss (\S+), accuracy (\S+)$", out.stdout, re.M):
        results[(m[1], m[2])] = (float(m[3]), float(m[4]))
    for m in re.finditer(r"^(\w+) (\S+): no GPU$", out.stdout, re.M):
        results[(m[1], m[2])] = None
    return results


def drawn_seed(model: str) -> int:
    """The seed the script's model drew: each model compiled draws the next seed from the global
    state (0 here), as Keras's fresh weights per model; SMALL is the first, BIG the one after
    SMALL's CPU and (with a GPU) GPU runs."""
    import crossover as tf
    from crossover import _seed

    index = 0 if model == "small" else (2 if tf.config.list_physical_devices("GPU") else 1)
    state = (_seed._seed, _seed._drawn)
    _seed.set_seed(0)
    drawn = [_seed.draw() for _ in range(index + 1)][-1]
    _seed._seed, _seed._drawn = state
    return drawn


def cli_test_metrics(model: str, tmp_path: Path) -> tuple[float, float]:
    binary = os.environ.get("CROSSOVER_BINARY")
    if not binary:
        pytest.skip("CROSSOVER_BINARY is not set (ctest sets it to the built crossover)")
    out = tmp_path / f"{model}.json"
    args = [binary, "train", f"--model={model}", "--data=mnist-10k", "--epochs=1", "--threads=2",
            "--quiet", f"--seed={drawn_seed(model)}"]
    subprocess.run(args + [f"--json={out}"], check=True, cwd=ROOT)
    test = json.loads(out.read_text())["test"]
    return test["loss"], test["accuracy"]


@pytest.mark.parametrize("model", ["SMALL", "BIG"])
def test_the_seed_script_reaches_the_cli_accuracy(seed_run, model, tmp_path):
    loss, accuracy = seed_run[(model, "/cpu:0")]
    cli_loss, cli_accuracy = cli_test_metrics(model.lower(), tmp_path)
    assert accuracy == pytest.approx(cli_accuracy, abs=1e-4)  # printed with 4 decimals
    assert loss == pytest.approx(cli_loss, abs=1e-4)
    assert accuracy > 0.8  # one epoch of 8,000 digits


def test_the_gpu_half_says_there_is_no_gpu_here(seed_run):
    import crossover as tf

    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has a GPU: the script timed it")
    assert seed_run[("SMALL", "/gpu:0")] is None and seed_run[("BIG", "/gpu:0")] is None
