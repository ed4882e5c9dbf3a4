"""The CPU thread count of Python's fit: by default the CLI's `--threads 0` (the fastest count
here, measured on copies of the model, or saved by an earlier run of either), pinned by
tf.config.threading.set_intra_op_parallelism_threads or $CROSSOVER_THREADS.

Each test keeps the saved choices in its own CROSSOVER_PROFILE_DIR."""

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import crossover as tf
from crossover import _threads

from test_cli_identity import crossover_binary

MNIST_10K = Path(__file__).resolve().parents[2] / "data" / "mnist-10k" / "mnist-10k.npz"


@pytest.fixture(autouse=True)
def profiles(tmp_path, monkeypatch):
    folder = tmp_path / "profiles"
    monkeypatch.setenv("CROSSOVER_PROFILE_DIR", str(folder))
    monkeypatch.delenv("CROSSOVER_THREADS", raising=False)
    monkeypatch.setattr(_threads, "_set", None)
    return folder


@pytest.fixture(scope="module")
def data():
    with np.load(MNIST_10K) as d:
        return (d["x_train"][:2000] / 255.0).astype(np.float32), d["y_train"][:2000]


def small() -> "tf.keras.Sequential":
    """The seed's SMALL model, as the CLI's --model=small builds it."""
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


def saved_choices(profiles: Path) -> dict:
    files = list((profiles / "threads").glob("*.json"))
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


def pin_saved_choices_to_one_thread(profiles: Path) -> None:
    """One thread: a saved choice that always holds (recheck_threads has nothing to compare)."""
    path = next((profiles / "threads").glob("*.json"))
    doc = json.loads(path.read_text())
    for entry in doc["choices"].values():
        entry["threads"] = 1
    path.write_text(json.dumps(doc))


def test_the_first_fit_measures_the_fastest_count_and_saves_it_as_the_cli_does(data, profiles):
    x, y = data
    model = small()
    model.fit(x, y, epochs=1, verbose=0)
    threads, chosen_by = model._threads_choice
    assert chosen_by == "measurement"
    (entry,) = saved_choices(profiles)["choices"].values()
    assert entry["threads"] == threads and entry["what"] == "sequential at batch 32"
    assert [t["threads"] for t in entry["trials"]][0] == 1
    # Measured once per compile: the next fit keeps it.
    model.fit(x, y, epochs=1, verbose=0)
    assert model._threads_choice == (threads, "measurement")


def test_a_saved_choice_is_reused_and_shared_with_the_cli(data, profiles, tmp_path):
    x, y = data
    small().fit(x, y, epochs=1, verbose=0)
    pin_saved_choices_to_one_thread(profiles)
    model = small()
    model.evaluate(x, y, verbose=0)  # the first evaluate chooses too
    assert model._threads_choice == (1, "saved measurement")
    # The command line finds the choice Python saved: the same key for the same model and batch.
    record = tmp_path / "run.json"
    env = dict(os.environ, HOME=str(tmp_path))
    env.pop("CROSSOVER_DATA", None)
    subprocess.run(
        [str(crossover_binary()), "train", "--data=mnist-10k", "--model=small", "--epochs=0",
         "--threads=0", "--quiet", f"--json={record}"],
        check=True, env=env, cwd=tmp_path, timeout=600,
    )  # fmt: skip
    choice = json.loads(record.read_text())["threads_choice"]
    assert (choice["threads"], choice["chosen_by"]) == (1, "saved measurement")


def test_the_environment_pins_a_count_and_nothing_is_measured(data, profiles, monkeypatch):
    x, y = data
    monkeypatch.setenv("CROSSOVER_THREADS", "3")
    model = small()
    model.fit(x, y, epochs=1, verbose=0)
    assert model._threads_choice == (3, "user")
    assert not (profiles / "threads").exists()


def test_tf_config_threading_pins_a_count_over_the_environment(data, monkeypatch):
    x, y = data
    monkeypatch.setenv("CROSSOVER_THREADS", "3")
    tf.config.threading.set_intra_op_parallelism_threads(2)
    assert tf.config.threading.get_intra_op_parallelism_threads() == 2
    model = small()
    model.fit(x, y, epochs=1, verbose=0)
    assert model._threads_choice == (2, "user")
    tf.config.threading.set_intra_op_parallelism_threads(0)  # back to measuring
    assert small()._threads_choice is None


def test_a_bad_count_is_a_value_error(monkeypatch):
    monkeypatch.setenv("CROSSOVER_THREADS", "many")
    with pytest.raises(ValueError, match="CROSSOVER_THREADS"):
        small()
    with pytest.raises(ValueError, match="set_intra_op_parallelism_threads"):
        tf.config.threading.set_intra_op_parallelism_threads(-1)


def test_measuring_keeps_the_weights_set_before_the_first_fit(data):
    x, y = data
    model = small()
    weights = [np.full_like(w, 0.01) for w in model.get_weights()]
    model.set_weights(weights)
    model.evaluate(x[:64], y[:64], verbose=0)  # measures, compiles again at the count
    assert model._threads_choice[1] == "measurement"
    for got, want in zip(model.get_weights(), weights):
        np.testing.assert_array_equal(got, want)
