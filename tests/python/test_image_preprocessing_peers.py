"""tf.keras.preprocessing.image against Keras 3.15 itself (TensorFlow 2.21's tf.keras): for the
same seeds and arguments (rotation, shifts, shear, zoom, flips, rescale, channel shifts, sample-
and feature-wise normalization, ZCA, fill modes, channels first, subsets), ImageDataGenerator.flow
gives Keras's batches (by index, after on_epoch_end, and through next() across a pass), fit gives
Keras's statistics, and the module's random_* / apply_* functions Keras's images. One driver
(DRIVER, below) runs on both sides. Keras runs in a subprocess with the peers' Python
(test_keras_archive_peers.run_keras); without one, or without SciPy on either side, skipped with a
message saying so."""

import sys
import textwrap

import numpy as np
import pytest

from crossover.keras.preprocessing import image
from test_keras_archive_peers import run_keras

# Values are in [0, 255]: float32 there is exact to about 1.5e-5, so the bound is relative. (With
# the same numpy and SciPy on both sides, 2.4.6 and 1.17.1, every array is bit-identical.)
TOLERANCE = 1e-6

# Run by both sides with their own `image` module: a case's arrays (fit's statistics, then each
# batch's x, y and sample_weight: batches 0, 1 and the last by index, batch 0 after on_epoch_end,
# then four next() across the end of a pass), and the module functions' images.
DRIVER = """
    import numpy as np

    def batches(image, folder, gen, flow, fit=None, uint8=False, small=False):
        x = np.load(f"{folder}/x.npy")
        x = x[:, :2, :2, :1] if small else x
        x = x.transpose(0, 3, 1, 2) if gen.get("data_format") == "channels_first" else x
        x = x.astype("uint8") if uint8 else x
        y, w = np.arange(len(x)), np.linspace(0.5, 1.5, len(x))
        np.random.seed(1234)
        gen = dict(gen)
        if gen.get("preprocessing_function") == "halve":
            gen["preprocessing_function"] = lambda a: a * 0.5
        generator = image.ImageDataGenerator(**gen)
        out = {}
        if fit is not None:
            generator.fit(x, **fit)
            for name in ("mean", "std", "zca_whitening_matrix"):
                if getattr(generator, name) is not None:
                    out[name] = np.asarray(getattr(generator, name))
        it = generator.flow(x, y, sample_weight=w, **flow)
        got = [it[0], it[1], it[len(it) - 1]]
        it.on_epoch_end()
        got += [it[0]] + [next(it) for _ in range(4)]
        for i, batch in enumerate(got):
            out[f"{i}.x"], out[f"{i}.y"], out[f"{i}.w"] = batch
        return out

    def functions(image, folder):
        x = np.load(f"{folder}/x.npy")[0]
        first, last = x.transpose(2, 0, 1), dict(row_axis=0, col_axis=1, channel_axis=2)
        np.random.seed(7)
        out = {
            "rotation": image.random_rotation(first, 40),
            "rotation_last": image.random_rotation(x, 25, fill_mode="constant", cval=9.0, **last),
            "shift": image.random_shift(x, 0.2, 0.3, fill_mode="reflect", **last),
            "shear": image.random_shear(first, 30, fill_mode="wrap"),
            "zoom": image.random_zoom(x, (0.6, 1.4), interpolation_order=3, **last),
            "channel_shift": image.random_channel_shift(x, 30.0, channel_axis=2),
            "apply_channel_shift": image.apply_channel_shift(first, -12.5),
            "affine": image.apply_affine_transform(
                x, 15, 2, -1.5, 10, 0.9, 1.1, fill_mode="mirror", order=2, **last
            ),
        }
        generator = image.ImageDataGenerator(
            rotation_range=20, width_shift_range=0.1, zoom_range=0.1, horizontal_flip=True
        )
        out["random_transform"] = generator.random_transform(x, seed=3)
        params = generator.get_random_transform(x.shape, seed=5)
        keys = ("theta", "tx", "ty", "shear", "zx", "zy", "flip_horizontal", "flip_vertical")
        out["params"] = np.array([float(params[k]) for k in keys])
        return out
"""

# name: the driver's keyword arguments (gen: ImageDataGenerator's, flow: flow's, fit: fit's).
CASES = {
    "plain": dict(gen={}, flow=dict(batch_size=4, seed=1)),
    "rotation": dict(gen=dict(rotation_range=40), flow=dict(batch_size=4, seed=2)),
    "shift_fractions": dict(
        gen=dict(width_shift_range=0.2, height_shift_range=0.3), flow=dict(batch_size=4, seed=3)
    ),
    "shift_pixels": dict(
        gen=dict(width_shift_range=2, height_shift_range=[-3, 0, 3]),
        flow=dict(batch_size=4, seed=4),
    ),
    "shift_float_pixels": dict(
        gen=dict(width_shift_range=2.5, height_shift_range=1.5), flow=dict(batch_size=4, seed=4)
    ),
    "shear": dict(gen=dict(shear_range=25), flow=dict(batch_size=4, seed=5)),
    "zoom": dict(gen=dict(zoom_range=0.3), flow=dict(batch_size=4, seed=6)),
    "zoom_pair_cubic": dict(
        gen=dict(zoom_range=[0.8, 1.25], interpolation_order=3), flow=dict(batch_size=4, seed=6)
    ),
    "flips": dict(
        gen=dict(horizontal_flip=True, vertical_flip=True), flow=dict(batch_size=4, seed=7)
    ),
    "rescale_uint8": dict(gen=dict(rescale=1 / 255), flow=dict(batch_size=4, seed=8), uint8=True),
    "featurewise": dict(
        gen=dict(featurewise_center=True, featurewise_std_normalization=True),
        flow=dict(batch_size=4, seed=9),
        fit={},
    ),
    "featurewise_augmented": dict(
        gen=dict(featurewise_center=True, rotation_range=10, rescale=1 / 255),
        flow=dict(batch_size=4, seed=10),
        fit=dict(augment=True, rounds=2, seed=3),
    ),
    "samplewise_channel_shift": dict(
        gen=dict(samplewise_center=True, samplewise_std_normalization=True, channel_shift_range=15),
        flow=dict(batch_size=4, seed=11),
    ),
    "fill_constant": dict(
        gen=dict(rotation_range=30, fill_mode="constant", cval=0.5),
        flow=dict(batch_size=4, seed=12),
    ),
    "fill_reflect": dict(
        gen=dict(width_shift_range=0.4, fill_mode="reflect"), flow=dict(batch_size=4, seed=13)
    ),
    "fill_wrap": dict(
        gen=dict(height_shift_range=0.4, zoom_range=0.4, fill_mode="wrap"),
        flow=dict(batch_size=4, seed=14),
    ),
    "everything": dict(
        gen=dict(
            rotation_range=20,
            width_shift_range=0.1,
            height_shift_range=0.1,
            shear_range=10,
            zoom_range=0.2,
            channel_shift_range=10,
            horizontal_flip=True,
            vertical_flip=True,
            rescale=1 / 255,
            preprocessing_function="halve",
        ),
        flow=dict(batch_size=3, seed=15),
    ),
    "channels_first": dict(
        gen=dict(
            data_format="channels_first",
            rotation_range=15,
            width_shift_range=0.2,
            horizontal_flip=True,
        ),
        flow=dict(batch_size=4, seed=16),
    ),
    "unseeded": dict(gen=dict(rotation_range=10, horizontal_flip=True), flow=dict(batch_size=4)),
    "not_shuffled": dict(gen=dict(zoom_range=0.2), flow=dict(batch_size=4, shuffle=False, seed=17)),
    "float64": dict(gen=dict(dtype="float64", rotation_range=10), flow=dict(batch_size=4, seed=18)),
    "zca": dict(gen=dict(zca_whitening=True), flow=dict(batch_size=4, seed=19), fit={}, small=True),
    "training_subset": dict(
        gen=dict(validation_split=0.3, shear_range=5),
        flow=dict(batch_size=4, seed=20, subset="training", ignore_class_split=True),
    ),
}

# Keras's side: the driver (its braces doubled for format) on every case, then Keras's ImportError
# without SciPy.
KERAS = (
    """
    import json
    import sys
    import warnings

    import numpy as np

    warnings.simplefilter("ignore")
    try:
        import scipy.ndimage
    except ImportError as e:
        print(json.dumps({{"no_scipy": str(e)}}))
        raise SystemExit
    import tensorflow as tf

    image = tf.keras.preprocessing.image
"""
    + DRIVER.replace("{", "{{").replace("}", "}}")
    + """
    cases = {cases!r}
    for name, case in cases.items():
        np.savez(f"keras-{{name}}.npz", **batches(image, ".", **case))
    np.savez("keras-functions.npz", **functions(image, "."))

    # Keras's ImportError without SciPy: its lazy `scipy` module imported anew, SciPy hidden.
    from keras.src.legacy.preprocessing import image as legacy

    legacy.scipy.module = None
    sys.modules["scipy"] = None
    try:
        image.apply_affine_transform(np.zeros((2, 2, 1)), theta=10)
        message = None
    except ImportError as e:
        message = str(e)
    print(json.dumps({{"no_scipy_message": message}}))
"""
)


@pytest.fixture(scope="module")
def keras_side(tmp_path_factory):
    """The folder where Keras wrote its arrays (keras-<case>.npz), and what it printed."""
    try:
        import scipy.ndimage  # noqa: F401
    except ImportError:
        pytest.skip("SciPy is not installed here: crossover's transforms need it, as Keras's do")
    folder = tmp_path_factory.mktemp("image")
    x = np.random.RandomState(0).uniform(0, 255, (10, 9, 7, 3)).astype("float32")
    np.save(folder / "x.npy", x)
    printed = run_keras(KERAS.format(cases=CASES), folder)
    if "no_scipy" in printed:
        pytest.skip(f"the peers' Python has no SciPy ({printed['no_scipy']}): pip install scipy")
    return folder, printed


def ours() -> dict:
    namespace: dict = {}
    exec(textwrap.dedent(DRIVER), namespace)
    return namespace


def assert_same(mine: dict, theirs, where: str) -> None:
    assert sorted(mine) == sorted(theirs.files), where
    for key in theirs.files:
        a, b = np.asarray(mine[key]), theirs[key]
        assert a.shape == b.shape and a.dtype == b.dtype, (where, key, a.shape, b.shape, a.dtype)
        np.testing.assert_allclose(a, b, rtol=TOLERANCE, atol=TOLERANCE, err_msg=f"{where} {key}")


@pytest.mark.filterwarnings("ignore:This ImageDataGenerator specifies")
@pytest.mark.parametrize("name", sorted(CASES))
def test_flow_gives_kerass_batches(name, keras_side):
    folder, _ = keras_side
    mine = ours()["batches"](image, str(folder), **CASES[name])
    assert_same(mine, np.load(folder / f"keras-{name}.npz"), name)


def test_the_module_functions_give_kerass_images(keras_side):
    folder, _ = keras_side
    mine = ours()["functions"](image, str(folder))
    assert_same(mine, np.load(folder / "keras-functions.npz"), "functions")


def test_without_scipy_the_error_is_kerass(keras_side, monkeypatch):
    _, printed = keras_side
    monkeypatch.setitem(sys.modules, "scipy", None)
    monkeypatch.setitem(sys.modules, "scipy.ndimage", None)
    with pytest.raises(ImportError) as e:
        image.apply_affine_transform(np.zeros((2, 2, 1)), theta=10)
    assert str(e.value) == printed["no_scipy_message"]
