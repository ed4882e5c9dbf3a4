"""keras.optimizers.schedules: the learning-rate schedules the engine evaluates in its step.

ExponentialDecay is the library's (nn/optimizers.h with_exponential_decay): lr(step) =
initial_learning_rate * decay_rate ^ (step / decay_steps), floor()ed with staircase, step counted
from 0 at the first update, as in Keras."""

from typing import Any, Optional

from .._args import reject_unknown, unsupported_attribute


class LearningRateSchedule:
    """Keras's base class. A subclass of it (a schedule written in Python) cannot run inside the
    engine's step: optimizers refuse it with a TypeError."""

    def __call__(self, step: Any) -> float:
        raise NotImplementedError

    def get_config(self) -> dict[str, Any]:
        raise NotImplementedError


class ExponentialDecay(LearningRateSchedule):
    def __init__(
        self,
        initial_learning_rate: float,
        decay_steps: int,
        decay_rate: float,
        staircase: bool = False,
        name: Optional[str] = "ExponentialDecay",
        **kwargs: Any,
    ) -> None:
        reject_unknown("ExponentialDecay", kwargs, like="signature")
        if int(decay_steps) != decay_steps or decay_steps < 1:
            raise ValueError(
                f"ExponentialDecay: decay_steps must be a positive integer, got {decay_steps!r}"
            )
        if not decay_rate > 0:
            raise ValueError(f"ExponentialDecay: decay_rate must be positive, got {decay_rate!r}")
        self.initial_learning_rate = float(initial_learning_rate)
        self.decay_steps = int(decay_steps)
        self.decay_rate = float(decay_rate)
        self.staircase = bool(staircase)
        self.name = name

    def __call__(self, step: Any) -> float:
        """The rate at `step` (0-based), as Keras computes it (in float64 here)."""
        p = float(step) / self.decay_steps
        if self.staircase:
            p = float(int(p))
        return self.initial_learning_rate * self.decay_rate**p

    def get_config(self) -> dict[str, Any]:
        return {
            "initial_learning_rate": self.initial_learning_rate,
            "decay_steps": self.decay_steps,
            "decay_rate": self.decay_rate,
            "staircase": self.staircase,
            "name": self.name,
        }


def __getattr__(name: str) -> Any:
    raise unsupported_attribute(
        "keras.optimizers.schedules", name, "ExponentialDecay (evaluated inside the engine's step)"
    )


__all__ = ["LearningRateSchedule", "ExponentialDecay"]
