"""Writes tests/data/keras/time_distributed_keras3.json, time_distributed.weights.h5 and
time_distributed_reference.safetensors: a Keras 3 model with TimeDistributed layers as Keras 3
itself writes and computes it (issue 38, item 3: a layer built from another). Not run by the tests
(CI has no TensorFlow); run by hand with any Python that has Keras 3 and TensorFlow:

    /work/main/bench/peers/.venv/bin/python tests/data/keras/make_time_distributed.py

The model: Sequential([Input((5, 4)), TimeDistributed(Dense(3, relu)),
TimeDistributed(Dropout(0.5)), TimeDistributed(Dense(2, use_bias=False)), Flatten(),
Dense(3, softmax)]). Its weights and the input come from numpy's default_rng(20261207), so they are
the same on every run. Tensors:

    x   (6, 5, 4), the input batch
    y   (6, 3), model.predict(x): Keras's own output

The .weights.h5 keeps the inner Dense layers' variables under layers/time_distributed/layer/vars
and layers/time_distributed_2/layer/vars (each wrapper's own vars group is empty).
"""

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

import keras  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from make_batchnorm import write_safetensors  # noqa: E402

L = keras.layers


def main() -> None:
    rng = np.random.default_rng(20261207)
    model = keras.Sequential(
        [
            keras.Input((5, 4)),
            L.TimeDistributed(L.Dense(3, activation="relu")),
            L.TimeDistributed(L.Dropout(0.5)),
            L.TimeDistributed(L.Dense(2, use_bias=False)),
            L.Flatten(),
            L.Dense(3, activation="softmax"),
        ]
    )
    model.set_weights(
        [rng.standard_normal(w.shape).astype(np.float32) for w in model.get_weights()]
    )
    x = rng.standard_normal((6, 5, 4)).astype(np.float32)
    y = model.predict(x, verbose=0)
    (HERE / "time_distributed_keras3.json").write_text(model.to_json())
    model.save_weights(str(HERE / "time_distributed.weights.h5"))
    write_safetensors(
        HERE / "time_distributed_reference.safetensors",
        {"x": x, "y": y},
        {"keras": keras.__version__},
    )


if __name__ == "__main__":
    main()
