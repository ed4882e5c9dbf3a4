"""Shared pieces of the peer benchmarks (pytorch_mlp.py, keras_mlp.py).

Only the standard library and numpy: the command line, the IDX and .npz readers and the JSON line.
Models: the seed's SMALL and BIG MLPs (batch 32) and Keras's "Simple MNIST convnet" (issue 12:
Conv2D(32, 3, relu), MaxPooling2D(2), Conv2D(64, 3, relu), MaxPooling2D(2), Flatten,
Dropout(0.5), Dense(10, softmax); batch 128).
Each peer imports this before its framework, so the thread-count environment variables
(OMP/OpenBLAS/MKL) can be set before the framework's libraries read them.
"""

import argparse
import gzip
import json
import math
import os
import sys

import numpy as np

DEFAULT_DATA = "/usr/share/datasets/fashion-mnist"
BATCH_SIZE = 32  # the seed's MLPs (Keras's default)
CONVNET_BATCH_SIZE = 128  # Keras's "Simple MNIST convnet" example
# Steps left out of the "steady" per-epoch estimate (one-time costs: tracing, first allocations).
WARMUP_STEPS = 10

IDX_FILES = {
    "x_train": ("train-images-idx3-ubyte.gz", 2051),
    "y_train": ("train-labels-idx1-ubyte.gz", 2049),
    "x_test": ("t10k-images-idx3-ubyte.gz", 2051),
    "y_test": ("t10k-labels-idx1-ubyte.gz", 2049),
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def parse_args(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--model", choices=("small", "big", "convnet"), default="small")
    p.add_argument("--data", default=DEFAULT_DATA,
                   help="folder with the four IDX .gz files, or a Keras-style .npz "
                        "(x_train, y_train, x_test, y_test; e.g. data/mnist-10k/mnist-10k.npz) "
                        "(default %(default)s)")
    p.add_argument("--batch-size", type=int, default=None,
                   help=f"default {BATCH_SIZE} ({CONVNET_BATCH_SIZE} for the convnet)")
    p.add_argument("--validation-split", type=float, default=0.0,
                   help="hold out the last fraction of the training set (Keras's "
                        "validation_split), evaluated after each epoch, untimed")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--threads", type=int, default=None,
                   help="intra-op threads (default: the framework's own choice)")
    p.add_argument("--max-steps", type=int, default=None,
                   help="run and time only the first S steps of each epoch, and "
                        "extrapolate seconds per epoch from them")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--no-item", action="store_true",
                   help="do not read the loss back every step (PyTorch only; Keras ignores it)")
    p.add_argument("--autocast", choices=("bf16",), default=None,
                   help="PyTorch only: the forward pass and loss under torch.autocast with this "
                        "dtype (mixed precision: bf16 products, fp32 weights and optimizer)")
    a = p.parse_args()
    if a.epochs < 1:
        p.error("--epochs must be >= 1")
    if a.threads is not None and a.threads < 1:
        p.error("--threads must be >= 1")
    if a.max_steps is not None and a.max_steps < 1:
        p.error("--max-steps must be >= 1")
    if a.batch_size is None:
        a.batch_size = CONVNET_BATCH_SIZE if a.model == "convnet" else BATCH_SIZE
    if a.batch_size < 1:
        p.error("--batch-size must be >= 1")
    if not 0.0 <= a.validation_split < 1.0:
        p.error("--validation-split must be in [0, 1)")
    return a


def limit_threads_env(threads):
    """Must run before the framework is imported: OpenMP, OpenBLAS and MKL read these at load."""
    if threads is None:
        return
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)


def read_idx(path, magic):
    with gzip.open(path, "rb") as f:
        buf = f.read()
    if len(buf) < 8:
        raise ValueError(f"{path}: too short for an IDX file")
    got = int.from_bytes(buf[0:4], "big")
    if got != magic:
        raise ValueError(f"{path}: IDX magic {got} (0x{got:08x}), expected {magic}")
    ndim = buf[3]
    header = 4 + 4 * ndim
    dims = [int.from_bytes(buf[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim)]
    if header != (16 if magic == 2051 else 8):
        raise ValueError(f"{path}: unexpected IDX header length {header}")
    count = int(np.prod(dims))
    if len(buf) - header != count:
        raise ValueError(f"{path}: {len(buf) - header} data bytes, header says {count}")
    return np.frombuffer(buf, dtype=np.uint8, offset=header).reshape(dims)


def load_npz(path):
    with np.load(path) as d:
        missing = [k for k in IDX_FILES if k not in d]
        if missing:
            raise ValueError(f"{path}: no {', '.join(missing)} (expected Keras's mnist.npz layout)")
        return {k: d[k] for k in IDX_FILES}


def load_data(folder):
    """Returns x_train, y_train, x_test, y_test: images float32 in [0,1] (N,28,28), labels int64."""
    if folder.endswith(".npz"):
        out = load_npz(folder)
        x_train = out["x_train"].astype(np.float32) / np.float32(255.0)
        x_test = out["x_test"].astype(np.float32) / np.float32(255.0)
        return x_train, out["y_train"].astype(np.int64), x_test, out["y_test"].astype(np.int64)
    out = {}
    for key, (name, magic) in IDX_FILES.items():
        path = os.path.join(folder, name)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path} not found (expected the four IDX .gz files in {folder})")
        out[key] = read_idx(path, magic)
    for split in ("train", "test"):
        x, y = out["x_" + split], out["y_" + split]
        if x.ndim != 3 or x.shape[0] != y.shape[0]:
            raise ValueError(f"{split}: images {x.shape} and labels {y.shape} do not match")
    x_train = out["x_train"].astype(np.float32) / np.float32(255.0)
    x_test = out["x_test"].astype(np.float32) / np.float32(255.0)
    return x_train, out["y_train"].astype(np.int64), x_test, out["y_test"].astype(np.int64)


def load_data_or_exit(folder):
    """load_data, or one line on stderr and exit status 2 for missing or malformed files."""
    try:
        return load_data(folder)
    except (OSError, ValueError, EOFError) as e:
        log(f"error: {e}")
        sys.exit(2)


def steps_per_epoch(n, batch_size=BATCH_SIZE):
    return math.ceil(n / batch_size)


def split_validation(x, y, fraction):
    """Keras's validation_split: the last fraction of (x, y), taken before any shuffling."""
    if fraction <= 0:
        return x, y, None, None
    n_train = math.ceil(x.shape[0] * (1.0 - fraction))
    return x[:n_train], y[:n_train], x[n_train:], y[n_train:]


def epoch_estimate(elapsed, warm_elapsed, steps_run, steps_full):
    """Seconds for a full epoch, and the steady-state seconds per epoch (warm-up left out).

    elapsed: seconds for the steps_run steps that ran; warm_elapsed: seconds for the first
    WARMUP_STEPS of them (None when fewer ran). A full epoch is measured as is; a partial one
    (--max-steps) is extrapolated as warm-up + steady rate x the remaining steps, so a one-time
    cost (Keras traces its train function in the first step) is counted once, not scaled up.
    """
    steady = None
    if warm_elapsed is not None and steps_run > 2 * WARMUP_STEPS:
        rate = (elapsed - warm_elapsed) / (steps_run - WARMUP_STEPS)
        steady = rate * steps_full
        if steps_run < steps_full:
            return warm_elapsed + rate * (steps_full - WARMUP_STEPS), steady
    return elapsed * steps_full / steps_run, steady


EXTRAPOLATION = (f"partial epoch: time of the first {WARMUP_STEPS} steps + the mean step time of "
                 f"the rest x the remaining steps of a full epoch")


def emit(obj):
    print(json.dumps(obj), flush=True)
