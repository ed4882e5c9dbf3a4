"""Keras's argument checks, shared by layers, optimizers and models."""

from typing import Any, Mapping


def reject_unknown(owner: str, kwargs: Mapping[str, Any]) -> None:
    """Keras's TypeError for keyword arguments a class does not take."""
    if kwargs:
        raise TypeError(f"Unrecognized keyword arguments passed to {owner}: {dict(kwargs)}")


def reject_unsupported(owner: str, **given: tuple[Any, Any]) -> None:
    """ValueError naming a Keras argument crossover does not run, when it is not at its default.

    Each keyword maps an argument name to (value, default)."""
    for name, (value, default) in given.items():
        if value is not default and value != default:
            raise ValueError(
                f"{owner}: argument {name}={value!r} is not supported by crossover "
                f"(only {name}={default!r}); see docs/PYTHON.md"
            )
