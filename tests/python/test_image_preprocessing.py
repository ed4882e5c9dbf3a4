"""keras.preprocessing.image (tf.keras's legacy ImageDataGenerator) and keras.utils.PyDataset on
crossover alone: batch shapes and dtypes, the iterator's length and last partial batch, flips,
rescale, fit's feature-wise statistics, seeded determinism, the affine transforms (where SciPy is
installed), the errors without SciPy or PIL and on bad input. Against Keras itself, batch for
batch: test_image_preprocessing_peers.py."""

import sys
import warnings

import numpy as np
import pytest

from crossover import keras
from crossover.keras import preprocessing, utils
from crossover.keras.preprocessing import image
from crossover.keras.preprocessing.image import ImageDataGenerator

try:
    import scipy.ndimage  # noqa: F401

    HAVE_SCIPY = True
except ImportError:
    HAVE_SCIPY = False

needs_scipy = pytest.mark.skipif(
    not HAVE_SCIPY,
    reason="SciPy is not installed: the affine transforms (rotation, shifts, shear, zoom) run "
    "through scipy.ndimage, as Keras's do",
)


def images(n: int = 10, rows: int = 6, cols: int = 5, channels: int = 3) -> np.ndarray:
    return np.random.RandomState(0).uniform(0, 255, (n, rows, cols, channels)).astype("float32")


def test_the_module_is_where_tf_keras_has_it():
    assert keras.preprocessing is preprocessing and preprocessing.image is image
    assert "preprocessing" in keras.__all__ and "ImageDataGenerator" in image.__all__
    assert utils.Sequence is utils.PyDataset
    assert issubclass(image.NumpyArrayIterator, image.Iterator)
    assert issubclass(image.Iterator, utils.PyDataset)
    with pytest.raises(AttributeError, match="DirectoryIterator is not supported \\(yet\\)"):
        image.DirectoryIterator
    with pytest.raises(AttributeError, match="preprocessing.sequence is not supported \\(yet\\)"):
        preprocessing.sequence


def test_keras_defaults():
    g = ImageDataGenerator()
    assert g.data_format == "channels_last" and g.dtype == "float32"
    assert (g.channel_axis, g.row_axis, g.col_axis) == (3, 1, 2)
    assert g.zoom_range == [1.0, 1.0] and g.fill_mode == "nearest" and g.cval == 0.0
    assert g.rescale is None and g.brightness_range is None and g.interpolation_order == 1
    assert g.mean is None and g.std is None and g.zca_whitening_matrix is None
    assert ImageDataGenerator(zoom_range=0.2).zoom_range == [0.8, 1.2]
    assert ImageDataGenerator(zoom_range=(0.5, 2)).zoom_range == [0.5, 2]
    first = ImageDataGenerator(data_format="channels_first")
    assert (first.channel_axis, first.row_axis, first.col_axis) == (1, 2, 3)


def test_batches_shapes_dtypes_and_the_last_partial_batch():
    x, y, w = images(10), np.arange(10), np.linspace(0.1, 1.0, 10)
    it = ImageDataGenerator().flow(x, y, batch_size=4, shuffle=False, sample_weight=w)
    assert len(it) == 3 and it.num_batches == 3 and it.n == 10
    bx, by, bw = it[2]
    assert bx.shape == (2, 6, 5, 3) and bx.dtype == np.float32
    np.testing.assert_array_equal(bx, x[8:])
    np.testing.assert_array_equal(by, [8, 9])
    np.testing.assert_array_equal(bw, w[8:])
    bx, by = ImageDataGenerator().flow(x, y, batch_size=4, shuffle=False)[0]
    np.testing.assert_array_equal(by, [0, 1, 2, 3])
    alone = ImageDataGenerator().flow(x.astype("uint8"), batch_size=16)[0]
    assert isinstance(alone, np.ndarray) and alone.shape == (10, 6, 5, 3)
    assert alone.dtype == np.float32
    assert ImageDataGenerator(dtype="float64").flow(x, batch_size=3)[0].dtype == np.float64


def test_extra_inputs_come_along_untransformed():
    x, extra = images(6), np.arange(12).reshape(6, 2)
    batch, labels = ImageDataGenerator(horizontal_flip=True).flow(
        (x, extra), np.arange(6), batch_size=6, shuffle=False
    )[0]
    assert isinstance(batch, list) and len(batch) == 2
    np.testing.assert_array_equal(batch[1], extra)


def test_shuffling_the_order_and_reshuffling_at_each_epoch():
    x, y = images(10), np.arange(10)
    it = ImageDataGenerator().flow(x, y, batch_size=10, seed=3)
    first = it[0][1]
    assert sorted(first) == list(range(10)) and list(first) != list(range(10))
    it.on_epoch_end()
    assert sorted(it[0][1]) == list(range(10)) and list(it[0][1]) != list(first)
    plain = ImageDataGenerator().flow(x, y, batch_size=10, shuffle=False)
    plain.on_epoch_end()
    np.testing.assert_array_equal(plain[0][1], y)


def test_next_goes_round_batch_after_batch():
    it = ImageDataGenerator().flow(images(10), np.arange(10), batch_size=4, shuffle=False)
    assert iter(it) is it
    sizes = [len(next(it)[1]) for _ in range(4)]
    assert sizes == [4, 4, 2, 4]
    np.testing.assert_array_equal(it.next()[1], [4, 5, 6, 7])  # Keras 2's name
    it.reset()
    np.testing.assert_array_equal(next(it)[1], [0, 1, 2, 3])


def test_rescale_and_samplewise_normalization():
    x = images(4)
    batch = ImageDataGenerator(rescale=1.0 / 255).flow(x, batch_size=4, shuffle=False)[0]
    np.testing.assert_array_equal(batch, x * np.float32(1.0 / 255))
    with pytest.warns(UserWarning, match="overrides setting of `samplewise_center`"):
        g = ImageDataGenerator(samplewise_std_normalization=True)
    batch = g.flow(x, batch_size=4, shuffle=False)[0]
    np.testing.assert_allclose(batch.mean(axis=(1, 2, 3)), 0, atol=1e-5)
    np.testing.assert_allclose(batch.std(axis=(1, 2, 3)), 1, atol=1e-4)
    doubled = ImageDataGenerator(preprocessing_function=lambda a: a * 2).flow(x, shuffle=False)
    np.testing.assert_array_equal(doubled[0], x * 2)


def test_flips_are_reversals_of_the_columns_and_rows():
    x = images(32)
    flows = dict(batch_size=32, shuffle=False, seed=1)
    batch = ImageDataGenerator(horizontal_flip=True).flow(x, **flows)[0]
    flipped = [not np.array_equal(b, a) for a, b in zip(x, batch)]
    assert 0 < sum(flipped) < 32
    for a, b, f in zip(x, batch, flipped):
        np.testing.assert_array_equal(b, a[:, ::-1] if f else a)
    vertical = ImageDataGenerator(vertical_flip=True).flow(x, **flows)[0]
    for a, b in zip(x, vertical):
        assert np.array_equal(b, a) or np.array_equal(b, a[::-1])


def test_a_seed_gives_the_same_batches_and_another_seed_others():
    def batches(seed):
        g = ImageDataGenerator(horizontal_flip=True, vertical_flip=True, channel_shift_range=20)
        it = g.flow(images(12), np.arange(12), batch_size=5, seed=seed)
        return [it[i][0] for i in range(len(it))]

    for a, b in zip(batches(7), batches(7)):
        np.testing.assert_array_equal(a, b)
    assert not all(np.array_equal(a, b) for a, b in zip(batches(7), batches(8)))


def test_get_random_transform_draws_only_what_is_configured():
    g = ImageDataGenerator()
    params = g.get_random_transform((6, 5, 3), seed=1)
    assert params["theta"] == 0 and params["tx"] == 0 and params["ty"] == 0
    assert params["zx"] == 1 and params["zy"] == 1 and params["channel_shift_intensity"] is None
    assert not params["flip_horizontal"] and params["brightness"] is None
    g = ImageDataGenerator(rotation_range=10, height_shift_range=0.5, width_shift_range=3)
    for seed in range(20):
        params = g.get_random_transform((6, 5, 3), seed=seed)
        assert -10 <= params["theta"] <= 10 and -3 <= params["tx"] <= 3  # a fraction of 6 rows
        assert params["ty"] in (-2, -1, 0, 1, 2)  # an int k: one of 0..k-1, with a sign
    assert g.get_random_transform((6, 5, 3), seed=4) == g.get_random_transform((6, 5, 3), seed=4)


def test_fit_computes_the_featurewise_statistics():
    x = images(20)
    with pytest.warns(UserWarning, match="overrides setting of `featurewise_center`"):
        g = ImageDataGenerator(featurewise_std_normalization=True, rescale=0.5)
    g.fit(x)
    assert g.mean.shape == (1, 1, 3) and g.std.shape == (1, 1, 3)
    np.testing.assert_allclose(g.mean.ravel(), (x * 0.5).mean(axis=(0, 1, 2)), rtol=1e-5)
    np.testing.assert_allclose(g.std.ravel(), (x * 0.5).std(axis=(0, 1, 2)), rtol=1e-4)
    batch = g.flow(x, batch_size=20, shuffle=False)[0]
    np.testing.assert_allclose(batch.mean(axis=(0, 1, 2)), 0, atol=1e-4)
    np.testing.assert_allclose(batch.std(axis=(0, 1, 2)), 1, atol=1e-4)
    first = ImageDataGenerator(featurewise_center=True, data_format="channels_first")
    first.fit(x.transpose(0, 3, 1, 2))
    assert first.mean.shape == (3, 1, 1)


def test_a_featurewise_step_before_fit_warns_and_is_skipped():
    x = images(2)
    g = ImageDataGenerator(featurewise_center=True)
    with pytest.warns(UserWarning, match="hasn't been fit on any training data"):
        batch = g.flow(x, batch_size=2, shuffle=False)[0]
    np.testing.assert_array_equal(batch, x)


def test_zca_whitening_decorrelates_the_features():
    x = np.random.RandomState(1).normal(size=(200, 2, 2, 1)).astype("float32")
    x[..., 0, 0, 0] += x[..., 1, 1, 0]  # correlated features
    with pytest.warns(UserWarning, match="zca_whitening"):
        g = ImageDataGenerator(zca_whitening=True)
    g.fit(x)
    assert g.zca_whitening_matrix.shape == (4, 4)
    white = g.flow(x, batch_size=200, shuffle=False)[0].reshape(200, 4)
    np.testing.assert_allclose(white.T @ white / 200, np.eye(4), atol=1e-4)


@needs_scipy
def test_rotation_by_a_right_angle_turns_the_image():
    x = np.arange(25, dtype="float32").reshape(5, 5, 1)
    turned = image.apply_affine_transform(x, theta=90, row_axis=0, col_axis=1, channel_axis=2)
    np.testing.assert_allclose(turned[..., 0], np.rot90(x[..., 0]), atol=1e-4)  # anticlockwise
    assert image.apply_affine_transform(x, row_axis=0, col_axis=1, channel_axis=2) is x


@needs_scipy
def test_a_whole_pixel_shift_moves_the_image_and_fills_per_fill_mode():
    # Keras 3.15's axes: with columns after rows its (x, y) matrix is swapped into numpy's
    # (row, column) order, so tx (height_shift_range's draw) moves along the columns and ty along
    # the rows.
    x = np.arange(1, 26, dtype="float32").reshape(5, 5, 1)
    axes = dict(row_axis=0, col_axis=1, channel_axis=2)
    shifted = image.apply_affine_transform(x, tx=1, fill_mode="constant", cval=-1, **axes)
    np.testing.assert_array_equal(shifted[:, :4, 0], x[:, 1:, 0])
    np.testing.assert_array_equal(shifted[:, 4, 0], -1)
    nearest = image.apply_affine_transform(x, ty=-2, **axes)
    np.testing.assert_array_equal(nearest[2:, :, 0], x[:3, :, 0])
    np.testing.assert_array_equal(nearest[:2, :, 0], np.repeat(x[:1, :, 0], 2, axis=0))
    wrapped = image.apply_affine_transform(x, ty=1, fill_mode="wrap", **axes)
    assert wrapped.shape == x.shape


@needs_scipy
def test_random_transforms_keep_shape_and_stay_within_the_values():
    x = images(8)
    g = ImageDataGenerator(
        rotation_range=30,
        width_shift_range=0.2,
        height_shift_range=0.2,
        shear_range=10,
        zoom_range=0.2,
        horizontal_flip=True,
        fill_mode="reflect",
    )
    batch = g.flow(x, batch_size=8, seed=2)[0]
    assert batch.shape == x.shape and batch.dtype == np.float32
    assert batch.min() >= x.min() - 1e-3 and batch.max() <= x.max() + 1e-3
    assert not np.array_equal(batch, g.flow(x, batch_size=8, seed=3)[0])
    np.testing.assert_array_equal(batch, g.flow(x, batch_size=8, seed=2)[0])
    one = x[0].transpose(2, 0, 1)  # the module functions' default axes: channels first
    for out in (
        image.random_rotation(one, 20),
        image.random_shift(one, 0.1, 0.1),
        image.random_shear(one, 15),
        image.random_zoom(one, (0.8, 1.2)),
    ):
        assert out.shape == one.shape
    g.fit(x, augment=True, rounds=2, seed=1)  # nothing feature-wise asked: no statistics
    assert g.mean is None


def test_channel_shift_clips_to_the_image_range():
    x = images(1)[0]
    shifted = image.apply_channel_shift(x, 1000.0, channel_axis=2)
    np.testing.assert_array_equal(shifted, np.full_like(x, x.max()))
    np.random.seed(0)
    assert image.random_channel_shift(x, 5.0, channel_axis=2).shape == x.shape


def test_without_scipy_a_transform_raises_kerass_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "scipy", None)
    monkeypatch.setitem(sys.modules, "scipy.ndimage", None)
    x = images(2)
    with pytest.raises(ImportError, match="requires the scipy module.*pip install scipy"):
        ImageDataGenerator(rotation_range=10).flow(x, seed=0)[0]
    with pytest.raises(ImportError, match="scipy"):
        image.apply_affine_transform(x[0], zx=0.5, row_axis=0, col_axis=1, channel_axis=2)
    # Flips, rescale and the statistics need no SciPy.
    g = ImageDataGenerator(horizontal_flip=True, rescale=2.0, featurewise_center=True)
    g.fit(x)
    assert g.flow(x, seed=0)[0].shape == x.shape


def test_without_pil_the_image_functions_say_they_need_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "PIL", None)
    monkeypatch.setitem(sys.modules, "PIL.Image", None)
    monkeypatch.setitem(sys.modules, "PIL.ImageEnhance", None)
    x = images(1)[0]
    with pytest.raises(ImportError, match="The use of `array_to_img` requires PIL"):
        image.array_to_img(x)
    with pytest.raises(ImportError, match="The use of `load_img` requires PIL"):
        image.load_img("any.png")
    with pytest.raises(ImportError, match="`apply_brightness_shift` requires PIL"):
        ImageDataGenerator(brightness_range=(0.5, 1.5)).flow(x[None], seed=0)[0]
    assert image.img_to_array(x[..., 0]).shape == (6, 5, 1)  # numpy alone
    assert image.img_to_array(x, data_format="channels_first").shape == (3, 6, 5)


@pytest.mark.parametrize(
    "make,message",
    [
        (lambda: ImageDataGenerator().flow(images(2)[0]), "should have rank 4.*\\(6, 5, 3\\)"),
        (lambda: ImageDataGenerator().flow(images(3), [1, 2]), "`y` \\(labels\\) should have"),
        (
            lambda: ImageDataGenerator().flow(images(3), sample_weight=[1.0]),
            "`sample_weight` should have the same length",
        ),
        (
            lambda: ImageDataGenerator().flow((images(3), np.zeros(2))),
            "All of the arrays in `x` should have the same length",
        ),
        (lambda: ImageDataGenerator(zoom_range=(1, 2, 3)), "`zoom_range` should be a float"),
        (lambda: ImageDataGenerator(data_format="nhwc"), "`data_format` should be"),
        (lambda: ImageDataGenerator(validation_split=1.5), "strictly between 0 and 1"),
        (lambda: ImageDataGenerator(brightness_range=0.5), "brightness_range should be tuple"),
        (
            lambda: ImageDataGenerator(validation_split=0.5).flow(images(4), subset="test"),
            "Invalid subset name: test",
        ),
        (
            lambda: ImageDataGenerator().fit(images(2)[0]),
            "Input to `.fit\\(\\)` should have rank 4",
        ),
        (
            lambda: ImageDataGenerator().flow(images(4), np.arange(4), batch_size=2)[2],
            "Asked to retrieve element 2, but the Sequence has length 2",
        ),
        (
            lambda: image.apply_affine_transform(images(1)[0], row_axis=0, col_axis=0),
            "must be distinct",
        ),
        (lambda: image.apply_affine_transform(images(1)), "multi-channel 2D images"),
        (lambda: image.random_zoom(images(1)[0], (0.5,)), "`zoom_range` should be a tuple"),
        (lambda: image.img_to_array(np.zeros(3)), "Unsupported image shape"),
        (
            lambda: ImageDataGenerator().flow_from_directory("data/"),
            "flow_from_directory is not supported \\(yet\\).*flow\\(x, y\\)",
        ),
        (
            lambda: ImageDataGenerator().flow_from_dataframe(None),
            "flow_from_dataframe is not supported \\(yet\\)",
        ),
    ],
)
def test_bad_input_is_a_value_error_saying_what_and_why(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_subsets_split_at_the_validation_fraction():
    x, y = images(10), np.tile([0, 1], 5)
    g = ImageDataGenerator(validation_split=0.2)
    validation = g.flow(x, y, subset="validation", shuffle=False)
    training = g.flow(x, y, subset="training", shuffle=False)
    assert validation.n == 2 and training.n == 8
    np.testing.assert_array_equal(validation[0][0], x[:2])
    with pytest.raises(ValueError, match="different number of classes"):
        g.flow(x, np.arange(10), subset="training")
    assert g.flow(x, np.arange(10), subset="training", ignore_class_split=True).n == 8


def test_an_unusual_channel_count_warns():
    with pytest.warns(UserWarning, match="expected either 1, 3, or 4 channels"):
        ImageDataGenerator().flow(images(2, channels=5))


class Squares(utils.PyDataset):
    def __init__(self, n, **kwargs):
        super().__init__(**kwargs)
        self.n = n
        self.ends = 0

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        return np.full((2, 1), index, "float32"), np.full((2,), index * index, "float32")

    def on_epoch_end(self):
        self.ends += 1


def test_a_pydataset_subclass_gives_its_batches_in_order():
    data = Squares(3, workers=4, use_multiprocessing=True, max_queue_size=2)
    assert (data.workers, data.use_multiprocessing, data.max_queue_size) == (4, True, 2)
    assert data.num_batches == 3
    assert [float(y[0]) for _, y in data] == [0.0, 1.0, 4.0]
    data.on_epoch_begin()
    data.on_epoch_end()
    assert data.ends == 1


def test_a_pydataset_without_super_init_warns_and_takes_kerass_defaults():
    class NoInit(utils.PyDataset):
        def __init__(self):
            pass

        def __len__(self):
            return 1

    with pytest.warns(UserWarning, match="should call `super\\(\\).__init__\\(\\*\\*kwargs\\)`"):
        assert NoInit().workers == 1

    class Endless(utils.PyDataset):
        def __getitem__(self, index):
            return index

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(NotImplementedError, match="num_batches"):
            Endless().num_batches
        assert next(iter(Endless())) == 0
