"""What a Keras user reaches for next and crossover does not have: one clear AttributeError
naming the thing, saying it is not supported and where a pip user looks (help(crossover),
`python -m crossover --supported`)."""

import numpy as np
import pytest

import crossover as tf
from crossover import keras


@pytest.mark.parametrize(
    "get,name",
    [
        (lambda: keras.layers.Conv3D, "keras.layers.Conv3D"),
        (lambda: keras.layers.Bidirectional, "keras.layers.Bidirectional"),
        (lambda: tf.keras.layers.Embedding, "keras.layers.Embedding"),
        (lambda: keras.layers.NoSuchLayer, "keras.layers.NoSuchLayer"),
        (lambda: tf.data.TFRecordDataset, "crossover.data.TFRecordDataset"),
        (lambda: tf.VariableAggregation, "crossover.VariableAggregation"),
        (lambda: keras.applications, "keras.applications"),
        (lambda: tf.config.set_visible_devices, "config.set_visible_devices"),
    ],
)
def test_an_unsupported_name_is_an_attribute_error_that_says_so(get, name):
    with pytest.raises(AttributeError, match="is not supported") as e:
        get()
    assert name in str(e.value) and "python -m crossover --supported" in str(e.value)


def test_a_subclassed_model_computing_with_tf_ops_says_only_layers_are_traced():
    assert keras.Model is tf.keras.Model is keras.models.Model

    class Mine(keras.Model):
        def __init__(self):
            super().__init__()
            self.dense = keras.layers.Dense(3)

        def call(self, x):
            return tf.reduce_max(self.dense(x) * 2.0, axis=-1, keepdims=True)  # * 2.0 traces

    with pytest.raises(NotImplementedError, match="the op 'reduce_max' on a symbolic tensor"):
        Mine().build((None, 4))


def test_a_3d_conv_layer_says_3d_convolutions_are_not_in_the_engine():
    with pytest.raises(AttributeError, match="3-D convolutions are not in the engine"):
        keras.layers.Conv3D


def test_an_export_is_refused_clearly(tmp_path):
    model = keras.Sequential([keras.layers.Dense(2, input_shape=(3,))])
    with pytest.raises(AttributeError, match="export is not supported"):
        model.export(tmp_path / "saved")


def test_dunder_lookups_stay_plain_attribute_errors():
    assert not hasattr(keras.layers, "__wrapped__")
    assert not hasattr(tf, "__wrapped__")
    model = keras.Sequential([keras.layers.Dense(2, input_shape=(3,))])
    assert not hasattr(model, "__array__")


def test_a_missing_optimizer_says_it_is_not_in_the_engine():
    with pytest.raises(AttributeError, match="Ftrl is not supported \\(yet\\).*not in the engine"):
        keras.optimizers.Ftrl


def test_a_name_missing_from_a_tensorflow_namespace_says_it_is_not_supported():
    with pytest.raises(AttributeError, match="compat.v1.Session is not supported \\(yet\\)"):
        tf.compat.v1.Session
    with pytest.raises(AttributeError, match="config.experimental.set_visible_devices is not"):
        tf.config.experimental.set_visible_devices


def test_a_layer_subclass_computing_in_python_is_refused_not_replaced_by_its_base():
    class Zeroed(keras.layers.Dense):
        def call(self, inputs):
            return 0.0 * super().call(inputs)

    class Antirectifier(keras.layers.Layer):
        def call(self, inputs):
            return inputs

    with pytest.raises(NotImplementedError, match=r"\(Zeroed, a subclass of Dense\) has its own"):
        keras.Sequential([keras.Input(shape=(3,)), Zeroed(2)]).predict(np.zeros((1, 3)))
    with pytest.raises(NotImplementedError, match="returned its input unchanged"):
        Antirectifier()(keras.Input(shape=(3,)))  # a custom layer is traced: an identity is not

    class Renamed(keras.layers.Dense):  # no computation of its own: runs as a Dense
        pass

    model = keras.Sequential([keras.Input(shape=(3,)), Renamed(2)])
    assert model.predict(np.zeros((1, 3)), verbose=0).shape == (1, 2)
