"""C-contiguous float32 arrays reach the library without a copy; other dtypes and layouts are
converted first. Neither is observable: the results are the same and the inputs are unchanged."""

from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers, models

MNIST_10K = Path(__file__).resolve().parents[2] / "data" / "mnist-10k" / "mnist-10k.npz"


@pytest.fixture(scope="module")
def data():
    with np.load(MNIST_10K) as d:
        return (d["x_train"][:256] / 255.0).astype(np.float32), d["y_train"][:256]


def compiled() -> keras.Sequential:
    model = keras.Sequential(
        [layers.Flatten(input_shape=(28, 28)), layers.Dense(10, activation="softmax")]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def test_a_c_contiguous_float32_array_is_passed_on_as_itself(data):
    x, _ = data
    assert models._floats(x, "x") is x
    assert not np.shares_memory(models._floats(np.asfortranarray(x), "x"), x)


def test_fit_evaluate_and_predict_give_the_same_numbers_on_any_layout_and_keep_the_input(data):
    x, y = data
    kept = x.copy()
    others = [x.astype(np.float64), np.asfortranarray(x), x[:, ::-1, :][:, ::-1, :]]
    results = []
    for xs in [x] + others:
        keras.utils.set_random_seed(0)  # each model draws fresh weights: the same for each
        model = compiled()
        history = model.fit(xs, y, epochs=2, verbose=0)
        results.append(
            (
                history.history["loss"],
                model.evaluate(xs, y, verbose=0),
                model.predict(xs, verbose=0),
            )
        )
    for loss, evaluated, predicted in results[1:]:
        assert loss == results[0][0]
        assert evaluated == results[0][1]
        np.testing.assert_array_equal(predicted, results[0][2])
    np.testing.assert_array_equal(x, kept)


# A fresh Python that trains nothing (epochs=0: fit only sets up) on 200 MB of float32 rows, and
# prints how much its peak memory grew during fit, in MiB.
_SET_UP_ONLY = """
import resource, sys
import numpy as np
from crossover import keras
x = np.ones((50000, 1000), np.float32)  # 200 MB, every page touched
y = np.zeros((50000, 1), np.float32)
model = keras.Sequential([keras.layers.Input((1000,)), keras.layers.Dense(1)])
model.compile(optimizer="sgd", loss="mse")
model.predict(x[:8], verbose=0)  # the engine's own buffers, allocated before the measurement
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
model.fit(x, y, epochs=0, verbose=0)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print((after - before) / 1024)
"""


def test_the_cpu_reads_a_float32_training_set_in_place_without_copying_it():
    import os
    import subprocess
    import sys

    # One thread given: no measurement (it would allocate models of its own).
    env = dict(os.environ, CROSSOVER_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-c", _SET_UP_ONLY], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr
    grown_mib = float(out.stdout.strip().splitlines()[-1])
    # A copy of the rows would add their 191 MiB to the peak; in place, fit's set-up adds the
    # shuffle order (0.2 MiB) and its bookkeeping.
    assert grown_mib < 64, grown_mib
