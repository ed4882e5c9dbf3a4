"""keras.initializers: Keras 3's initializers, by class (HeNormal(seed=...)) or by name
('he_normal'), for Dense's and Conv2D's kernel_initializer and bias_initializer and
BatchNormalization's four.

Each has Keras's arguments, defaults and get_config. The values follow Keras's distribution
(VarianceScaling's fans and scale, the truncated normal's cut at two standard deviations, ...)
but come from crossover's own random stream (the model's seed, the layer, the weight): Keras's
random numbers cannot be reproduced, and a `seed` given here is kept for the model file only.
Checking the arguments is the library's (crossover._core), when a layer takes the initializer."""

import json
from typing import Any, Optional

from .. import _core, _seed, _tensor
from .._args import unsupported_attribute


class Initializer:
    """The base class: get_config, from_config, and __call__(shape) drawing the values."""

    def get_config(self) -> dict[str, Any]:
        return {}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> "Initializer":
        return cls(**config)

    def clone(self) -> "Initializer":
        return type(self).from_config(self.get_config())

    def __call__(self, shape: Any, dtype: Any = None) -> _tensor.Tensor:
        seed = getattr(self, "seed", None)
        if seed is None:  # Keras's unseeded initializer: new values at each call
            seed = _seed.draw_for_weight()
        values = _core.initial_values(_to_json(self), [int(d) for d in shape], int(seed))
        return _tensor.convert_to_tensor(values)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"{type(self).__name__}({args})"


class Constant(Initializer):
    def __init__(self, value: float = 0.0) -> None:
        self.value = value

    def get_config(self) -> dict[str, Any]:
        return {"value": self.value}


class Zeros(Initializer):
    pass


class Ones(Initializer):
    pass


class _Seeded(Initializer):
    def __init__(self, seed: Optional[int] = None) -> None:
        self.seed = seed

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed}


class RandomNormal(_Seeded):
    def __init__(self, mean: float = 0.0, stddev: float = 0.05, seed: Optional[int] = None) -> None:
        super().__init__(seed)
        self.mean = mean
        self.stddev = stddev

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed, "mean": self.mean, "stddev": self.stddev}


class TruncatedNormal(RandomNormal):
    pass


class RandomUniform(_Seeded):
    def __init__(
        self, minval: float = -0.05, maxval: float = 0.05, seed: Optional[int] = None
    ) -> None:
        super().__init__(seed)
        self.minval = minval
        self.maxval = maxval

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed, "minval": self.minval, "maxval": self.maxval}


class VarianceScaling(_Seeded):
    def __init__(
        self,
        scale: float = 1.0,
        mode: str = "fan_in",
        distribution: str = "truncated_normal",
        seed: Optional[int] = None,
        input_axes: Any = None,
        output_axes: Any = None,
    ) -> None:
        super().__init__(seed)
        # Other fans than Keras's default ones: refused by the library when a layer takes it.
        self.input_axes = input_axes
        self.output_axes = output_axes
        if not scale > 0.0:
            raise ValueError(f"VarianceScaling: scale must be a positive float, got {scale!r}")
        mode = str(mode).lower()
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"VarianceScaling: invalid mode {mode!r}: fan_in, fan_out or fan_avg")
        distribution = str(distribution).lower()
        if distribution == "normal":  # Keras's alias
            distribution = "truncated_normal"
        if distribution not in ("truncated_normal", "untruncated_normal", "uniform"):
            raise ValueError(
                f"VarianceScaling: invalid distribution {distribution!r}: truncated_normal, "
                "untruncated_normal or uniform"
            )
        self.scale = scale
        self.mode = mode
        self.distribution = distribution

    def get_config(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "scale": self.scale,
            "mode": self.mode,
            "distribution": self.distribution,
            "input_axes": self.input_axes,
            "output_axes": self.output_axes,
        }


class _Named(VarianceScaling):
    """A VarianceScaling whose scale, mode and distribution its class fixes."""

    _args: tuple[float, str, str] = (1.0, "fan_in", "truncated_normal")

    def __init__(
        self, seed: Optional[int] = None, input_axes: Any = None, output_axes: Any = None
    ) -> None:
        super().__init__(*self._args, seed=seed, input_axes=input_axes, output_axes=output_axes)

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed, "input_axes": self.input_axes, "output_axes": self.output_axes}


class GlorotUniform(_Named):
    _args = (1.0, "fan_avg", "uniform")


class GlorotNormal(_Named):
    _args = (1.0, "fan_avg", "truncated_normal")


class HeNormal(_Named):
    _args = (2.0, "fan_in", "truncated_normal")


class HeUniform(_Named):
    _args = (2.0, "fan_in", "uniform")


class LecunNormal(_Named):
    _args = (1.0, "fan_in", "truncated_normal")


class LecunUniform(_Named):
    _args = (1.0, "fan_in", "uniform")


class Identity(Initializer):
    def __init__(self, gain: float = 1.0) -> None:
        self.gain = gain

    def get_config(self) -> dict[str, Any]:
        # Keras 3.15 writes no field (its gain is lost); crossover keeps a gain other than 1.
        return {} if self.gain == 1.0 else {"gain": self.gain}


class Orthogonal(_Seeded):
    def __init__(self, gain: float = 1.0, seed: Optional[int] = None) -> None:
        super().__init__(seed)
        self.gain = gain

    def get_config(self) -> dict[str, Any]:
        return {"seed": self.seed, "gain": self.gain}


IdentityInitializer = Identity
OrthogonalInitializer = Orthogonal

# Keras 3's identifiers: each class's snake-case name, and its aliases.
_BY_NAME: dict[str, type] = {
    "constant": Constant,
    "zeros": Zeros,
    "zero": Zeros,
    "ones": Ones,
    "one": Ones,
    "random_normal": RandomNormal,
    "normal": RandomNormal,
    "truncated_normal": TruncatedNormal,
    "random_uniform": RandomUniform,
    "uniform": RandomUniform,
    "variance_scaling": VarianceScaling,
    "glorot_uniform": GlorotUniform,
    "glorot_normal": GlorotNormal,
    "he_normal": HeNormal,
    "he_uniform": HeUniform,
    "lecun_normal": LecunNormal,
    "lecun_uniform": LecunUniform,
    "identity": Identity,
    "orthogonal": Orthogonal,
}
_CLASSES: dict[str, type] = {
    c.__name__: c
    for c in (
        Constant,
        Zeros,
        Ones,
        RandomNormal,
        TruncatedNormal,
        RandomUniform,
        VarianceScaling,
        GlorotUniform,
        GlorotNormal,
        HeNormal,
        HeUniform,
        LecunNormal,
        LecunUniform,
        Identity,
        Orthogonal,
    )
}
_CLASSES["IdentityInitializer"] = Identity
_CLASSES["OrthogonalInitializer"] = Orthogonal

# keras.initializers.he_normal and the other snake-case names are the classes, as in Keras 3.
constant, zeros, ones = Constant, Zeros, Ones
random_normal, truncated_normal, random_uniform = RandomNormal, TruncatedNormal, RandomUniform
variance_scaling, orthogonal, identity = VarianceScaling, Orthogonal, Identity
glorot_uniform, glorot_normal = GlorotUniform, GlorotNormal
he_normal, he_uniform, lecun_normal, lecun_uniform = HeNormal, HeUniform, LecunNormal, LecunUniform


def serialize(initializer: Initializer) -> dict[str, Any]:
    """Keras 3's serialized form: module, class_name, config, registered_name."""
    name = type(initializer).__name__
    return {
        "module": "keras.initializers",
        "class_name": name,
        "config": initializer.get_config(),
        "registered_name": None,
    }


def deserialize(config: Any, custom_objects: Any = None) -> Initializer:
    """The initializer a serialized dict ({"class_name", "config"}) or an identifier names."""
    if isinstance(config, str):
        return get(config)
    if not isinstance(config, dict) or not isinstance(config.get("class_name"), str):
        raise ValueError(f"keras.initializers.deserialize: unreadable initializer {config!r}")
    cls = _CLASSES.get(config["class_name"])
    if cls is None:
        raise ValueError(
            f"keras.initializers: initializer {config['class_name']!r} is not supported by "
            f"crossover (it has {', '.join(sorted(_CLASSES))})"
        )
    return cls.from_config(dict(config.get("config") or {}))


def get(identifier: Any) -> Optional[Initializer]:
    """keras.initializers.get: None, an Initializer, an identifier ('he_normal' or 'HeNormal'),
    a serialized dict, or an Initializer class."""
    if identifier is None or isinstance(identifier, Initializer):
        return identifier
    if isinstance(identifier, dict):
        return deserialize(identifier)
    if isinstance(identifier, str):
        cls = _BY_NAME.get(identifier) or _CLASSES.get(identifier)
        if cls is None:
            raise ValueError(
                f"keras.initializers: could not interpret initializer identifier {identifier!r} "
                f"(crossover has {', '.join(_BY_NAME)})"
            )
        return cls()
    if isinstance(identifier, type) and issubclass(identifier, Initializer):
        return identifier()
    raise ValueError(
        f"keras.initializers: could not interpret initializer {identifier!r}: crossover takes "
        "Keras's initializers by name or as keras.initializers objects, not custom callables"
    )


def _to_json(initializer: Initializer) -> str:
    return json.dumps(serialize(initializer))


def _from_json(text: str) -> Initializer:
    return deserialize(json.loads(text))


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "keras.initializers",
        name,
        "Keras's built-in initializers (" + ", ".join(sorted(_CLASSES)) + ") and get, "
        "serialize, deserialize",
    )


__all__ = sorted(_CLASSES) + sorted(_BY_NAME) + [
    "Initializer",
    "get",
    "serialize",
    "deserialize",
]
