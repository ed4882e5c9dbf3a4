"""fit's and evaluate's text goes through Python's sys.stdout, as Keras's does."""

import contextlib
import io
import re
from pathlib import Path

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers, models

MNIST_10K = Path(__file__).resolve().parents[2] / "data" / "mnist-10k" / "mnist-10k.npz"
# The final line of an epoch: "10/10 [=====...] - 0s 2ms/step - loss: 2.1 - accuracy: 0.3".
FINAL_LINE = re.compile(
    r"(\d+)/\1 \[=+\] - \d+[mu]?s \d+[mu]?s/step - loss: \d+\.\d{4} - accuracy: \d\.\d{4}"
)


@pytest.fixture(scope="module")
def data():
    with np.load(MNIST_10K) as d:
        return d["x_train"][:320] / 255.0, d["y_train"][:320]


def compiled() -> keras.Sequential:
    model = keras.Sequential(
        [layers.Flatten(input_shape=(28, 28)), layers.Dense(10, activation="softmax")]
    )
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def test_fit_prints_the_epoch_lines_and_progress_bar_to_sys_stdout(data, capsys):
    x, y = data
    compiled().fit(x, y, epochs=2)
    out = capsys.readouterr().out
    assert "Epoch 1/2\n" in out and "Epoch 2/2\n" in out
    assert len(FINAL_LINE.findall(out)) == 2, out


def test_fit_output_follows_a_redirection_of_sys_stdout_and_skips_the_c_stdout(data, capfd):
    x, y = data
    model = compiled()
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        model.fit(x, y, epochs=1)
        model.evaluate(x, y)
    text = buffer.getvalue()
    assert text.startswith("Epoch 1/1\n")
    assert len(FINAL_LINE.findall(text)) == 2, text  # fit's epoch, then evaluate's line
    assert capfd.readouterr().out == ""  # nothing written to file descriptor 1 directly


def test_verbose_0_prints_nothing(data, capsys):
    x, y = data
    model = compiled()
    model.fit(x, y, epochs=1, verbose=0)
    model.evaluate(x, y, verbose=0)
    assert capsys.readouterr().out == ""


def test_the_bar_is_redrawn_in_place_by_keras_3s_rule(data, monkeypatch):
    # Keras 3's Progbar redraws when stdout is a terminal, in Jupyter, or on POSIX ("posix" in
    # sys.modules). Without any of them (Windows, redirected) each epoch gets its lines only.
    x, y = data
    assert models._dynamic_display()  # this is a POSIX Python
    monkeypatch.delitem(__import__("sys").modules, "posix")
    monkeypatch.delenv("PYCHARM_HOSTED", raising=False)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert not models._dynamic_display()
        compiled().fit(x, y, epochs=1)
    assert "\r" not in buffer.getvalue()


def test_summary_prints_through_print(capsys):
    compiled().summary()
    out = capsys.readouterr().out
    assert "Total params: 7,850 " in out, out
