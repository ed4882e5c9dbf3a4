"""keras.layers.Conv2DTranspose: Keras's arguments and defaults, its alias, its shapes and weights
in a model, and the arguments crossover does not run refused by name. (Against Keras itself:
test_conv2d_transpose_peers.py.)"""

import numpy as np
import pytest

from crossover import keras
from crossover.keras import layers


def test_defaults_alias_shapes_and_weights() -> None:
    layer = layers.Conv2DTranspose(4, 3)
    assert (layer.strides, layer.padding, layer.output_padding, layer.use_bias) == (
        (1, 1),
        "valid",
        None,
        True,
    )
    assert layers.Convolution2DTranspose is layers.Conv2DTranspose
    model = keras.Sequential(
        [keras.Input((5, 5, 2)), layer, layers.Conv2DTranspose(2, 3, strides=2, padding="same")]
    )
    assert model.output_shape == (None, 14, 14, 2)
    assert layer.kernel.shape == (3, 3, 4, 2)
    assert layer.bias.shape == (4,)
    model.compile(optimizer="adam", loss="mse")
    x = np.random.RandomState(0).rand(4, 5, 5, 2).astype(np.float32)
    assert model.predict(x, verbose=0).shape == (4, 14, 14, 2)
    assert model.count_params() == (3 * 3 * 4 * 2 + 4) + (3 * 3 * 2 * 4 + 2)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"output_padding": 1}, "output_padding"),
        ({"strides": 2, "dilation_rate": 2}, "dilation_rate"),  # Keras refuses it too
        ({"activity_regularizer": lambda y: y}, "activity_regularizer"),
    ],
)
def test_what_crossover_does_not_run_is_refused_by_name(kwargs: dict, name: str) -> None:
    with pytest.raises(Exception, match=name):
        layers.Conv2DTranspose(2, 3, **kwargs)
