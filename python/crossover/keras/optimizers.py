"""Keras's optimizers that crossover runs: Adam, AdamW, SGD, RMSprop (the library's formulas).

Keras's `clipnorm` clips each variable's gradient on its own; crossover clips the global norm,
which is Keras's `global_clipnorm`: that one is taken, `clipnorm` is refused."""

from typing import Any, Optional

from .. import _core
from . import schedules
from ._args import reject_unknown, reject_unsupported


class Optimizer:
    """Common arguments; subclasses make the library's optimizer in `_core_optimizer`."""

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
        reject_unknown(owner, kwargs)
        reject_unsupported(
            owner,
            clipnorm=(clipnorm, None),
            use_ema=(use_ema, False),
            loss_scale_factor=(loss_scale_factor, None),
            gradient_accumulation_steps=(gradient_accumulation_steps, None),
        )
        self._schedule: Optional[schedules.ExponentialDecay] = None
        if isinstance(learning_rate, schedules.ExponentialDecay):
            self._schedule = learning_rate
            self.learning_rate = learning_rate.initial_learning_rate
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
            self.learning_rate = float(learning_rate)
        self.weight_decay = float(weight_decay or 0.0)
        self.global_clipnorm = float(global_clipnorm or 0.0)
        self.clipvalue = float(clipvalue or 0.0)
        self.name = name or owner.lower()

    def _core_optimizer(self) -> "_core.Optimizer":
        raise NotImplementedError

    def _scheduled(self) -> "_core.Optimizer":
        """The library's optimizer with this optimizer's learning-rate schedule, if any."""
        core = self._core_optimizer()
        s = self._schedule
        if s is None:
            return core
        return _core.with_exponential_decay(core, s.decay_steps, s.decay_rate, s.staircase)


class Adam(Optimizer):
    def __init__(
        self,
        learning_rate: float = 0.001,
        beta_1: float = 0.9,
        beta_2: float = 0.999,
        epsilon: float = 1e-7,
        amsgrad: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        reject_unsupported(type(self).__name__, amsgrad=(amsgrad, False))
        self.beta_1, self.beta_2, self.epsilon = float(beta_1), float(beta_2), float(epsilon)

    def _core_optimizer(self) -> "_core.Optimizer":
        return _core.Adam(
            self.learning_rate,
            self.beta_1,
            self.beta_2,
            self.epsilon,
            self.weight_decay,
            self.global_clipnorm,
            self.clipvalue,
            adamw=isinstance(self, AdamW),
        )


class AdamW(Adam):
    def __init__(
        self, learning_rate: float = 0.001, weight_decay: float = 0.004, **kwargs: Any
    ) -> None:
        super().__init__(learning_rate=learning_rate, weight_decay=weight_decay, **kwargs)


class SGD(Optimizer):
    def __init__(
        self,
        learning_rate: float = 0.01,
        momentum: float = 0.0,
        nesterov: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum, self.nesterov = float(momentum), bool(nesterov)

    def _core_optimizer(self) -> "_core.Optimizer":
        return _core.SGD(
            self.learning_rate,
            self.momentum,
            self.nesterov,
            self.weight_decay,
            self.global_clipnorm,
            self.clipvalue,
        )


class RMSprop(Optimizer):
    def __init__(
        self,
        learning_rate: float = 0.001,
        rho: float = 0.9,
        momentum: float = 0.0,
        epsilon: float = 1e-7,
        centered: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(learning_rate=learning_rate, **kwargs)
        reject_unsupported("RMSprop", centered=(centered, False))
        self.rho, self.momentum, self.epsilon = float(rho), float(momentum), float(epsilon)

    def _core_optimizer(self) -> "_core.Optimizer":
        return _core.RMSprop(
            self.learning_rate,
            self.rho,
            self.momentum,
            self.epsilon,
            self.weight_decay,
            self.global_clipnorm,
            self.clipvalue,
        )


def get(identifier: Any) -> "_core.Optimizer":
    """The library's optimizer for 'adam' / 'sgd' / 'rmsprop' / 'adamw' or an Optimizer."""
    if isinstance(identifier, Optimizer):
        return identifier._scheduled()
    if isinstance(identifier, str):
        return _core.optimizer_from_name(identifier.lower())
    raise TypeError(
        f"optimizer must be a name such as 'adam' or a keras optimizer, got {identifier!r}"
    )


__all__ = ["Optimizer", "Adam", "AdamW", "SGD", "RMSprop", "get", "schedules"]
