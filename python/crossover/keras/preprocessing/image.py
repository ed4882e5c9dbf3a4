"""keras.preprocessing.image, as tf.keras serves it (Keras 3.15's keras/src/legacy/preprocessing/
image.py): ImageDataGenerator, the NumpyArrayIterator its flow returns, and the augmentation
functions. All numpy, on the calling thread.

The random draws are Keras's, in Keras's order, from numpy's global generator (np.random), seeded
as Keras seeds it (a flow's seed plus the batches it has made, before each batch), so a seeded flow
gives Keras's own batches. The affine transforms (rotation, shifts, shear, zoom) go through
scipy.ndimage, as Keras's do: without SciPy they raise Keras's ImportError (crossover does not
depend on SciPy). Brightness shifts, save_to_dir and the image file functions need PIL, as in
Keras. Reading images from folders or data frames (flow_from_directory, flow_from_dataframe) is
not supported (yet)."""

import importlib
import math
import os
import threading
import warnings
from typing import Any, Callable, Optional

import numpy as np

from ..._args import SEE_SUPPORTED, unsupported_attribute
from .. import backend
from ..utils import PyDataset

# Keras's ImportError (its lazy `scipy` module) when a transform needs SciPy and it is missing.
_NO_SCIPY = "This requires the scipy module. You can install it via `pip install scipy`"


def _ndimage() -> Any:
    """scipy.ndimage, imported when a transform first needs it."""
    try:
        import scipy.ndimage
    except ImportError:
        raise ImportError(_NO_SCIPY) from None
    return scipy.ndimage


def _pil(who: str, part: str = "Image") -> Any:
    """PIL's module `part` for `who`, or Keras's ImportError saying `who` requires PIL."""
    try:
        return importlib.import_module(f"PIL.{part}")
    except ImportError:
        raise ImportError(
            f"Could not import PIL.{part}. The use of `{who}` requires PIL."
        ) from None


def _data_format(data_format: Optional[str]) -> str:
    """Keras's standardize_data_format: None is backend.image_data_format()."""
    if data_format is None:
        return backend.image_data_format()
    value = str(data_format).lower()
    if value not in ("channels_first", "channels_last"):
        raise ValueError(
            "The `data_format` argument must be one of {'channels_first', 'channels_last'}. "
            f"Received: data_format={data_format}"
        )
    return value


class Iterator(PyDataset):
    """Keras's base of the image iterators: a PyDataset of ceil(n / batch_size) batches (the last
    one partial), and a Python iterator (next() goes round for ever, a new order at each pass).
    A subclass gives `_get_batches_of_transformed_samples(index_array)`.

    Before each batch np.random is seeded with seed + total_batches_seen (when a seed is given);
    the order is np.random.permutation(n) when shuffling (else 0..n-1), drawn at the first batch,
    again by on_epoch_end, and at the start of each pass of next()."""

    white_list_formats = ("png", "jpg", "jpeg", "bmp", "ppm", "tif", "tiff")

    def __init__(
        self, n: int, batch_size: int, shuffle: bool, seed: Optional[int], **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.n = n
        self.batch_size = batch_size
        self.seed = seed
        self.shuffle = shuffle
        self.batch_index = 0
        self.total_batches_seen = 0
        self.lock = threading.Lock()
        self.index_array: Optional[np.ndarray] = None
        self.index_generator = self._flow_index()

    def _set_index_array(self) -> None:
        self.index_array = np.random.permutation(self.n) if self.shuffle else np.arange(self.n)

    def _seed_batch(self) -> None:
        if self.seed is not None:
            np.random.seed(self.seed + self.total_batches_seen)

    def __getitem__(self, idx: int) -> Any:
        if idx >= len(self):
            raise ValueError(
                f"Asked to retrieve element {idx}, but the Sequence has length {len(self)}"
            )
        self._seed_batch()
        self.total_batches_seen += 1
        if self.index_array is None:
            self._set_index_array()
        start = self.batch_size * idx
        return self._get_batches_of_transformed_samples(
            self.index_array[start : start + self.batch_size]
        )

    def __len__(self) -> int:
        return (self.n + self.batch_size - 1) // self.batch_size

    def on_epoch_end(self) -> None:
        """A new order for the next epoch (a new permutation when shuffling)."""
        self._set_index_array()

    def reset(self) -> None:
        """next() starts a new pass."""
        self.batch_index = 0

    def _flow_index(self) -> Any:
        """The index arrays of next(): batch after batch through the order, the last partial."""
        self.reset()
        while True:
            self._seed_batch()
            if self.batch_index == 0:
                self._set_index_array()
            current = (self.batch_index * self.batch_size) % self.n if self.n else 0
            self.batch_index = self.batch_index + 1 if self.n > current + self.batch_size else 0
            self.total_batches_seen += 1
            yield self.index_array[current : current + self.batch_size]

    def __iter__(self) -> "Iterator":
        return self

    def __next__(self) -> Any:
        with self.lock:
            index_array = next(self.index_generator)
        return self._get_batches_of_transformed_samples(index_array)

    next = __next__  # Keras 2's name, which older scripts call

    def _get_batches_of_transformed_samples(self, index_array: np.ndarray) -> Any:
        """The batch of the samples `index_array` names (a subclass gives it)."""
        raise NotImplementedError


class NumpyArrayIterator(Iterator):
    """The batches of ImageDataGenerator.flow: images of an (N, rows, cols, channels) array (or
    channels first), each transformed with its own random draws and standardized.

    A batch is x, (x, y) or (x, y, sample_weight) as y and sample_weight are given; `x` may be a
    tuple (images, extra array or list of arrays), whose extras come along untransformed: the
    batch's x is then [images, *extras]. `subset` takes the generator's validation_split:
    "validation" the first fraction, "training" the rest."""

    def __init__(
        self,
        x: Any,
        y: Any,
        image_data_generator: "ImageDataGenerator",
        batch_size: int = 32,
        shuffle: bool = False,
        sample_weight: Any = None,
        seed: Optional[int] = None,
        data_format: Optional[str] = None,
        save_to_dir: Optional[str] = None,
        save_prefix: str = "",
        save_format: str = "png",
        subset: Optional[str] = None,
        ignore_class_split: bool = False,
        dtype: Optional[str] = None,
    ) -> None:
        if data_format is None:
            data_format = backend.image_data_format()
        self.dtype = backend.floatx() if dtype is None else dtype
        x_misc: list = []
        if isinstance(x, (tuple, list)):
            x_misc = [np.asarray(xx) for xx in (x[1] if isinstance(x[1], list) else [x[1]])]
            x = x[0]
            for xx in x_misc:
                if len(x) != len(xx):
                    raise ValueError(
                        "All of the arrays in `x` should have the same length. Found a pair "
                        f"with: len(x[0]) = {len(x)}, len(x[?]) = {len(xx)}"
                    )
        if y is not None and len(x) != len(y):
            raise ValueError(
                "`x` (images tensor) and `y` (labels) should have the same length. "
                f"Found: x.shape = {np.asarray(x).shape}, y.shape = {np.asarray(y).shape}"
            )
        if sample_weight is not None and len(x) != len(sample_weight):
            raise ValueError(
                "`x` (images tensor) and `sample_weight` should have the same length. "
                f"Found: x.shape = {np.asarray(x).shape}, "
                f"sample_weight.shape = {np.asarray(sample_weight).shape}"
            )
        if subset is not None:
            if subset not in {"training", "validation"}:
                raise ValueError(
                    f'Invalid subset name: {subset}; expected "training" or "validation".'
                )
            split = int(len(x) * image_data_generator._validation_split)
            if (
                y is not None
                and not ignore_class_split
                and not np.array_equal(np.unique(y[:split]), np.unique(y[split:]))
            ):
                raise ValueError(
                    "Training and validation subsets have different number of classes after the "
                    "split. If your numpy arrays are sorted by the label, you might want to "
                    "shuffle them."
                )
            part = slice(None, split) if subset == "validation" else slice(split, None)
            x = x[part]
            x_misc = [np.asarray(xx[part]) for xx in x_misc]
            y = y[part] if y is not None else None
        self.x = np.asarray(x, dtype=self.dtype)
        self.x_misc = x_misc
        if self.x.ndim != 4:
            raise ValueError(
                "Input data in `NumpyArrayIterator` should have rank 4. You passed an array "
                f"with shape {self.x.shape}"
            )
        channels_axis = 3 if data_format == "channels_last" else 1
        if self.x.shape[channels_axis] not in {1, 3, 4}:
            warnings.warn(
                f'NumpyArrayIterator is set to use the data format convention "{data_format}" '
                f"(channels on axis {channels_axis}), i.e. expected either 1, 3, or 4 channels "
                f"on axis {channels_axis}. However, it was passed an array with shape "
                f"{self.x.shape} ({self.x.shape[channels_axis]} channels)."
            )
        self.y = None if y is None else np.asarray(y)
        self.sample_weight = None if sample_weight is None else np.asarray(sample_weight)
        self.image_data_generator = image_data_generator
        self.data_format = data_format
        self.save_to_dir = save_to_dir
        self.save_prefix = save_prefix
        self.save_format = save_format
        super().__init__(self.x.shape[0], batch_size, shuffle, seed)

    def _get_batches_of_transformed_samples(self, index_array: np.ndarray) -> Any:
        generator = self.image_data_generator
        batch_x = np.zeros((len(index_array),) + self.x.shape[1:], dtype=self.dtype)
        for i, j in enumerate(index_array):
            params = generator.get_random_transform(self.x[j].shape)
            x = generator.apply_transform(self.x[j].astype(self.dtype), params)
            batch_x[i] = generator.standardize(x)
        if self.save_to_dir:
            for i, j in enumerate(index_array):
                img = array_to_img(batch_x[i], self.data_format, scale=True)
                name = f"{self.save_prefix}_{j}_{np.random.randint(1e4)}.{self.save_format}"
                img.save(os.path.join(self.save_to_dir, name))
        misc = [xx[index_array] for xx in self.x_misc]
        batch = batch_x if not misc else [batch_x] + misc
        if self.y is None:
            return batch
        if self.sample_weight is None:
            return batch, self.y[index_array]
        return batch, self.y[index_array], self.sample_weight[index_array]


def flip_axis(x: Any, axis: int) -> np.ndarray:
    """x reversed along `axis` (a view)."""
    x = np.asarray(x).swapaxes(axis, 0)
    return x[::-1, ...].swapaxes(0, axis)


def _not_supported(what: str) -> ValueError:
    return ValueError(
        f"ImageDataGenerator.{what} is not supported (yet) by crossover: it reads image files "
        f"(through PIL); load the images into an array and use flow(x, y); {SEE_SUPPORTED}"
    )


class ImageDataGenerator:
    """Keras's legacy image augmentation: flow(x, y) gives batches of randomly transformed
    (rotated, shifted, sheared, zoomed, channel-shifted, flipped, brightened) then standardized
    (preprocessing_function, rescale, sample- and feature-wise centering and scaling, ZCA
    whitening) copies of the images; fit(x) computes the feature-wise statistics first.

    The arguments and their checks are Keras 3.15's. A shift range under 1 is a fraction of the
    image's size, 1 or more pixels; an int range (or a list) takes one of its values with a random
    sign, as Keras's np.random.choice does (an int k draws from 0..k-1)."""

    def __init__(
        self,
        featurewise_center: bool = False,
        samplewise_center: bool = False,
        featurewise_std_normalization: bool = False,
        samplewise_std_normalization: bool = False,
        zca_whitening: bool = False,
        zca_epsilon: float = 1e-6,
        rotation_range: float = 0,
        width_shift_range: Any = 0.0,
        height_shift_range: Any = 0.0,
        brightness_range: Any = None,
        shear_range: float = 0.0,
        zoom_range: Any = 0.0,
        channel_shift_range: float = 0.0,
        fill_mode: str = "nearest",
        cval: float = 0.0,
        horizontal_flip: bool = False,
        vertical_flip: bool = False,
        rescale: Optional[float] = None,
        preprocessing_function: Optional[Callable[[np.ndarray], np.ndarray]] = None,
        data_format: Optional[str] = None,
        validation_split: float = 0.0,
        interpolation_order: int = 1,
        dtype: Optional[str] = None,
    ) -> None:
        if data_format is None:
            data_format = backend.image_data_format()
        self.featurewise_center = featurewise_center
        self.samplewise_center = samplewise_center
        self.featurewise_std_normalization = featurewise_std_normalization
        self.samplewise_std_normalization = samplewise_std_normalization
        self.zca_whitening = zca_whitening
        self.zca_epsilon = zca_epsilon
        self.rotation_range = rotation_range
        self.width_shift_range = width_shift_range
        self.height_shift_range = height_shift_range
        self.shear_range = shear_range
        self.channel_shift_range = channel_shift_range
        self.fill_mode = fill_mode
        self.cval = cval
        self.horizontal_flip = horizontal_flip
        self.vertical_flip = vertical_flip
        self.rescale = rescale
        self.preprocessing_function = preprocessing_function
        self.dtype = backend.floatx() if dtype is None else dtype
        self.interpolation_order = interpolation_order
        if data_format not in {"channels_last", "channels_first"}:
            raise ValueError(
                '`data_format` should be `"channels_last"` (channel after row and column) or '
                '`"channels_first"` (channel before row and column). '
                f"Received: {data_format}"
            )
        self.data_format = data_format
        first = data_format == "channels_first"
        self.channel_axis, self.row_axis, self.col_axis = (1, 2, 3) if first else (3, 1, 2)
        if validation_split and not 0 < validation_split < 1:
            raise ValueError(
                "`validation_split` must be strictly between 0 and 1. "
                f" Received: {validation_split}"
            )
        self._validation_split = validation_split
        self.mean: Any = None
        self.std: Any = None
        self.zca_whitening_matrix: Any = None
        if isinstance(zoom_range, (float, int)):
            self.zoom_range = [1 - zoom_range, 1 + zoom_range]
        elif len(zoom_range) == 2 and all(isinstance(v, (float, int)) for v in zoom_range):
            self.zoom_range = [zoom_range[0], zoom_range[1]]
        else:
            raise ValueError(
                "`zoom_range` should be a float or a tuple or list of two floats. "
                f"Received: {zoom_range}"
            )
        # Keras's overrides, each with its warning: ZCA centers and replaces the std scaling;
        # a std normalization centers too.
        if zca_whitening:
            if not featurewise_center:
                self.featurewise_center = True
                warnings.warn(
                    "This ImageDataGenerator specifies `zca_whitening`, which overrides "
                    "setting of `featurewise_center`."
                )
            if featurewise_std_normalization:
                self.featurewise_std_normalization = False
                warnings.warn(
                    "This ImageDataGenerator specifies `zca_whitening` which overrides setting "
                    "of`featurewise_std_normalization`."
                )
        if featurewise_std_normalization and not featurewise_center:
            self.featurewise_center = True
            warnings.warn(
                "This ImageDataGenerator specifies `featurewise_std_normalization`, which "
                "overrides setting of `featurewise_center`."
            )
        if samplewise_std_normalization and not samplewise_center:
            self.samplewise_center = True
            warnings.warn(
                "This ImageDataGenerator specifies `samplewise_std_normalization`, which "
                "overrides setting of `samplewise_center`."
            )
        if brightness_range is not None and (
            not isinstance(brightness_range, (tuple, list)) or len(brightness_range) != 2
        ):
            raise ValueError(
                "`brightness_range should be tuple or list of two floats. "
                f"Received: {brightness_range}"
            )
        self.brightness_range = brightness_range

    def flow(
        self,
        x: Any,
        y: Any = None,
        batch_size: int = 32,
        shuffle: bool = True,
        sample_weight: Any = None,
        seed: Optional[int] = None,
        save_to_dir: Optional[str] = None,
        save_prefix: str = "",
        save_format: str = "png",
        ignore_class_split: bool = False,
        subset: Optional[str] = None,
    ) -> NumpyArrayIterator:
        """The augmented batches of the images x (rank 4) and their labels y (a PyDataset that is
        also an endless iterator; model.fit takes it)."""
        return NumpyArrayIterator(
            x,
            y,
            self,
            batch_size=batch_size,
            shuffle=shuffle,
            sample_weight=sample_weight,
            seed=seed,
            data_format=self.data_format,
            save_to_dir=save_to_dir,
            save_prefix=save_prefix,
            save_format=save_format,
            ignore_class_split=ignore_class_split,
            subset=subset,
            dtype=self.dtype,
        )

    def flow_from_directory(self, directory: Any, *args: Any, **kwargs: Any) -> Any:
        """Not supported (yet): a ValueError saying so."""
        raise _not_supported("flow_from_directory")

    def flow_from_dataframe(self, dataframe: Any, *args: Any, **kwargs: Any) -> Any:
        """Not supported (yet): a ValueError saying so."""
        raise _not_supported("flow_from_dataframe")

    def standardize(self, x: np.ndarray) -> np.ndarray:
        """x normalized as configured, in place where the step allows (as Keras does):
        preprocessing_function, rescale, sample-wise then feature-wise centering and scaling, ZCA.
        A feature-wise step before fit() warns and is skipped."""
        if self.preprocessing_function:
            x = self.preprocessing_function(x)
        if self.rescale:
            x *= self.rescale
        if self.samplewise_center:
            x -= np.mean(x, keepdims=True)
        if self.samplewise_std_normalization:
            x /= np.std(x, keepdims=True) + 1e-6
        unfit = (
            "This ImageDataGenerator specifies `{}`, but it hasn't been fit on any training "
            "data. Fit it first by calling `.fit(numpy_data)`."
        )
        if self.featurewise_center:
            if self.mean is not None:
                x -= self.mean
            else:
                warnings.warn(unfit.format("featurewise_center"))
        if self.featurewise_std_normalization:
            if self.std is not None:
                x /= self.std + 1e-6
            else:
                warnings.warn(unfit.format("featurewise_std_normalization"))
        if self.zca_whitening:
            if self.zca_whitening_matrix is not None:
                flat = x.reshape(-1, math.prod(x.shape[-3:]))
                x = np.reshape(flat @ self.zca_whitening_matrix, x.shape)
            else:
                warnings.warn(unfit.format("zca_whitening"))
        return x

    def get_random_transform(self, img_shape: tuple, seed: Optional[int] = None) -> dict:
        """Random parameters of one image's transform (Keras's draws, in its order, from
        np.random; seeded with `seed` when given): theta, tx, ty, shear, zx, zy, flip_horizontal,
        flip_vertical, channel_shift_intensity, brightness."""
        if seed is not None:
            np.random.seed(seed)
        theta = 0
        if self.rotation_range:
            theta = np.random.uniform(-self.rotation_range, self.rotation_range)
        tx = _draw_shift(self.height_shift_range, img_shape[self.row_axis - 1])
        ty = _draw_shift(self.width_shift_range, img_shape[self.col_axis - 1])
        shear = np.random.uniform(-self.shear_range, self.shear_range) if self.shear_range else 0
        if self.zoom_range[0] == 1 and self.zoom_range[1] == 1:
            zx, zy = 1, 1
        else:
            zx, zy = np.random.uniform(self.zoom_range[0], self.zoom_range[1], 2)
        # Both coins are tossed whether or not the flips are on (Keras's sequence of draws).
        flip_horizontal = (np.random.random() < 0.5) * self.horizontal_flip
        flip_vertical = (np.random.random() < 0.5) * self.vertical_flip
        channel_shift_intensity = None
        if self.channel_shift_range != 0:
            channel_shift_intensity = np.random.uniform(
                -self.channel_shift_range, self.channel_shift_range
            )
        brightness = None
        if self.brightness_range is not None:
            brightness = np.random.uniform(self.brightness_range[0], self.brightness_range[1])
        return {
            "theta": theta,
            "tx": tx,
            "ty": ty,
            "shear": shear,
            "zx": zx,
            "zy": zy,
            "flip_horizontal": flip_horizontal,
            "flip_vertical": flip_vertical,
            "channel_shift_intensity": channel_shift_intensity,
            "brightness": brightness,
        }

    def apply_transform(self, x: np.ndarray, transform_parameters: dict) -> np.ndarray:
        """One image (rank 3, no batch axis) transformed by `transform_parameters` (keys as
        get_random_transform's; a missing key is no change): the affine transform, then the
        channel shift, the flips and the brightness."""
        p = transform_parameters
        channel_axis = self.channel_axis - 1
        x = apply_affine_transform(
            x,
            p.get("theta", 0),
            p.get("tx", 0),
            p.get("ty", 0),
            p.get("shear", 0),
            p.get("zx", 1),
            p.get("zy", 1),
            row_axis=self.row_axis - 1,
            col_axis=self.col_axis - 1,
            channel_axis=channel_axis,
            fill_mode=self.fill_mode,
            cval=self.cval,
            order=self.interpolation_order,
        )
        if p.get("channel_shift_intensity") is not None:
            x = apply_channel_shift(x, p["channel_shift_intensity"], channel_axis)
        if p.get("flip_horizontal", False):
            x = flip_axis(x, self.col_axis - 1)
        if p.get("flip_vertical", False):
            x = flip_axis(x, self.row_axis - 1)
        if p.get("brightness") is not None:
            x = apply_brightness_shift(x, p["brightness"], False)
        return x

    def random_transform(self, x: np.ndarray, seed: Optional[int] = None) -> np.ndarray:
        """One image (rank 3) randomly transformed (not standardized)."""
        return self.apply_transform(x, self.get_random_transform(x.shape, seed))

    def fit(
        self, x: Any, augment: bool = False, rounds: int = 1, seed: Optional[int] = None
    ) -> None:
        """The feature-wise statistics that featurewise_center, featurewise_std_normalization and
        zca_whitening use, from the sample images x (rank 4), rescaled first when rescale is set;
        with augment, from `rounds` randomly transformed copies of them."""
        x = np.asarray(x, dtype=self.dtype)
        if x.ndim != 4:
            raise ValueError(
                f"Input to `.fit()` should have rank 4. Got array with shape: {x.shape}"
            )
        channels = x.shape[self.channel_axis]
        if channels not in {1, 3, 4}:
            warnings.warn(
                "Expected input to be images (as Numpy array) following the data format "
                f'convention "{self.data_format}" (channels on axis {self.channel_axis}), i.e. '
                f"expected either 1, 3 or 4 channels on axis {self.channel_axis}. However, it "
                f"was passed an array with shape {x.shape} ({channels} channels)."
            )
        if seed is not None:
            np.random.seed(seed)
        x = np.copy(x)
        if self.rescale:
            x *= self.rescale
        if augment:
            ax = np.zeros((rounds * x.shape[0],) + x.shape[1:], dtype=self.dtype)
            for r in range(rounds):
                for i in range(x.shape[0]):
                    ax[i + r * x.shape[0]] = self.random_transform(x[i])
            x = ax
        shape = [1, 1, 1]
        shape[self.channel_axis - 1] = channels
        axes = (0, self.row_axis, self.col_axis)
        if self.featurewise_center:
            self.mean = np.reshape(np.mean(x, axis=axes), shape)
            x -= self.mean
        if self.featurewise_std_normalization:
            self.std = np.reshape(np.std(x, axis=axes), shape)
            x /= self.std + 1e-6
        if self.zca_whitening:
            n = len(x)
            u, s, _ = np.linalg.svd(np.reshape(x, (n, -1)).T, full_matrices=False)
            self.zca_whitening_matrix = (u * (np.sqrt(n) / (s + self.zca_epsilon))).dot(u.T)


def _draw_shift(shift_range: Any, size: int) -> Any:
    """Keras's shift draw: one of the range's values (np.random.choice: an int k is 0..k-1, a 1-D
    list its items) times a random sign, else (a float) uniform in [-range, range]; in pixels,
    or a fraction of `size` when every value is under 1. No draw for a zero range."""
    if not shift_range:
        return 0
    try:
        shift = np.random.choice(shift_range)
        shift *= np.random.choice([-1, 1])
    except ValueError:  # a float: np.random.choice refuses it before drawing
        shift = np.random.uniform(-shift_range, shift_range)
    if np.max(shift_range) < 1:
        shift *= size
    return shift


def _transformed(
    x: np.ndarray,
    axes: tuple[int, int, int],
    fill_mode: str,
    cval: float,
    order: int,
    **transform: float,
) -> np.ndarray:
    """apply_affine_transform of x with the random_* functions' shared arguments: axes are
    (row_axis, col_axis, channel_axis)."""
    row_axis, col_axis, channel_axis = axes
    return apply_affine_transform(
        x,
        row_axis=row_axis,
        col_axis=col_axis,
        channel_axis=channel_axis,
        fill_mode=fill_mode,
        cval=cval,
        order=order,
        **transform,
    )


def random_rotation(
    x: np.ndarray,
    rg: float,
    row_axis: int = 1,
    col_axis: int = 2,
    channel_axis: int = 0,
    fill_mode: str = "nearest",
    cval: float = 0.0,
    interpolation_order: int = 1,
) -> np.ndarray:
    """x (rank 3) rotated by a uniform random angle in [-rg, rg] degrees."""
    theta = np.random.uniform(-rg, rg)
    axes = (row_axis, col_axis, channel_axis)
    return _transformed(x, axes, fill_mode, cval, interpolation_order, theta=theta)


def random_shift(
    x: np.ndarray,
    wrg: float,
    hrg: float,
    row_axis: int = 1,
    col_axis: int = 2,
    channel_axis: int = 0,
    fill_mode: str = "nearest",
    cval: float = 0.0,
    interpolation_order: int = 1,
) -> np.ndarray:
    """x (rank 3) shifted by uniform random fractions of its height (hrg) and width (wrg)."""
    h, w = x.shape[row_axis], x.shape[col_axis]
    tx = np.random.uniform(-hrg, hrg) * h
    ty = np.random.uniform(-wrg, wrg) * w
    axes = (row_axis, col_axis, channel_axis)
    return _transformed(x, axes, fill_mode, cval, interpolation_order, tx=tx, ty=ty)


def random_shear(
    x: np.ndarray,
    intensity: float,
    row_axis: int = 1,
    col_axis: int = 2,
    channel_axis: int = 0,
    fill_mode: str = "nearest",
    cval: float = 0.0,
    interpolation_order: int = 1,
) -> np.ndarray:
    """x (rank 3) sheared by a uniform random angle in [-intensity, intensity] degrees."""
    shear = np.random.uniform(-intensity, intensity)
    axes = (row_axis, col_axis, channel_axis)
    return _transformed(x, axes, fill_mode, cval, interpolation_order, shear=shear)


def random_zoom(
    x: np.ndarray,
    zoom_range: Any,
    row_axis: int = 1,
    col_axis: int = 2,
    channel_axis: int = 0,
    fill_mode: str = "nearest",
    cval: float = 0.0,
    interpolation_order: int = 1,
) -> np.ndarray:
    """x (rank 3) zoomed by two uniform random factors (rows, columns) in zoom_range (two
    floats; above 1 shrinks the picture, as in Keras)."""
    if len(zoom_range) != 2:
        raise ValueError(
            f"`zoom_range` should be a tuple or list of two floats. Received: {zoom_range}"
        )
    if zoom_range[0] == 1 and zoom_range[1] == 1:
        zx, zy = 1, 1
    else:
        zx, zy = np.random.uniform(zoom_range[0], zoom_range[1], 2)
    axes = (row_axis, col_axis, channel_axis)
    return _transformed(x, axes, fill_mode, cval, interpolation_order, zx=zx, zy=zy)


def apply_channel_shift(x: np.ndarray, intensity: float, channel_axis: int = 0) -> np.ndarray:
    """x (rank 3) plus `intensity`, each channel clipped to the image's own min and max."""
    x = np.rollaxis(x, channel_axis, 0)
    min_x, max_x = np.min(x), np.max(x)
    x = np.stack([np.clip(channel + intensity, min_x, max_x) for channel in x], axis=0)
    return np.rollaxis(x, 0, channel_axis + 1)


def random_channel_shift(x: np.ndarray, intensity_range: float, channel_axis: int = 0) -> Any:
    """apply_channel_shift by a uniform random intensity in [-intensity_range, intensity_range]."""
    intensity = np.random.uniform(-intensity_range, intensity_range)
    return apply_channel_shift(x, intensity, channel_axis=channel_axis)


def apply_brightness_shift(x: np.ndarray, brightness: float, scale: bool = True) -> np.ndarray:
    """x (rank 3, channels last) brightened by the factor `brightness` through PIL's
    ImageEnhance (so as 8-bit values, as Keras does); scale=False maps the result back to x's own
    range when that is outside [0, 255]."""
    enhance = _pil("apply_brightness_shift", "ImageEnhance")
    x_min, x_max = np.min(x), np.max(x)
    local_scale = (x_min < 0) or (x_max > 255)
    img = array_to_img(x, scale=local_scale or scale)
    x = img_to_array(enhance.Brightness(img).enhance(brightness))
    if not scale and local_scale:
        x = x / 255 * (x_max - x_min) + x_min
    return x


def random_brightness(x: np.ndarray, brightness_range: Any, scale: bool = True) -> np.ndarray:
    """apply_brightness_shift by a uniform random factor in brightness_range (two floats)."""
    if len(brightness_range) != 2:
        raise ValueError(
            "`brightness_range should be tuple or list of two floats. "
            f"Received: {brightness_range}"
        )
    u = np.random.uniform(brightness_range[0], brightness_range[1])
    return apply_brightness_shift(x, u, scale)


def transform_matrix_offset_center(matrix: np.ndarray, x: int, y: int) -> np.ndarray:
    """`matrix` about the center of an x-by-y image instead of its corner."""
    o_x = float(x) / 2 - 0.5
    o_y = float(y) / 2 - 0.5
    offset_matrix = np.array([[1, 0, o_x], [0, 1, o_y], [0, 0, 1]])
    reset_matrix = np.array([[1, 0, -o_x], [0, 1, -o_y], [0, 0, 1]])
    return np.dot(np.dot(offset_matrix, matrix), reset_matrix)


def apply_affine_transform(
    x: np.ndarray,
    theta: float = 0,
    tx: float = 0,
    ty: float = 0,
    shear: float = 0,
    zx: float = 1,
    zy: float = 1,
    row_axis: int = 1,
    col_axis: int = 2,
    channel_axis: int = 0,
    fill_mode: str = "nearest",
    cval: float = 0.0,
    order: int = 1,
) -> np.ndarray:
    """x (rank 3, channels first or last) through Keras's affine transform about its center:
    rotation by theta degrees, shift by tx rows and ty columns, shear by `shear` degrees and zoom
    by zx, zy, each channel resampled by scipy.ndimage.affine_transform (spline `order`; outside
    points per fill_mode / cval). x itself when nothing is to be done (SciPy not needed then)."""
    if np.unique([row_axis, col_axis, channel_axis]).size != 3:
        raise ValueError("'row_axis', 'col_axis', and 'channel_axis' must be distinct")
    axes = {row_axis, col_axis, channel_axis}
    if axes != {0, 1, 2}:
        raise ValueError(f"Invalid axis' indices: {axes - {0, 1, 2}}")
    x = np.asarray(x)
    if x.ndim != 3:
        raise ValueError("Input arrays must be multi-channel 2D images.")
    if channel_axis not in [0, 2]:
        raise ValueError("Channels are allowed and the first and last dimensions.")
    # The matrices in Keras's order and types (an int shift stays an int matrix until offset).
    matrices = []
    if theta != 0:
        t = np.deg2rad(theta)
        matrices.append(
            np.array([[np.cos(t), -np.sin(t), 0], [np.sin(t), np.cos(t), 0], [0, 0, 1]])
        )
    if tx != 0 or ty != 0:
        matrices.append(np.array([[1, 0, tx], [0, 1, ty], [0, 0, 1]]))
    if shear != 0:
        s = np.deg2rad(shear)
        matrices.append(np.array([[1, -np.sin(s), 0], [0, np.cos(s), 0], [0, 0, 1]]))
    if zx != 1 or zy != 1:
        matrices.append(np.array([[zx, 0, 0], [0, zy, 0], [0, 0, 1]]))
    if not matrices:
        return x
    ndimage = _ndimage()
    matrix = matrices[0]
    for m in matrices[1:]:
        matrix = np.dot(matrix, m)
    matrix = transform_matrix_offset_center(matrix, x.shape[row_axis], x.shape[col_axis])
    x = np.rollaxis(x, channel_axis, 0)
    # The matrix is in (x, y) = (row, column) terms; numpy's first index is the row, so with
    # columns after rows the matrix is conjugated by the swap (rows and columns 0, 1 exchanged).
    if col_axis > row_axis:
        matrix[:, [0, 1]] = matrix[:, [1, 0]]
        matrix[[0, 1]] = matrix[[1, 0]]
    channels = [
        ndimage.affine_transform(
            c, matrix[:2, :2], matrix[:2, 2], order=order, mode=fill_mode, cval=cval
        )
        for c in x
    ]
    return np.rollaxis(np.stack(channels, axis=0), 0, channel_axis + 1)


def array_to_img(
    x: Any, data_format: Optional[str] = None, scale: bool = True, dtype: Optional[str] = None
) -> Any:
    """A PIL Image of the rank-3 array x (1 channel: "L", or "I" above 255; 3: "RGB"; 4: "RGBA");
    scale stretches x to [0, 255] first. Needs PIL."""
    data_format = _data_format(data_format)
    image = _pil("array_to_img")
    x = np.asarray(x, dtype=dtype or backend.floatx())
    if x.ndim != 3:
        raise ValueError(
            f"Expected image array to have rank 3 (single image). Got array with shape: {x.shape}"
        )
    if data_format == "channels_first":
        x = x.transpose(1, 2, 0)
    if scale:
        x = x - np.min(x)
        x_max = np.max(x)
        if x_max != 0:
            x /= x_max
        x *= 255
    channels = x.shape[2]
    if channels in (3, 4):
        return image.fromarray(x.astype("uint8"), "RGB" if channels == 3 else "RGBA")
    if channels == 1:
        if np.max(x) > 255:  # 32-bit signed integer grayscale
            return image.fromarray(x[:, :, 0].astype("int32"), "I")
        return image.fromarray(x[:, :, 0].astype("uint8"), "L")
    raise ValueError(f"Unsupported channel number: {channels}")


def img_to_array(img: Any, data_format: Optional[str] = None, dtype: Optional[str] = None) -> Any:
    """A PIL Image (or anything numpy reads) as a rank-3 array, a grayscale one given its
    channel axis of 1."""
    data_format = _data_format(data_format)
    x = np.asarray(img, dtype=dtype or backend.floatx())
    if x.ndim == 3:
        return x.transpose(2, 0, 1) if data_format == "channels_first" else x
    if x.ndim == 2:
        return x[None] if data_format == "channels_first" else x[:, :, None]
    raise ValueError(f"Unsupported image shape: {x.shape}")


def save_img(
    path: Any,
    x: Any,
    data_format: Optional[str] = None,
    file_format: Optional[str] = None,
    scale: bool = True,
    **kwargs: Any,
) -> None:
    """The rank-3 array x written as an image file (its format from the suffix, or file_format;
    an RGBA image as JPEG loses its alpha, with a warning). Needs PIL."""
    data_format = _data_format(data_format)
    if file_format is None and isinstance(path, (str, os.PathLike)):
        file_format = os.path.splitext(os.fspath(path))[1][1:].lower()
    if file_format and file_format.lower() == "jpg":
        file_format = "jpeg"
    img = array_to_img(x, data_format=data_format, scale=scale)
    if img.mode == "RGBA" and file_format == "jpeg":
        warnings.warn("The JPEG format does not support RGBA images, converting to RGB.")
        img = img.convert("RGB")
    img.save(path, format=file_format, **kwargs)


_RESAMPLING = ("nearest", "bilinear", "bicubic", "hamming", "box", "lanczos")


def load_img(
    path: Any,
    color_mode: str = "rgb",
    target_size: Optional[tuple] = None,
    interpolation: str = "nearest",
    keep_aspect_ratio: bool = False,
) -> Any:
    """An image file (a path or io.BytesIO) as a PIL Image in color_mode ("grayscale", "rgb" or
    "rgba"), resized to target_size (height, width) when given; keep_aspect_ratio crops its
    center to the target's aspect first. Needs PIL."""
    import io
    import pathlib

    image = _pil("load_img")
    if isinstance(path, io.BytesIO):
        img = image.open(path)
    elif isinstance(path, (pathlib.Path, bytes, str)):
        with open(str(path.resolve()) if isinstance(path, pathlib.Path) else path, "rb") as f:
            img = image.open(io.BytesIO(f.read()))
    else:
        raise TypeError(f"path should be path-like or io.BytesIO, not {type(path)}")
    modes = {"grayscale": ("L", ("L", "I;16", "I")), "rgba": ("RGBA", ("RGBA",))}
    modes["rgb"] = ("RGB", ("RGB",))
    if color_mode not in modes:
        raise ValueError('color_mode must be "grayscale", "rgb", or "rgba"')
    mode, kept = modes[color_mode]
    if img.mode not in kept:
        img = img.convert(mode)
    if target_size is None or img.size == (target_size[1], target_size[0]):
        return img
    if interpolation not in _RESAMPLING:
        raise ValueError(
            f"Invalid interpolation method {interpolation} specified. Supported methods are "
            f"{', '.join(_RESAMPLING)}"
        )
    resampling = getattr(image, "Resampling", image)
    resample = getattr(resampling, interpolation.upper())
    width, height = img.size
    target_width, target_height = target_size[1], target_size[0]
    if not keep_aspect_ratio:
        return img.resize((target_width, target_height), resample)
    crop_height = min(height, (width * target_height) // target_width)
    crop_width = min(width, (height * target_width) // target_height)
    top, left = (height - crop_height) // 2, (width - crop_width) // 2
    box = [left, top, left + crop_width, top + crop_height]
    return img.resize((target_width, target_height), resample, box=box)


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "keras.preprocessing.image",
        name,
        "ImageDataGenerator (flow), Iterator, NumpyArrayIterator, the augmentation functions "
        "(apply_affine_transform, random_rotation, random_shift, random_shear, random_zoom, "
        "apply_channel_shift, random_channel_shift, apply_brightness_shift, random_brightness) "
        "and array_to_img, img_to_array, load_img, save_img",
    )


__all__ = [
    "ImageDataGenerator",
    "Iterator",
    "NumpyArrayIterator",
    "apply_affine_transform",
    "apply_brightness_shift",
    "apply_channel_shift",
    "random_brightness",
    "random_channel_shift",
    "random_rotation",
    "random_shear",
    "random_shift",
    "random_zoom",
    "array_to_img",
    "img_to_array",
    "load_img",
    "save_img",
]
