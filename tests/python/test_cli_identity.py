"""The same model, data, options and seed in Python and in `crossover train`: bit-identical
per-epoch losses and accuracies, and bit-identical weights (issue 11, item 5).

The binary is $CROSSOVER_BINARY (ctest sets it) or build/crossover beside build/python."""

import json
import os
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest

import crossover as tf

REPO = Path(__file__).resolve().parents[2]
SEED = 5
EPOCHS = 2


def crossover_binary() -> Path:
    given = os.environ.get("CROSSOVER_BINARY")
    if given:
        return Path(given)
    beside = Path(tf.__file__).resolve().parents[2] / "crossover"  # build/python/crossover/..
    if not beside.is_file():
        pytest.skip("no crossover binary: set CROSSOVER_BINARY (ctest does)")
    return beside


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        assert entry["dtype"] == "F32"
        begin, end = entry["data_offsets"]
        values = np.frombuffer(raw[8 + n + begin : 8 + n + end], dtype="<f4")
        out[name] = values.reshape(entry["shape"])
    return out


def train_with_cli(folder: Path, *options: str) -> tuple[dict, dict[str, np.ndarray]]:
    """`crossover train` of SMALL on mnist-10k, seed SEED, with a temporary HOME: its --json
    record and its --save'd weights."""
    (folder / "home").mkdir()
    command = [
        str(crossover_binary()),
        "train",
        "--data=mnist-10k",
        "--model=small",
        f"--seed={SEED}",
        f"--json={folder / 'run.json'}",
        f"--save={folder / 'model.safetensors'}",
        "--quiet",
        *options,
    ]
    env = dict(os.environ, HOME=str(folder / "home"))
    env.pop("CROSSOVER_DATA", None)
    subprocess.run(command, check=True, env=env, cwd=folder, timeout=600)
    record = json.loads((folder / "run.json").read_text())
    return record, read_safetensors(folder / "model.safetensors")


def seed_model(threads, policy="float32"):
    """The seed's SMALL, seeded with SEED and compiled at `threads` threads under `policy` (both
    set back afterwards)."""
    from crossover import _threads
    from crossover.keras import mixed_precision

    tf.keras.utils.set_random_seed(SEED)
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    mixed_precision.set_global_policy(policy)
    try:
        model = tf.keras.models.Sequential(
            [
                tf.keras.layers.Flatten(input_shape=(28, 28)),
                tf.keras.layers.Dense(128, activation="relu"),
                tf.keras.layers.Dropout(0.2),
                tf.keras.layers.Dense(10, activation="softmax"),
            ]
        )
        model.compile(
            optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"]
        )
    finally:
        mixed_precision.set_global_policy("float32")
        _threads._set = None
    return model


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    # Two threads on both sides: the CPU's bits depend on the count (a layer whose weights fit a
    # core's L2 splits its reduction across the threads), and each side would otherwise measure
    # its own count, which may differ on a busy machine.
    return train_with_cli(tmp_path_factory.mktemp("cli"), f"--epochs={EPOCHS}", "--threads=2")


@pytest.fixture(scope="module")
def python_run(tmp_path_factory):
    """The seed's script for SMALL, seeded, its data from keras.datasets as a Keras user has it."""
    home = tmp_path_factory.mktemp("home")
    saved = {k: os.environ.get(k) for k in ("HOME", "CROSSOVER_DATA")}
    os.environ["HOME"] = str(home)
    os.environ["CROSSOVER_DATA"] = str(REPO / "data" / "mnist-10k" / "mnist-10k.npz")
    try:
        (x_train, y_train), _ = tf.keras.datasets.mnist.load_data()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    x_train = x_train / 255.0
    model = seed_model(threads=2)
    history = model.fit(x_train, y_train, epochs=EPOCHS, verbose=0)
    return history.history, model.get_weights()


def test_the_cli_trained_the_same_run(cli_run):
    record, _ = cli_run
    assert record["data"]["name"] == "mnist-10k" and record["data"]["train"] == 8000
    assert record["seed"] == SEED and record["batch_size"] == 32 and len(record["history"]) == 2
    assert record["optimizer"] == "adam" and record["loss"] == "sparse_categorical_crossentropy"


def test_per_epoch_losses_and_accuracies_are_bit_identical(cli_run, python_run):
    record, _ = cli_run
    history, _ = python_run
    assert history["loss"] == [e["loss"] for e in record["history"]]
    assert history["accuracy"] == [e["accuracy"] for e in record["history"]]


def test_final_weights_are_bit_identical(cli_run, python_run):
    _, saved = cli_run
    _, weights = python_run
    names = ["dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"]
    assert sorted(saved) == sorted(names)
    for name, w in zip(names, weights):
        assert saved[name].shape == w.shape, name
        np.testing.assert_array_equal(saved[name], w, err_msg=name)


# --- bf16: keras.mixed_precision's "mixed_bfloat16" is `crossover train --precision bf16` -------
CPU_BF16_PROBLEM = tf._core.cpu_precision_problem("bf16")


@pytest.fixture(scope="module")
def bf16_runs(tmp_path_factory):
    """One epoch of SMALL on mnist-10k, seed SEED, one thread, in bf16: the CLI's
    (--precision bf16) and Python's (set_global_policy('mixed_bfloat16'))."""
    if CPU_BF16_PROBLEM:
        pytest.skip(f"bf16 on this CPU: {CPU_BF16_PROBLEM}")
    record, saved = train_with_cli(
        tmp_path_factory.mktemp("bf16"), "--epochs=1", "--precision=bf16", "--threads=1"
    )

    data = np.load(REPO / "data" / "mnist-10k" / "mnist-10k.npz")
    x_train, y_train = data["x_train"] / 255.0, data["y_train"]
    model = seed_model(threads=1, policy="mixed_bfloat16")
    history = model.fit(x_train, y_train, epochs=1, verbose=0)
    return record, saved, history.history, model


def test_mixed_bfloat16_is_the_clis_bf16_bit_for_bit(bf16_runs, cli_run):
    record, saved, history, model = bf16_runs
    assert record["precision"] == "bf16" and model._core.precision == "bf16"
    assert history["loss"] == [e["loss"] for e in record["history"]]
    names = ["dense/kernel", "dense/bias", "dense_1/kernel", "dense_1/bias"]
    for name, w in zip(names, model.get_weights()):
        np.testing.assert_array_equal(saved[name], w, err_msg=name)
    # ... and not fp32's (the CLI's fp32 run: same data, seed and first epoch).
    fp32_record, _ = cli_run
    assert history["loss"][0] != fp32_record["history"][0]["loss"]
