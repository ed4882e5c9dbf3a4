"""`python -m crossover script.py`: an unchanged TensorFlow/Keras script runs on crossover, as
`python script.py` would run it (argv, __name__, sys.path[0], exit status, traceback)."""

import os
import subprocess
import sys
import textwrap

import pytest


def run(tmp_path, source, *args, name="script.py", options=()):
    script = tmp_path / name
    script.write_text(textwrap.dedent(source))
    return subprocess.run(
        [sys.executable, "-m", "crossover", *options, str(script), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "CROSSOVER_THREADS": "1"},
        timeout=300,
    )


def test_tensorflow_and_keras_imports_are_crossovers_modules(tmp_path):
    r = run(
        tmp_path,
        """
        import sys
        import tensorflow as tf
        import keras
        import tensorflow.keras.backend as K
        from tensorflow import keras as tfk
        from tensorflow.keras.layers import Dense
        from tensorflow.keras import layers, models
        from keras import layers as klayers
        from keras.models import Sequential
        from keras.utils import to_categorical
        from tensorflow.keras.optimizers.schedules import ExponentialDecay
        from keras.optimizers import Adam
        import crossover
        assert tf is crossover and keras is crossover.keras and tfk is keras
        assert K is crossover.keras.backend and Dense is crossover.keras.layers.Dense
        assert layers is klayers and Sequential is crossover.keras.Sequential
        assert ExponentialDecay is crossover.keras.optimizers.schedules.ExponentialDecay
        assert crossover.__spec__.name == "crossover"  # the module keeps its own spec
        print("ok", tf.__version__, keras.__version__, tf.version.VERSION)
        """,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ok", "2.21.0", "3.15.1", "2.21.0"]
    said = [l for l in r.stderr.splitlines() if l.startswith("crossover:")]
    assert (
        len(said) == 1
        and "tensorflow and keras are crossover" in said[0]
        and "--supported" in said[0]
    )


def test_the_script_runs_as_main_with_its_argv_and_folder_first_on_the_path(tmp_path):
    (tmp_path / "helper_module.py").write_text("VALUE = 41\n")
    r = run(
        tmp_path,
        """
        import sys
        import helper_module
        print(__name__, sys.argv[1:], helper_module.VALUE + 1, __file__.endswith("script.py"))
        """,
        "--epochs",
        "3",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "__main__ ['--epochs', '3'] 42 True"
    assert r.stderr == ""  # no tensorflow import: nothing said


def test_the_exit_status_is_the_scripts(tmp_path):
    r = run(tmp_path, "import sys\nsys.exit(3)\n")
    assert r.returncode == 3


def test_an_uncaught_exception_is_pythons_traceback_and_status_1(tmp_path):
    r = run(
        tmp_path,
        """
        def f():
            raise RuntimeError("boom from the script")
        f()
        """,
    )
    assert r.returncode == 1
    assert r.stderr.startswith("Traceback (most recent call last):")
    assert (
        'script.py", line 3, in f' in r.stderr and "RuntimeError: boom from the script" in r.stderr
    )
    assert "runpy" not in r.stderr and "__main__.py" not in r.stderr


def test_a_module_crossover_lacks_is_a_module_not_found_error_saying_so(tmp_path):
    r = run(tmp_path, "from tensorflow.keras.applications import ResNet50\n")
    assert r.returncode == 1
    assert "ModuleNotFoundError" in r.stderr
    assert "tensorflow.keras.applications is not supported (yet)" in r.stderr
    assert "python -m crossover --supported" in r.stderr


def test_a_missing_script_is_pythons_error(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "crossover", str(tmp_path / "nope.py")],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and "can't open file" in r.stderr


def test_dash_c_and_dash_m_run_as_python_does(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "crossover",
            "-c",
            "import tensorflow as tf, sys; print(tf.__version__, sys.argv)",
            "a",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "2.21.0 ['-c', 'a']"
    (tmp_path / "pkg_main_test.py").write_text(
        "import keras, sys\nprint(__name__, keras.version())\n"
    )
    r = subprocess.run(
        [sys.executable, "-m", "crossover", "-m", "pkg_main_test"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "__main__ 3.15.1"


def test_supported_lists_the_modules_and_versions():
    r = subprocess.run(
        [sys.executable, "-m", "crossover", "--supported"], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "TensorFlow 2.21.0 / Keras 3.15.1" in out
    import crossover

    assert f"crossover {crossover.__crossover_version__}" in out
    for line in ("keras.layers:", "keras.losses:", "keras.utils:", "tf.data:", "tf.nn:"):
        assert line in out
    assert "Dense" in out and "to_categorical" in out and "softmax" in out


def test_no_arguments_is_a_usage_error():
    r = subprocess.run([sys.executable, "-m", "crossover"], capture_output=True, text=True)
    assert r.returncode == 2 and "usage: python -m crossover script.py" in r.stderr


@pytest.mark.parametrize("option", ["--nope", "-x"])
def test_an_unknown_option_is_a_usage_error(option):
    r = subprocess.run([sys.executable, "-m", "crossover", option], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown option" in r.stderr


def test_a_small_keras_script_trains_unchanged(tmp_path):
    r = run(
        tmp_path,
        """
        import numpy as np
        import tensorflow as tf
        from tensorflow import keras

        rng = np.random.default_rng(0)
        x = rng.random((64, 4), dtype=np.float32)
        y = (x.sum(axis=1) > 2).astype("int64")
        model = keras.Sequential([keras.Input(shape=(4,)), keras.layers.Dense(2, activation="softmax")])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        history = model.fit(x, y, epochs=2, verbose=0)
        probabilities = model(x[:3]).numpy()
        print(sorted(history.history), probabilities.shape)
        """,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['accuracy', 'loss'] (3, 2)"


def test_a_tensorflow_1_notebook_s_compat_v1_import_runs_its_keras(tmp_path):
    r = run(
        tmp_path,
        """
        import tensorflow.compat.v1 as tf
        import crossover
        tf.enable_eager_execution()
        assert tf.keras is crossover.keras and tf.nn is crossover.nn
        assert tf.__version__ == "2.21.0" and tf.executing_eagerly()
        model = tf.keras.models.Sequential([tf.keras.layers.Dense(2, activation=tf.nn.softmax)])
        try:
            tf.Session()
        except AttributeError as e:
            print("refused:", e)
        """,
    )
    assert r.returncode == 0, r.stderr
    assert "compat.v1.Session is not supported (yet)" in r.stdout
    assert "not TensorFlow 1 graphs" in r.stdout
