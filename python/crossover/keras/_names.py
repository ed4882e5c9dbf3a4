"""Keras's automatic names: a layer or model made without `name=` is named after its class in
snake case, numbered per name in the process (dense, dense_1, ...; sequential, sequential_1),
as keras/src/utils/naming.py does; keras.backend.clear_session() starts the numbers again."""

import collections
import re

_uids: "collections.defaultdict[str, int]" = collections.defaultdict(int)


def to_snake_case(name: str) -> str:
    name = re.sub(r"\W+", "", name)
    name = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", name).lower()


def uniquify(name: str) -> str:
    unique = f"{name}_{_uids[name]}" if name in _uids else name
    _uids[name] += 1
    return unique


def auto_name(class_name: str) -> str:
    return uniquify(to_snake_case(class_name))


def reset() -> None:
    _uids.clear()
