"""keras.mixed_precision / keras.config's dtype policy: Keras 3's names, strings, defaults and
errors, and the policy reaching the engine ("mixed_bfloat16" trains in the engine's bf16).

The expected messages and values are what Keras 3.15.1 (TensorFlow 2.21) gave on the same calls."""

import json
from pathlib import Path

import numpy as np
import pytest

import crossover as tf
from crossover import _core
from crossover.keras import layers, mixed_precision

keras = tf.keras
CPU_BF16_PROBLEM = _core.cpu_precision_problem("bf16")
needs_cpu_bf16 = pytest.mark.skipif(
    bool(CPU_BF16_PROBLEM), reason=f"bf16 on this CPU: {CPU_BF16_PROBLEM}"
)


def data(n=512, features=12, classes=4):
    rng = np.random.default_rng(3)
    x = rng.random((n, features), dtype=np.float32)
    y = (x[:, :classes].argmax(axis=1)).astype(np.int64)  # learnable
    return x, y


def mlp():
    return keras.Sequential(
        [
            keras.Input(shape=(12,)),
            layers.Dense(64, activation="relu"),
            layers.Dense(4, activation="softmax"),
        ]
    )


def guide_model():
    """The Keras mixed precision guide's pattern: the softmax a float32 Activation of its own."""
    return keras.Sequential(
        [
            keras.Input(shape=(12,)),
            layers.Dense(16, activation="relu"),
            layers.Dense(4),
            layers.Activation("softmax", dtype="float32"),
        ]
    )


def compiled(model):
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


# --- Keras's API ------------------------------------------------------------------------------
def test_the_default_policy_is_float32_under_every_name():
    for get in (
        mixed_precision.global_policy,
        mixed_precision.dtype_policy,
        keras.config.dtype_policy,
    ):
        assert repr(get()) == '<DTypePolicy "float32">'
    assert keras.config.floatx() == "float32"
    assert mixed_precision.Policy() == mixed_precision.Policy("float32")


def test_set_global_policy_is_what_every_getter_and_new_layer_sees():
    mixed_precision.set_global_policy("mixed_bfloat16")
    assert repr(keras.config.dtype_policy()) == '<DTypePolicy "mixed_bfloat16">'
    dense = layers.Dense(3)
    assert repr(dense.dtype_policy) == '<DTypePolicy "mixed_bfloat16">'
    assert (dense.dtype, dense.compute_dtype, dense.variable_dtype) == (
        "float32",
        "bfloat16",
        "float32",
    )
    keras.config.set_dtype_policy(keras.DTypePolicy("float32"))
    assert mixed_precision.global_policy().name == "float32"


def test_a_layer_keeps_the_policy_it_was_made_with_or_was_given():
    before = layers.Dense(3)
    mixed_precision.set_global_policy("mixed_bfloat16")
    assert before.dtype_policy.name == "float32"
    assert layers.Dense(3, dtype="float32").dtype_policy.name == "float32"
    assert layers.Dense(3, dtype=np.float32).dtype_policy.name == "float32"
    assert layers.Dense(3, dtype=mixed_precision.Policy("float32")).dtype_policy.name == "float32"
    model = mlp()
    assert repr(model.dtype_policy) == '<DTypePolicy "mixed_bfloat16">'
    assert (model.dtype, model.compute_dtype) == ("float32", "bfloat16")


def test_policy_objects_as_keras_makes_them():
    p = mixed_precision.Policy("mixed_float16")  # a policy crossover cannot train in, to look at
    assert (p.name, p.compute_dtype, p.variable_dtype) == ("mixed_float16", "float16", "float32")
    assert p.get_config() == {"name": "mixed_float16"}
    assert mixed_precision.Policy.from_config({"name": "float64"}).compute_dtype == "float64"
    assert mixed_precision.Policy("mixed_bfloat16") == keras.DTypePolicy("mixed_bfloat16")
    assert mixed_precision.Policy("mixed_bfloat16") != "mixed_bfloat16"
    assert keras.dtype_policies.get("mixed_bfloat16") == keras.DTypePolicy("mixed_bfloat16")


def test_names_keras_refuses_are_refused_with_its_words():
    with pytest.raises(ValueError) as e:
        mixed_precision.set_global_policy("foo")
    assert str(e.value) == (
        "Cannot convert 'foo' to a mixed precision DTypePolicy. Valid policies include "
        "'mixed_float16', 'mixed_bfloat16', and the name of any float dtype such as 'float32'."
    )
    with pytest.raises(ValueError) as e:
        mixed_precision.set_global_policy(42)
    assert str(e.value) == (
        "Invalid `policy` argument. Expected the string name of a policy (such as "
        "'mixed_float16') or a `DTypePolicy` instance. Received: policy=42 (of type <class 'int'>)"
    )
    with pytest.raises(TypeError, match="'name' must be a string"):
        mixed_precision.Policy(42)
    with pytest.raises(ValueError, match="Cannot interpret `dtype` argument"):
        layers.Dense(3, dtype=42)
    with pytest.raises(ValueError, match="Cannot convert 'foo'"):
        layers.Dense(3, dtype="foo")
    assert mixed_precision.global_policy().name == "float32"


@pytest.mark.parametrize(
    "name, missing",
    [
        ("mixed_float16", "no float16 matrix products"),
        ("float16", "no float16 matrix products"),
        ("bfloat16", "optimizer state in float32"),
        ("float64", "float32 at most"),
        ("int32", "floating point"),
        ("int8_from_float32", "quantized policies"),
    ],
)
def test_policies_keras_has_and_crossover_does_not_are_not_implemented_where_used(name, missing):
    for use in (mixed_precision.set_global_policy, lambda n: layers.Dense(3, dtype=n)):
        with pytest.raises(NotImplementedError) as e:
            use(name)
        message = str(e.value)
        assert f"The dtype policy '{name}' is not supported by crossover" in message
        assert missing in message and "'float32' and 'mixed_bfloat16'" in message
    assert mixed_precision.global_policy().name == "float32"  # unchanged


def test_loss_scale_optimizer_says_why_it_is_not_there():
    with pytest.raises(AttributeError, match="LossScaleOptimizer is not supported.*float16"):
        mixed_precision.LossScaleOptimizer  # noqa: B018


# --- the engine -------------------------------------------------------------------------------
def test_float32_compiles_the_engine_in_fp32():
    assert compiled(mlp())._core.precision == "fp32"


@needs_cpu_bf16
def test_mixed_bfloat16_trains_in_the_engines_bf16_close_to_float32_and_not_equal():
    x, y = data()
    # Each new model draws new initial weights (as in Keras): the same seed for both, so that
    # the two start from the same weights and shuffle alike.
    keras.utils.set_random_seed(7)
    fp32 = compiled(mlp())
    h32 = fp32.fit(x, y, epochs=3, verbose=0).history
    mixed_precision.set_global_policy("mixed_bfloat16")
    keras.utils.set_random_seed(7)
    bf16 = compiled(mlp())
    assert bf16._core.precision == "bf16"
    h16 = bf16.fit(x, y, epochs=3, verbose=0).history
    # The first fit measured the thread count and compiled the model again: still bf16.
    assert bf16._threads_choice[1] in ("measurement", "saved measurement")
    assert bf16._core.precision == "bf16"
    assert h16["loss"] != h32["loss"]  # the bf16 products ran
    np.testing.assert_allclose(h16["loss"], h32["loss"], rtol=0.03)
    assert abs(h16["accuracy"][-1] - h32["accuracy"][-1]) < 0.03
    for w16, w32 in zip(bf16.get_weights(), fp32.get_weights()):
        assert w16.dtype == np.float32  # float32 variables
        np.testing.assert_allclose(w16, w32, atol=2e-2)
    assert bf16.predict(x[:4]).dtype == np.float32


@needs_cpu_bf16
def test_a_float32_activation_after_mixed_dense_layers_is_keras_guides_pattern_and_trains_bf16():
    mixed_precision.set_global_policy("mixed_bfloat16")
    model = guide_model()
    assert compiled(model)._core.precision == "bf16"


def test_dense_layers_of_different_policies_are_not_implemented_naming_them():
    mixed_precision.set_global_policy("mixed_bfloat16")
    model = keras.Sequential(
        [
            keras.Input(shape=(12,)),
            layers.Dense(16, activation="relu"),
            layers.Dense(4, activation="softmax", dtype="float32"),
        ]
    )
    with pytest.raises(NotImplementedError) as e:
        compiled(model)
    message = str(e.value)
    assert "'dense' (dtype policy 'mixed_bfloat16') and 'dense_1' ('float32') differ" in message
    assert "one precision" in message


@pytest.mark.skipif(not CPU_BF16_PROBLEM, reason="this CPU has bf16")
def test_the_engines_refusal_on_a_cpu_without_bf16_is_compiles_value_error():
    mixed_precision.set_global_policy("mixed_bfloat16")
    with pytest.raises(ValueError) as e:
        compiled(mlp())
    assert str(e.value) == "precision bf16: " + CPU_BF16_PROBLEM


def float32_core_model(policy: str = "float32"):
    """The engine's model Input(4) -> Dense(3, softmax), its Dense under `policy`."""
    dense = _core.layer_from_config("Dense", '{"units": 3, "activation": "softmax"}')
    dense.dtype_policy = policy
    return _core.Sequential([_core.layer_from_config("InputLayer", '{"shape": [4]}'), dense])


def mixed_core_model():
    return float32_core_model("mixed_bfloat16")


def test_this_cpus_answer_is_the_engines():
    # What compile asks (cpu_precision_problem) is what the engine's compile does on this CPU.
    adam = _core.optimizer_from_name("adam")
    for precision in ("bf16", ""):  # given, or the layers' policy's (the default)
        model = mixed_core_model()
        if CPU_BF16_PROBLEM:
            with pytest.raises(ValueError, match="precision bf16: " + CPU_BF16_PROBLEM[:20]):
                model.compile(adam, "sparse_categorical_crossentropy", [], precision=precision)
        else:
            model.compile(adam, "sparse_categorical_crossentropy", [], precision=precision)
            assert model.precision == "bf16"
    model = float32_core_model()
    with pytest.raises(ValueError, match="tf32 is a GPU precision"):
        model.compile(adam, "sparse_categorical_crossentropy", [], precision="tf32")


def test_the_engine_refuses_a_precision_that_disagrees_with_the_layers_policy():
    adam = _core.optimizer_from_name("adam")
    with pytest.raises(ValueError) as e:
        mixed_core_model().compile(adam, "mse", [], precision="fp32")
    assert str(e.value).startswith(
        "precision fp32: the model's Dense and Conv2D layers have the dtype policy "
        "'mixed_bfloat16', which trains in bf16"
    )
    model = float32_core_model()
    with pytest.raises(ValueError, match="precision bf16: the model's .* policy 'float32'"):
        model.compile(adam, "mse", [], precision="bf16")
    model.compile(adam, "mse", [])
    assert model.precision == "fp32"


def test_tensor_float_32_is_off_by_default_and_a_gpu_switch():
    experimental = tf.config.experimental
    assert experimental.tensor_float_32_execution_enabled() is False
    experimental.enable_tensor_float_32_execution(True)
    assert experimental.tensor_float_32_execution_enabled() is True
    assert compiled(mlp())._core.precision == "fp32"  # the CPU has no TF32, as in TensorFlow


# --- model files: each layer's policy, as Keras 3 writes and reads it ---------------------------
KERAS_DATA = Path(__file__).resolve().parents[1] / "data" / "keras"
KERAS_POLICY = {
    "module": "keras",
    "class_name": "DTypePolicy",
    "config": {"name": "mixed_bfloat16"},
    "registered_name": None,
}


def test_to_json_writes_each_layers_policy_as_keras_3_does():
    mixed_precision.set_global_policy("mixed_bfloat16")
    model = guide_model()
    config = json.loads(model.to_json())["config"]
    assert config["dtype"] == KERAS_POLICY
    dtypes = [l["config"]["dtype"] for l in config["layers"]]
    # Keras 3.15 wrote the same for this model: the InputLayer's dtype is its input's.
    float32 = dict(KERAS_POLICY, config={"name": "float32"})
    assert dtypes == ["float32", KERAS_POLICY, KERAS_POLICY, float32]


def test_model_from_json_gives_each_layer_the_files_policy_not_the_global_one():
    mixed_precision.set_global_policy("mixed_bfloat16")
    text = mlp().to_json()
    mixed_precision.set_global_policy("float32")
    again = keras.models.model_from_json(text)
    assert [l.dtype_policy.name for l in again.layers] == ["mixed_bfloat16"] * 2
    assert again.to_json() == text
    # And the other way round: a float32 file under a mixed_bfloat16 global policy.
    mixed_precision.set_global_policy("mixed_bfloat16")
    assert [l.dtype_policy.name for l in keras.models.model_from_json(mlp32_json()).layers] == [
        "float32"
    ] * 2


def mlp32_json():
    mixed_precision.set_global_policy("float32")
    text = mlp().to_json()
    mixed_precision.set_global_policy("mixed_bfloat16")
    return text


def test_a_model_keras_saved_under_mixed_bfloat16_loads_and_compiles_in_bf16():
    # The config.json of the .keras archive Keras 3.15.1's model.save wrote
    # (tests/data/keras/make_mixed_precision.py).
    text = (KERAS_DATA / "small_mixed_bfloat16_keras3.json").read_text()
    model = keras.models.model_from_json(text)
    assert [(l.name, l.dtype_policy.name) for l in model.layers] == [
        ("flatten", "mixed_bfloat16"),
        ("dense", "mixed_bfloat16"),
        ("dropout", "mixed_bfloat16"),
        ("dense_1", "mixed_bfloat16"),
        ("activation", "float32"),
    ]
    if CPU_BF16_PROBLEM:
        with pytest.raises(ValueError, match="precision bf16"):
            compiled(model)
    else:
        assert compiled(model)._core.precision == "bf16"


def test_a_float16_policy_in_a_file_is_refused_naming_the_layer_and_what_is_missing():
    config = json.loads((KERAS_DATA / "small_mixed_bfloat16_keras3.json").read_text())
    config["config"]["layers"][2]["config"]["dtype"]["config"]["name"] = "mixed_float16"
    with pytest.raises(ValueError) as e:
        keras.models.model_from_json(json.dumps(config))
    assert "layer 'dense' field dtype: the dtype policy 'mixed_float16' is not supported" in str(
        e.value
    )
    assert "no float16 matrix products" in str(e.value)
