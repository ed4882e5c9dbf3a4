"""Keras's optimizers that crossover runs (Adam, AdamW, SGD, RMSprop, Adagrad, Adadelta, Nadam,
Adamax, Lion): one class per unit of the engine (backends/optimizers/), made from its registry,
with the library's formulas in Keras 3's float32 arithmetic.

`clipnorm` clips each variable's gradient to that norm on its own, `global_clipnorm` the norm of
them all together, `clipvalue` each element; as in Keras, one of the three at most."""

import inspect
import math
import weakref
from typing import Any, Optional

import numpy as np

from .. import _core
from .._args import reject_unknown, reject_unsupported
from .._tensor import _plain as _plain_tensor
from . import _names, schedules

# Keras 3's TypeError when a schedule's learning rate is set (by the user or by a callback).
NOT_SETTABLE = (
    "This optimizer was created with a `LearningRateSchedule` object as its `learning_rate` "
    "constructor argument, hence its learning rate is not settable. If you need the learning "
    "rate to be settable, you should instantiate the optimizer with a float `learning_rate` "
    "argument."
)


class Variable:
    """`optimizer.learning_rate` as Keras 3 gives it (a float32 scalar `keras.Variable`): it
    reads the rate the engine trains with now, so after LearningRateScheduler or
    ReduceLROnPlateau changed it (or during fit, from a callback) it reports the new value.
    float(v), v.numpy(), np.asarray(v), arithmetic and comparisons read it; v.assign(x) sets it,
    as `optimizer.learning_rate = x` does."""

    def __init__(self, optimizer: "Optimizer") -> None:
        self._optimizer = optimizer
        self.shape: tuple[int, ...] = ()
        self.dtype = "float32"
        self.trainable = False

    @property
    def path(self) -> str:
        return f"{self._optimizer.name}/learning_rate"

    @property
    def name(self) -> str:
        return "learning_rate"

    def numpy(self) -> np.float32:
        return np.float32(self._optimizer._current_learning_rate())

    @property
    def value(self) -> np.float32:
        return self.numpy()

    def assign(self, value: Any) -> "Variable":
        self._optimizer.learning_rate = value
        return self

    def __float__(self) -> float:
        return float(self.numpy())

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.numpy(), dtype=dtype)

    def __repr__(self) -> str:
        return (
            f"<Variable path={self.path}, shape=(), dtype=float32, value={float(self.numpy())}>"
        )

    def __format__(self, spec: str) -> str:
        return format(float(self), spec) if spec else repr(self)

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self) -> bool:
        return bool(self.numpy())

    def __neg__(self) -> Any:
        return -self.numpy()

    def __abs__(self) -> Any:
        return abs(self.numpy())


def _binary(op: str) -> Any:
    def method(self: Variable, other: Any) -> Any:
        if isinstance(other, Variable):
            other = other.numpy()
        return getattr(self.numpy(), op)(other)

    method.__name__ = op
    return method


for _op in (
    "__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
    "__rtruediv__", "__pow__", "__rpow__", "__eq__", "__ne__", "__lt__", "__le__", "__gt__",
    "__ge__",
):  # fmt: skip
    setattr(Variable, _op, _binary(_op))


def _plain_array(value: Any) -> np.ndarray:
    return np.asarray(_plain_tensor(value))


class Optimizer:
    """Common arguments; subclasses make the library's optimizer in `_core_optimizer`.
    `learning_rate` is a Variable that reads the engine's current rate while a model compiled
    with this optimizer holds it (see Variable); setting it changes that model's rate too."""

    def __init__(
        self,
        learning_rate: float,
        weight_decay: Optional[float] = None,
        clipnorm: Optional[float] = None,
        clipvalue: Optional[float] = None,
        global_clipnorm: Optional[float] = None,
        use_ema: bool = False,
        ema_momentum: float = 0.99,
        ema_overwrite_frequency: Optional[int] = None,
        loss_scale_factor: Optional[float] = None,
        gradient_accumulation_steps: Optional[int] = None,
        name: Optional[str] = None,
        **kwargs: Any,
    ) -> None:
        owner = type(self).__name__
        kwargs.pop("jit_compile", None)  # no meaning here: the step is compiled C++
        reject_unknown(owner, kwargs, like="optimizer")
        reject_unsupported(
            owner,
            use_ema=(use_ema, False),
            loss_scale_factor=(loss_scale_factor, None),
            gradient_accumulation_steps=(gradient_accumulation_steps, None),
        )
        self._schedule: Optional[schedules.ExponentialDecay] = None
        self._variable = Variable(self)
        self._owner: Optional[Any] = None  # weakref to the keras Sequential compiled with it
        self._iterations = 0
        # The keras model a custom loop's apply_gradients updates, when it is not the one
        # compiled with this optimizer (_bind_to): a weakref.
        self._loop_model: Optional[Any] = None
        if isinstance(learning_rate, schedules.ExponentialDecay):
            self._schedule = learning_rate
            self._learning_rate = float(learning_rate.initial_learning_rate)
        elif isinstance(learning_rate, schedules.LearningRateSchedule) or callable(learning_rate):
            raise TypeError(
                f"{owner}: learning_rate {learning_rate!r} is not supported: the schedule is "
                "evaluated inside the engine's step, which has ExponentialDecay (and a number)"
            )
        elif not isinstance(learning_rate, (int, float)) or isinstance(learning_rate, bool):
            raise TypeError(
                f"{owner}: learning_rate must be a number or "
                f"optimizers.schedules.ExponentialDecay, got {learning_rate!r}"
            )
        else:
            self._learning_rate = float(learning_rate)
        if sum(a is not None for a in (clipnorm, clipvalue, global_clipnorm)) > 1:
            raise ValueError(
                "Only one of `clipnorm`, `clipvalue` and `global_clipnorm` can be set. "
                f"Received: clipnorm={clipnorm}, clipvalue={clipvalue}, "
                f"global_clipnorm={global_clipnorm}"
            )
        self.weight_decay = float(weight_decay or 0.0)
        self.clipnorm = float(clipnorm or 0.0)
        self.global_clipnorm = float(global_clipnorm or 0.0)
        self.clipvalue = float(clipvalue or 0.0)
        self.name = name or _names.to_snake_case(owner)  # Keras's auto_name, unnumbered
        # As given, for get_config (Keras keeps None where an argument was not given).
        self._given = {
            "weight_decay": weight_decay,
            "clipnorm": clipnorm,
            "global_clipnorm": global_clipnorm,
            "clipvalue": clipvalue,
            "use_ema": use_ema,
            "ema_momentum": ema_momentum,
            "ema_overwrite_frequency": ema_overwrite_frequency,
            "loss_scale_factor": loss_scale_factor,
            "gradient_accumulation_steps": gradient_accumulation_steps,
        }

    # --- Keras's get_config / from_config --------------------------------------------------
    def _own_config(self) -> dict[str, Any]:
        """The subclass's arguments, in Keras's get_config order."""
        return {}

    def get_config(self) -> dict[str, Any]:
        """Keras's Optimizer.get_config: the common arguments (the learning rate as the float32
        value it holds, or the schedule serialized), then the optimizer's own."""
        if self._schedule is not None:
            learning_rate: Any = {
                "module": "keras.optimizers.schedules",
                "class_name": type(self._schedule).__name__,
                "config": self._schedule.get_config(),
                "registered_name": None,
            }
        else:
            learning_rate = float(np.float32(self._current_learning_rate()))
        config: dict[str, Any] = {"name": self.name, "learning_rate": learning_rate}
        config.update(self._given)
        config.update(self._own_config())
        return config

    @classmethod
    def from_config(cls, config: dict[str, Any], custom_objects: Any = None) -> "Optimizer":
        return cls(**{k: _deserialize(v) for k, v in config.items()})

    # --- the learning rate (Keras's optimizer.learning_rate) ------------------------------
    @property
    def learning_rate(self) -> Variable:
        return self._variable

    @learning_rate.setter
    def learning_rate(self, value: Any) -> None:
        if self._schedule is not None:
            raise TypeError(NOT_SETTABLE)
        if isinstance(value, schedules.LearningRateSchedule) or (
            callable(value) and not isinstance(value, Variable)
        ):
            raise TypeError(
                f"{type(self).__name__}: learning_rate {value!r} is not supported after "
                "construction: give a number"
            )
        rate = float(value)
        core = self._core_model()
        if core is not None:
            core.set_learning_rate(rate)  # the library checks it (positive)
        self._learning_rate = float(np.float32(rate))

    def _core_model(self) -> Any:
        """The library's model this optimizer trains, while a compiled keras model holds it."""
        model = self._owner() if self._owner is not None else None
        if model is None or model.optimizer is not self or not model._user_compiled:
            return None
        core = model._core
        return core if core is not None and core.compiled else None

    @property
    def iterations(self) -> np.int64:
        """The steps this optimizer has taken (Keras's `optimizer.iterations`; the engine's count
        while a compiled model holds it, what it had when it was last compiled otherwise)."""
        loop = self._loop_model() if self._loop_model is not None else None
        core = loop._core if loop is not None else self._core_model()
        return np.int64(core.optimizer_steps if core is not None else self._iterations)

    def _attach(self, model: Any) -> None:
        self._owner = weakref.ref(model)

    def _detach(self) -> None:
        """Keeps the rate the engine had (a Keras variable keeps its value)."""
        if self._schedule is None:
            self._learning_rate = float(self._current_learning_rate())
        self._iterations = int(self.iterations)
        self._owner = None

    def _current_learning_rate(self) -> float:
        """The engine's rate when attached (with a schedule, its value at the current step, as
        Keras's learning_rate reads it), else the one given."""
        core = self._core_model()
        base = core.learning_rate if core is not None else self._learning_rate
        s = self._schedule
        if s is None:
            return float(np.float32(base))
        step = core.optimizer_steps if core is not None else 0
        p = step / s.decay_steps
        if s.staircase:
            p = math.floor(p)
        return float(np.float32(base * s.decay_rate**p))

    def _rate(self) -> float:
        """The rate a compile builds the library's optimizer with: the current one."""
        if self._schedule is not None:
            return float(self._schedule.initial_learning_rate)
        return float(self._current_learning_rate())

    def _core_optimizer(self) -> "_core.Optimizer":
        raise NotImplementedError

    # --- custom training loops ------------------------------------------------------------
    def apply_gradients(self, grads_and_vars: Any, **kwargs: Any) -> np.int64:
        """Keras's apply_gradients(zip(grads, model.trainable_variables)): the engine's update of
        that model with these gradients (GradientTape's, or arrays made from them); returns the
        iteration count, as Keras does."""
        from .. import _tape

        reject_unknown(f"{type(self).__name__}.apply_gradients", kwargs, like="signature")
        _tape.apply_gradients(self, grads_and_vars)
        return self.iterations

    def _apply_to_variables(self, pairs: list[tuple[Any, Any]]) -> None:
        """apply_gradients on tf.Variables (a from-scratch loop): the CPU backend's own update
        (the one fit runs, _core.ArrayOptimizer) on the variables' float32 values, with this
        optimizer's state per variable (Keras's slots, made at a variable's first update) and
        its iteration count. A None gradient skips its variable, as Keras's does."""
        import warnings

        given = [(g, v) for g, v in pairs if g is not None]
        if len(given) < len(pairs):
            if not given:
                raise ValueError(
                    f"No gradients provided for any variable. Variables: "
                    f"{[getattr(v, 'name', '?') for _, v in pairs]}"
                )
            warnings.warn(
                "Gradients do not exist for variables "
                f"{[getattr(v, 'name', '?') for g, v in pairs if g is None]} when minimizing "
                "the loss. If using `model.compile()`, did you forget to provide a `loss` "
                "argument?",
                stacklevel=3,
            )
        state = getattr(self, "_array_state", None)
        if state is None:
            state = self._array_state = (_core.ArrayOptimizer(get(self)), {})
            self._array_state_steps = int(self._iterations)
        engine, slots = state
        if self._schedule is None and engine.learning_rate != np.float32(self._learning_rate):
            engine.set_learning_rate(self._learning_rate)
        owner = type(self).__name__
        batch = []
        for i, (grad, var) in enumerate(given):
            value = var._eager_read()
            if getattr(var, "_op", None) is not None:
                raise NotImplementedError(
                    f"{owner}.apply_gradients on {var.name}, a weight of a model's graph (the "
                    f"model's engine holds and updates it: train the model, or apply the "
                    f"gradients of model.trainable_variables)"
                )
            if value.dtype != np.float32:
                raise NotImplementedError(
                    f"{owner}.apply_gradients on {var.name} of dtype {value.dtype.name} is not "
                    f"supported (yet): crossover's optimizers update float32 variables"
                )
            g = np.asarray(_plain_array(grad), dtype=np.float32, order="C")
            if g.shape != value.shape:
                raise ValueError(
                    f"{owner}.apply_gradients: the gradient of {var.name} has shape {g.shape}, "
                    f"the variable {value.shape}"
                )
            if id(var) not in slots:
                first = engine.initial_slot_value
                shape = value.shape
                slots[id(var)] = (
                    var,
                    np.full(shape, first, np.float32),
                    np.zeros(shape, np.float32),
                    np.zeros(shape if engine.third_slot else (0,), np.float32),  # velocity_hat
                )
            _, slot1, slot2, slot3 = slots[id(var)]
            new = np.array(value, dtype=np.float32, order="C")  # earlier reads keep theirs
            batch.append((new, g, slot1, slot2, slot3, True))
        engine.step(batch)
        for (grad, var), (new, *_rest) in zip(given, batch):
            var._array = new
        self._iterations = self._array_state_steps + int(engine.steps)

    def apply(self, grads: Any, trainable_variables: Any = None) -> np.int64:
        """Keras 3's apply(grads, trainable_variables): apply_gradients of the pairs."""
        if trainable_variables is None:
            raise NotImplementedError(
                f"{type(self).__name__}.apply without trainable_variables is not supported "
                "(yet): give the model's trainable_variables, as apply_gradients takes them"
            )
        return self.apply_gradients(zip(list(grads), list(trainable_variables)))

    def _bind_to(self, model: Any, core: Any) -> None:
        """Before an update of `model` with this optimizer: the engine's model trains with it
        (the one it was compiled with; else, from its first update on, this one with fresh
        state, as a Keras optimizer builds its variables at its first apply_gradients)."""
        if self._core_model() is core:
            self._loop_model = None
            return
        self._loop_model = weakref.ref(model)
        bound = getattr(model, "_loop_optimizer", None)
        if bound is None or bound[0] is not self or bound[1] is not core:
            core.use_optimizer(get(self))
            model._loop_optimizer = (self, core)
            model._loop_rate = self._current_learning_rate()
        elif self._schedule is None and self._learning_rate != model._loop_rate:
            core.set_learning_rate(self._learning_rate)  # optimizer.learning_rate = x since
            model._loop_rate = self._learning_rate

    def _scheduled(self) -> "_core.Optimizer":
        """The library's optimizer with this optimizer's learning-rate schedule, if any."""
        core = self._core_optimizer()
        if self.clipnorm:
            core = _core.with_tensor_clipnorm(core, self.clipnorm)
        s = self._schedule
        if s is None:
            return core
        return _core.with_exponential_decay(core, s.decay_steps, s.decay_rate, s.staircase)


def _optimizer_class(spec: dict[str, Any], base: type) -> type:
    """A Keras optimizer class made from the engine's unit of it (_core.optimizer_classes): its
    signature (learning_rate, then its own arguments, in Keras's order, by position or keyword),
    its defaults, its get_config and the library optimizer it builds. Nothing about a kind is
    written here: a unit added to the engine is a class here."""
    class_name = spec["class_name"]
    own = [(n, d, t) for n, d, t in spec["arguments"]]
    names = ["learning_rate"] + [n for n, _, _ in own]
    defaults: dict[str, Any] = {"learning_rate": spec["learning_rate"]}
    for n, d, t in own:
        defaults[n] = bool(d) if t in ("flag", "refused") else d

    def __init__(self: Optimizer, *args: Any, **kwargs: Any) -> None:
        if len(args) > len(names):
            raise TypeError(
                f"{class_name}() takes at most {len(names)} positional arguments "
                f"({', '.join(names)}), got {len(args)}"
            )
        for n, value in zip(names, args):
            if n in kwargs:
                raise TypeError(f"{class_name}() got multiple values for argument '{n}'")
            kwargs[n] = value
        values = {n: kwargs.pop(n, defaults[n]) for n in names}
        if spec["weight_decay"]:
            kwargs.setdefault("weight_decay", spec["weight_decay"])  # AdamW's
        Optimizer.__init__(self, learning_rate=values["learning_rate"], **kwargs)
        for n, _, t in own:
            if t == "refused":
                reject_unsupported(class_name, **{n: (values[n], False)})
                setattr(self, n, False)
            elif t == "flag":
                setattr(self, n, values[n])  # as given, as Keras's get_config returns it
            else:
                setattr(self, n, float(values[n]))
        self._core_optimizer()  # the engine checks each argument's range now, as Keras's init

    def _own_config(self: Optimizer) -> dict[str, Any]:
        return {n: getattr(self, n) for n, _, _ in own}

    def _core_optimizer(self: Optimizer) -> "_core.Optimizer":
        arguments = {n: float(getattr(self, n)) for n, _, _ in own}
        arguments.update(
            learning_rate=self._rate(),
            weight_decay=self.weight_decay,
            global_clipnorm=self.global_clipnorm,
            clipvalue=self.clipvalue,
        )
        return _core.make_optimizer(class_name, arguments)

    parameters = [
        inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=defaults[n])
        for n in names
    ] + [inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD)]
    __init__.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + parameters
    )
    return type(
        class_name,
        (base,),
        {
            "__init__": __init__,
            "_own_config": _own_config,
            "_core_optimizer": _core_optimizer,
            "__module__": __name__,
            "__qualname__": class_name,
            "__doc__": f"Keras's {class_name}, run by the engine's unit of it.",
        },
    )


_CLASSES: dict[str, type] = {}
for _spec in _core.optimizer_classes():
    _CLASSES[_spec["class_name"]] = _optimizer_class(
        _spec, _CLASSES.get(_spec["alias_of"], Optimizer)
    )
globals().update(_CLASSES)
_BY_NAME = {name.lower(): cls for name, cls in _CLASSES.items()}


def from_identifier(identifier: Any) -> Any:
    """The keras optimizer object compile sets as model.optimizer: the one given, or for a name
    the class with its defaults (as keras.optimizers.get does)."""
    if isinstance(identifier, str) and identifier.lower() in _BY_NAME:
        return _BY_NAME[identifier.lower()]()
    return identifier


def get(identifier: Any) -> "_core.Optimizer":
    """The library's optimizer for a name in _BY_NAME ('adam', 'sgd', ...) or an Optimizer."""
    if isinstance(identifier, Optimizer):
        return identifier._scheduled()
    if isinstance(identifier, str):
        return _core.optimizer_from_name(identifier.lower())
    raise TypeError(
        f"optimizer must be a name such as 'adam' or a keras optimizer, got {identifier!r}"
    )


# --- a compile_config's objects (saving.py's load_model; Optimizer.from_config: a schedule) ---
# keras.* modules of the objects a compile_config names, as Keras serializes them.
def _modules() -> dict[str, Any]:
    from . import losses, metrics, optimizers, schedules

    return {
        "keras.optimizers": optimizers,
        "keras.optimizers.schedules": schedules,
        "keras.losses": losses,
        "keras.metrics": metrics,
    }


def _deserialize(value: Any) -> Any:
    """A value of a compile_config as Keras's deserialize_keras_object gives it: serialized
    objects ({"module", "class_name", "config"}) become crossover's objects of that class (its
    own "not supported (yet)" error for one it lacks), Keras's functions their names."""
    if isinstance(value, list):
        return [_deserialize(v) for v in value]
    if not isinstance(value, dict) or "class_name" not in value:
        return value
    module_name, class_name = value.get("module"), value["class_name"]
    config = value.get("config")
    if class_name == "function" and isinstance(config, str):
        return config  # keras.losses.sparse_categorical_crossentropy is saved by its name
    module = _modules().get(module_name)
    if module is None or not isinstance(config, dict):
        raise ValueError(f"{module_name}.{class_name} is not supported (yet)")
    cls = getattr(module, class_name)  # the module's "not supported (yet)" AttributeError
    return cls(**{k: _deserialize(v) for k, v in config.items()})


__all__ = ["Variable", "Optimizer", *_CLASSES, "get", "schedules"]


def __getattr__(name: str) -> Any:
    from .._args import unsupported_attribute

    what = ", ".join(_CLASSES) + " (and schedules.ExponentialDecay)"
    if name in ("Ftrl", "Adafactor", "Lamb", "Muon"):
        what += f"; {name} is not in the engine"
    raise unsupported_attribute("keras.optimizers", name, what)
