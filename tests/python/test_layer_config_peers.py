"""Layer.get_config() of crossover's built-in layers against Keras 3.15's own: the same keys and
values, every default spelled out, for layers made with Keras's argument forms (what a script
that prints or copies a layer's config sees). Keras runs in a subprocess with the peers' Python
(test_keras_archive_peers.run_keras); without one, skipped with a message saying so."""

import json

import pytest

from crossover.keras import layers
from test_keras_archive_peers import run_keras

# Each made the same way on both sides (its name given, so the automatic numbering plays no part).
MADE = [
    'InputLayer(shape=(28, 28), name="i")',
    'Dense(16, activation="relu", name="d")',
    'Dense(3, use_bias=False, kernel_initializer="he_normal", name="d2")',
    'Dropout(0.25, name="dr")',
    'Flatten(name="f")',
    'Conv2D(8, 3, strides=2, padding="same", activation="relu", name="c")',
    'Conv2DTranspose(4, (3, 3), strides=2, name="ct")',
    'MaxPooling2D((2, 2), name="mp")',
    'AveragePooling2D(pool_size=3, strides=1, padding="same", name="ap")',
    'GlobalAveragePooling2D(name="gap")',
    'GlobalMaxPooling2D(name="gmp")',
    'Reshape((7, 7, 16), name="r")',
    'BatchNormalization(momentum=0.9, epsilon=1e-5, name="bn")',
    'LayerNormalization(name="ln")',
    'UpSampling2D(2, name="up")',
    'Rescaling(1.0 / 255, name="rs")',
    'Activation("tanh", name="a")',
    'LeakyReLU(negative_slope=0.1, name="lr")',
    'ELU(name="e")',
    'ReLU(name="re")',
    'Softmax(name="sm")',
    'ZeroPadding2D(((1, 2), (0, 3)), name="zp")',
    'Cropping2D(1, name="cr")',
    'Permute((2, 1), name="p")',
    'RepeatVector(3, name="rv")',
    'GaussianNoise(0.1, name="gn")',
    'GaussianDropout(0.2, name="gd")',
    'SpatialDropout2D(0.2, name="sd")',
    'Add(name="add")',
    'Concatenate(name="cat")',
]

KERAS = """
    import json
    import keras
    from keras import layers
    made = {made!r}
    print(json.dumps({{m: eval("layers." + m).get_config() for m in made}}))
"""


def normalized(config: dict) -> dict:
    """JSON's view (tuples as lists), as a model file holds it."""
    return json.loads(json.dumps(config))


@pytest.fixture(scope="module")
def keras_configs(tmp_path_factory) -> dict:
    return run_keras(KERAS.format(made=MADE), tmp_path_factory.mktemp("config"))


@pytest.mark.parametrize("made", MADE)
def test_get_config_is_kerass(made: str, keras_configs: dict) -> None:
    ours = normalized(eval("layers." + made).get_config())
    theirs = keras_configs[made]
    assert sorted(ours) == sorted(theirs), made
    differing = {k: (ours[k], theirs[k]) for k in theirs if ours[k] != theirs[k]}
    assert not differing, f"{made}: (crossover, Keras) {differing}"
