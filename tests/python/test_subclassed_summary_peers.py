"""summary() of a subclassed model against Keras 3.15 itself, character for character: before the
model is built (every layer "?", "0 (unbuilt)" unless Keras builds it when made), once called on
a keras.Input (which builds it, as Keras builds a model at its first call) and after fit; a
layer call() never uses stays unbuilt. Keras runs in a subprocess with the peers' Python
(skipped without one)."""

import contextlib
import io
from pathlib import Path

import numpy as np

from crossover import keras
from crossover.keras import layers
from test_keras_archive_peers import run_keras

# Written once for both sides (`keras` and `layers` are each side's).
BUILD = """
class Classifier(keras.Model):
    def __init__(self):
        super().__init__()
        self.conv = layers.Conv2D(4, 3, padding="same", activation="relu")
        self.pool = layers.MaxPooling2D()
        self.flat = layers.Flatten()
        self.hidden = layers.Dense(8, activation="relu")
        self.drop = layers.Dropout(0.5)
        self.unused = layers.Dense(5)
        self.head = keras.Sequential([layers.Dense(6, activation="relu"), layers.Dense(3)])

    def call(self, x, training=False):
        x = self.flat(self.pool(self.conv(x)))
        return self.head(self.drop(self.hidden(x), training=training))


def summaries(keras, np):
    texts = []
    model = Classifier()
    model.summary(line_length=70, print_fn=texts.append)
    out = model(keras.Input((6, 6, 1)))
    texts.append(str((list(out.shape), model.built)))
    model.summary(line_length=70, print_fn=texts.append)
    trained = Classifier()
    trained.compile(optimizer="adam", loss="mse")
    trained.fit(np.ones((4, 6, 6, 1), "float32"), np.ones((4, 3), "float32"), verbose=0)
    trained.summary(line_length=70, print_fn=texts.append)
    return texts
"""

KERAS_SIDE = """
import json
import warnings
import numpy as np
import keras
from keras import layers
warnings.simplefilter("ignore")
{build}
print(json.dumps(summaries(keras, np)))
"""


def test_summary_of_a_subclassed_model_as_keras_prints_it(tmp_path: Path) -> None:
    theirs = run_keras(KERAS_SIDE.format(build=BUILD), tmp_path)
    scope = {"keras": keras, "layers": layers}
    exec(BUILD, scope)
    ours = scope["summaries"](keras, np)
    assert len(ours) == len(theirs)
    for mine, keras_text in zip(ours, theirs):
        assert mine.rstrip("\n") == keras_text.rstrip("\n"), f"\n{mine}\n---\n{keras_text}"


def test_summary_before_the_model_is_built() -> None:
    class Small(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = layers.Dense(2)
            self.dropout = layers.Dropout(0.1)

        def call(self, x):
            return self.dropout(self.dense(x))

    model = Small()
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        model.summary()
    text = out.getvalue()
    assert "dense (Dense)" in text and "0 (unbuilt)" in text and "Total params: 0" in text
    assert not model.built  # summary builds nothing
