"""Writes the Keras-made reference files of tests/data/keras/ with real Keras 3, and checks that
Keras reads what crossover writes. Not run by the tests (CI has no TensorFlow); run by hand:

    KERAS=/work/main/bench/peers/.venv/bin/python      # Keras 3 + TensorFlow, with h5py
    $KERAS tests/data/keras/make.py                    # writes the reference files
    PYTHONPATH=build/python $KERAS tests/data/keras/make.py --check   # + the crossover checks

The crossover checks need crossover's module built for the same Python (build/python, made by
scripts/build with build/venv: both are Debian's Python 3.11). Every weight is set from a fixed
generator, so the files are the same on every run.
"""

import argparse
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402

import keras  # noqa: E402

HERE = Path(__file__).resolve().parent


def tiny_keras() -> keras.Sequential:
    """Every layer class crossover supports, a Dense without bias, and three Dense layers (so
    the groups dense, dense_1, dense_2 appear)."""
    return keras.Sequential(
        [
            keras.Input((2, 3)),
            keras.layers.Flatten(),
            keras.layers.Dense(5, activation="relu"),
            keras.layers.Dropout(0.25),
            keras.layers.Dense(4, use_bias=False),
            keras.layers.Dense(3),
            keras.layers.Activation("softmax"),
        ],
        name="tiny",
    )


def small_keras() -> keras.Sequential:
    """The seed's SMALL model as a Keras 3 user writes it."""
    return keras.Sequential(
        [
            keras.Input((28, 28)),
            keras.layers.Flatten(),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(10, activation="softmax"),
        ]
    )


def fixed_weights(model, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(w.shape).astype(np.float32) * 0.5 for w in model.get_weights()]


def write_references() -> None:
    model = tiny_keras()
    weights = fixed_weights(model, 11)
    model.set_weights(weights)
    model.save_weights(HERE / "tiny.weights.h5")
    np.savez(HERE / "tiny_weights.npz", *weights)  # arr_0, arr_1, ... in get_weights() order
    (HERE / "tiny_keras3.json").write_text(model.to_json())
    # The same weights in Keras 2's legacy HDF5 layout (what tf.keras 2 save_weights("x.h5")
    # wrote: layers at the root, listed in its layer_names attribute), which crossover refuses.
    import h5py
    from keras.src.legacy.saving import legacy_h5_format

    with h5py.File(HERE / "tiny_keras2_legacy.h5", "w") as f:
        legacy_h5_format.save_weights_to_hdf5_group(f, model)

    # Trained one step: the file then also holds the optimizer's variables (/optimizer/vars).
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    x = np.random.default_rng(12).standard_normal((8, 2, 3)).astype(np.float32)
    model.fit(x, np.arange(8) % 3, epochs=1, batch_size=8, shuffle=False, verbose=0)
    model.save_weights(HERE / "tiny_trained.weights.h5")
    np.savez(HERE / "tiny_trained_weights.npz", *model.get_weights())

    small = small_keras()
    small.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    (HERE / "small_real_keras3.json").write_text(small.to_json())
    print(
        f"keras {keras.__version__}: wrote tiny.weights.h5, tiny_trained.weights.h5, "
        "tiny_weights.npz, tiny_trained_weights.npz, tiny_keras3.json, tiny_keras2_legacy.h5, "
        "small_real_keras3.json"
    )


def check_crossover() -> None:
    """crossover's .weights.h5 and to_json() read by Keras; Keras's read by crossover."""
    from crossover import keras as ck

    def same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
        return len(a) == len(b) and all(
            x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b)
        )

    with tempfile.TemporaryDirectory() as tmp:
        for name, make_keras, seed in (("tiny", tiny_keras, 21), ("SMALL", small_keras, 22)):
            theirs = make_keras()
            ours = ck.models.model_from_json(theirs.to_json())
            weights = fixed_weights(theirs, seed)
            ours.set_weights(weights)
            path = os.path.join(tmp, f"{name}.weights.h5")
            ours.save_weights(path)
            theirs.load_weights(path)  # Keras reads crossover's file
            assert same(theirs.get_weights(), weights), f"{name}: Keras read other weights"

            back = ck.models.model_from_json(theirs.to_json())
            back.load_weights(path)  # crossover reads its own file back, bit for bit
            assert same(back.get_weights(), weights), f"{name}: crossover read other weights"

            keras_path = os.path.join(tmp, f"{name}-keras.weights.h5")
            theirs.save_weights(keras_path)
            back.set_weights(fixed_weights(theirs, seed + 100))
            back.load_weights(keras_path)  # crossover reads Keras's file
            assert same(back.get_weights(), weights), f"{name}: crossover read Keras's wrongly"

            # Keras rebuilds crossover's JSON and loads the weights into it.
            rebuilt = keras.models.model_from_json(ours.to_json())
            rebuilt.load_weights(path)
            assert same(rebuilt.get_weights(), weights), f"{name}: Keras's model_from_json"
            x = np.random.default_rng(seed).standard_normal((4, *theirs.input_shape[1:]))
            diff = np.max(np.abs(rebuilt.predict(x, verbose=0) - ours.predict(x)))
            assert diff < 1e-5, f"{name}: predictions differ by {diff}"
            print(
                f"{name}: Keras {keras.__version__} loads crossover's .weights.h5 and to_json() "
                f"exactly; crossover reads Keras's and its own exactly; predict max |diff| "
                f"{diff:.2e}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="also run the crossover checks")
    args = parser.parse_args()
    write_references()
    if args.check:
        check_crossover()


if __name__ == "__main__":
    sys.exit(main())
