"""Writes tests/data/keras/small_mixed_bfloat16_keras3.json: the config.json inside the .keras
archive that Keras 3's model.save writes for the seed's SMALL model under the mixed_bfloat16
policy, in the Keras mixed precision guide's pattern (the softmax as its own float32 Activation),
compiled with Adam. Each layer's "dtype" is Keras 3's DTypePolicy object; the InputLayer's is the
plain "float32" of its input. tests/model_io_test.cpp, tests/cli_test.cpp and
tests/python/test_mixed_precision.py read it. Not run by the tests (CI has no TensorFlow); run
by hand with any Python that has Keras 3:

    KERAS_BACKEND=torch /work/main/bench/peers/.venv/bin/python \\
        tests/data/keras/make_mixed_precision.py

(Keras 3.15.1 wrote the committed file; the model's layers and their policies do not depend on
the backend.)
"""

import json
import os
import tempfile
import zipfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402

HERE = Path(__file__).resolve().parent


def main() -> None:
    keras.mixed_precision.set_global_policy("mixed_bfloat16")
    model = keras.Sequential(
        [
            keras.Input((28, 28)),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(10),
            keras.layers.Activation("softmax", dtype="float32"),
        ],
        name="small_mixed_bfloat16",
    )
    model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.keras"
        model.save(path)
        with zipfile.ZipFile(path) as archive:
            config = json.loads(archive.read("config.json"))
    out = HERE / "small_mixed_bfloat16_keras3.json"
    out.write_text(json.dumps(config, indent=1) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main()
