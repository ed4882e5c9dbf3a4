"""keras.mixed_precision (and keras.config's dtype policy): which arithmetic the engine trains in.

Keras 3's names, accepted strings, defaults and errors (keras/src/dtype_policies/dtype_policy.py):
a DTypePolicy names a compute dtype and a variable dtype; each layer takes the global policy when
it is made (or its own `dtype=`). Two policies map onto crossover's engine (CompileOptions::
precision, backends/backend.h's Precision):

    "float32"         -> fp32: float32 everywhere (the default)
    "mixed_bfloat16"  -> bf16: the matrix products of the Dense layers on bfloat16 copies of their
                         operands with float32 accumulation; weights, gradients and optimizer state
                         float32 (on a GPU; on a CPU with AVX512_BF16 or AMX-BF16)

The others Keras accepts ("mixed_float16", "float16", "bfloat16", "float64", quantized ones) are a
NotImplementedError where they would be used (set_global_policy, a layer's dtype=), naming what
the engine lacks; a name Keras does not accept is Keras's own ValueError or TypeError."""

from typing import Any, Optional

from .. import _core
from .._args import SEE_SUPPORTED, unsupported_attribute

# Keras 3.15's ALLOWED_DTYPES (keras/src/backend/common/dtypes.py): the names a policy may carry.
_KERAS_DTYPES = (
    "float16",
    "float32",
    "float64",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "int8",
    "int16",
    "int32",
    "int64",
    "bfloat16",
    "bool",
    "string",
    "float8_e4m3fn",
    "float8_e5m2",
    "complex64",
    "complex128",
)
_QUANTIZATION_MODES = ("int8", "float8", "int4", "gptq", "awq")


def _standardize_dtype(dtype: Any) -> str:
    """Keras's backend.standardize_dtype: a dtype name, Python's float, numpy's float32 ..."""
    if dtype is float:
        dtype = "float32"
    elif hasattr(dtype, "name"):  # np.dtype("float32")
        dtype = dtype.name
    elif hasattr(dtype, "__name__"):  # np.float32
        dtype = dtype.__name__
    if dtype not in _KERAS_DTYPES:
        raise ValueError(f"Invalid dtype: {dtype}")
    return str(dtype)


class DTypePolicy:
    """keras.DTypePolicy (keras.mixed_precision.Policy): a layer's compute and variable dtypes.

    `DTypePolicy()` is the global policy's; "mixed_float16" / "mixed_bfloat16" compute in
    float16 / bfloat16 with float32 variables; a dtype name ("float32") is both. Any name Keras
    accepts makes a policy; crossover trains in "float32" and "mixed_bfloat16" only (the others
    are refused where a model would use them)."""

    def __init__(self, name: Optional[str] = None) -> None:
        if name is None:
            name = dtype_policy().name
        self._name = name
        self._compute_dtype, self._variable_dtype = self._parse_name(name)
        self._quantization_mode = None

    @staticmethod
    def _parse_name(name: Any) -> tuple[str, str]:
        if not isinstance(name, str):
            raise TypeError(
                "'name' must be a string, such as 'mixed_float16'. "
                f"Received: name={name} (of type {type(name)})"
            )
        if name == "mixed_float16":
            return "float16", "float32"
        if name == "mixed_bfloat16":
            return "bfloat16", "float32"
        try:
            dtype = _standardize_dtype(name)
        except ValueError:
            raise ValueError(
                f"Cannot convert '{name}' to a mixed precision DTypePolicy. Valid policies "
                "include 'mixed_float16', 'mixed_bfloat16', and the name of any float dtype such "
                "as 'float32'."
            ) from None
        return dtype, dtype

    @property
    def name(self) -> str:
        return self._name

    @property
    def compute_dtype(self) -> str:
        return self._compute_dtype

    @property
    def variable_dtype(self) -> str:
        return self._variable_dtype

    @property
    def quantization_mode(self) -> None:
        return self._quantization_mode

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "DTypePolicy":
        return cls(**config)

    def __repr__(self) -> str:
        return f'<DTypePolicy "{self._name}">'

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DTypePolicy) and self._name == other._name

    def __hash__(self) -> int:
        return hash(self._name)


class HasDTypePolicy:
    """Keras's dtype attributes of a layer (and of a model) from its `_dtype_policy`."""

    _dtype_policy: DTypePolicy

    @property
    def dtype_policy(self) -> DTypePolicy:
        return self._dtype_policy

    @property
    def dtype(self) -> str:
        """The variable dtype, as Keras's layer.dtype."""
        return self._dtype_policy.variable_dtype

    @property
    def compute_dtype(self) -> str:
        return self._dtype_policy.compute_dtype

    @property
    def variable_dtype(self) -> str:
        return self._dtype_policy.variable_dtype


Policy = DTypePolicy  # keras.mixed_precision.Policy (legacy name)
FloatDTypePolicy = DTypePolicy


def _not_implemented(name: str) -> Optional[NotImplementedError]:
    """The error for a policy the engine does not train in (its reason is the library's,
    nn/layers.h's dtype_policy_problem, shared with the model files), None for one it does."""
    why = _core.dtype_policy_problem(name)
    if not why:
        return None
    return NotImplementedError(
        f"The dtype policy '{name}' is not supported by crossover: {why}; " f"{SEE_SUPPORTED}"
    )


def engine_precision(policy: DTypePolicy) -> str:
    """The engine's precision for a policy ("fp32", "bf16"), or NotImplementedError saying what
    crossover lacks for it."""
    error = _not_implemented(policy.name)
    if error is not None:
        raise error
    return _core.dtype_policy_precision(policy.name)


def get(identifier: Any) -> DTypePolicy:
    """keras.dtype_policies.get: a policy from None (the global one), a name, a config dict or a
    DTypePolicy, as a layer's `dtype=` takes it; quantized names are refused."""
    if identifier is None:
        return dtype_policy()
    if isinstance(identifier, DTypePolicy):
        return identifier
    if isinstance(identifier, dict):
        return DTypePolicy.from_config(identifier.get("config", identifier))
    if isinstance(identifier, str):
        _refuse_quantized(identifier)
        return DTypePolicy(identifier)
    try:
        return DTypePolicy(_standardize_dtype(identifier))
    except ValueError:
        raise ValueError(
            "Cannot interpret `dtype` argument. Expected a string or an instance of "
            f"DTypePolicy. Received: dtype={identifier}"
        ) from None


def _refuse_quantized(name: str) -> None:
    if name.startswith(_QUANTIZATION_MODES):
        error = _not_implemented(name)
        if error is not None:
            raise error


_global: Optional[DTypePolicy] = None  # None: float32, Keras's default (floatx)


def set_dtype_policy(policy: Any) -> None:
    """keras.config.set_dtype_policy / keras.mixed_precision.set_global_policy: the policy of the
    layers made from now on (a layer made earlier keeps its own, as in Keras)."""
    global _global
    if not isinstance(policy, DTypePolicy):
        if not isinstance(policy, str):
            raise ValueError(
                "Invalid `policy` argument. Expected the string name of a policy (such as "
                f"'mixed_float16') or a `DTypePolicy` instance. Received: policy={policy} "
                f"(of type {type(policy)})"
            )
        _refuse_quantized(policy)
        policy = DTypePolicy(policy)
    engine_precision(policy)  # refuses, here, what crossover cannot train in
    _global = policy


def dtype_policy() -> DTypePolicy:
    """keras.config.dtype_policy / keras.mixed_precision.global_policy."""
    global _global
    if _global is None:
        _global = DTypePolicy("float32")
    return _global


set_global_policy = set_dtype_policy
global_policy = dtype_policy


def __getattr__(name: str) -> Any:
    what = (
        "DTypePolicy (Policy), set_global_policy, global_policy, set_dtype_policy and "
        "dtype_policy"
    )
    if name == "LossScaleOptimizer":
        what += "; no loss scaling: it is for float16, which the engine does not have"
    raise unsupported_attribute("keras.mixed_precision", name, what)


__all__ = [
    "DTypePolicy",
    "Policy",
    "set_global_policy",
    "global_policy",
    "set_dtype_policy",
    "dtype_policy",
]
