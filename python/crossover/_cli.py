"""The `crossover` command of an installed package (`pip install crossover-*.whl`, `pip install .`).

The command is the C++ binary crossover/bin/crossover, carried inside the package; this entry
point (pyproject.toml's [project.scripts]) replaces itself with it, so its arguments, output,
signals and exit status are the binary's own."""

import os
import sys

from ._cpu import floor_message, missing_features


def binary() -> str:
    """The path of the command's binary inside this package."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "crossover")


def main() -> None:
    missing = missing_features()
    if missing:
        sys.stderr.write(f"crossover: {floor_message(missing)}\n")
        sys.exit(2)
    path = binary()
    if not os.access(path, os.X_OK):
        sys.stderr.write(
            f"crossover: this install has no command binary ({path} is missing): the package was "
            "built without it; reinstall from the wheel or with `pip install .` (docs/SETUP.md)\n"
        )
        sys.exit(2)
    os.execv(path, ["crossover", *sys.argv[1:]])


if __name__ == "__main__":
    main()
