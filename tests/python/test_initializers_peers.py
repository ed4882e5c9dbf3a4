"""keras.initializers against Keras 3.15 itself: each initializer's serialized form in a model's
to_json is Keras's, and Keras's to_json of a model with them loads here with the same ones.
Keras runs in a subprocess with the peers' Python ($CROSSOVER_PEERS_PYTHON, else
bench/peers/.venv/bin/python); without one, skipped with a message saying so."""

import json
from pathlib import Path

from crossover import keras
from crossover.keras import initializers, layers
from test_keras_archive_peers import run_keras

# (argument as the script writes it, in Python source) for Dense's kernel_initializer.
KERNELS = [
    '"he_normal"',
    '"lecun_normal"',
    '"glorot_normal"',
    '"he_uniform"',
    '"orthogonal"',
    "initializers.VarianceScaling(scale=2.0, mode='fan_avg', distribution='uniform')",
    "initializers.RandomNormal(mean=0.1, stddev=0.2, seed=4)",
    "initializers.RandomUniform(-0.1, 0.3)",
    "initializers.TruncatedNormal(stddev=0.02)",
    "initializers.Constant(0.25)",
    '"identity"',
]

KERAS_JSON = """
    import json
    from keras import Sequential, Input, initializers, layers
    out = []
    for kernel in [{kernels}]:
        model = Sequential([Input((4,)), layers.Dense(4, kernel_initializer=kernel,
                                                     bias_initializer="ones")])
        out.append(model.to_json())
    print(json.dumps(out))
"""


def dense_config(text: str) -> dict:
    return next(l for l in json.loads(text)["config"]["layers"] if l["class_name"] == "Dense")[
        "config"
    ]


def test_initializers_serialize_as_keras_and_keras_files_load(tmp_path: Path) -> None:
    keras_json = run_keras(KERAS_JSON.format(kernels=", ".join(KERNELS)), tmp_path)
    for source, theirs in zip(KERNELS, keras_json):
        kernel = eval(source, {"initializers": initializers})
        ours = keras.Sequential(
            [keras.Input((4,)), layers.Dense(4, kernel_initializer=kernel, bias_initializer="ones")]
        ).to_json()
        for field in ("kernel_initializer", "bias_initializer"):
            assert dense_config(ours)[field] == dense_config(theirs)[field], source
        loaded = keras.models.model_from_json(theirs)
        assert dense_config(loaded.to_json())["kernel_initializer"] == dense_config(theirs)[
            "kernel_initializer"
        ], source
