"""`python -m crossover script.py [args]`: runs an unchanged TensorFlow/Keras script on crossover.

    python -m crossover script.py [args ...]   # as `python script.py [args ...]`
    python -m crossover -m package.module [args ...]
    python -m crossover -c "import tensorflow as tf; print(tf.__version__)"
    python -m crossover --supported            # what crossover runs, module by module
    python -m crossover --version

`tensorflow`, `tensorflow.keras`, `keras` and their submodules are imported as crossover's
modules (one line on stderr says so at the first such import); the script runs as `__main__`
with `sys.argv` = [script, args ...] and its folder first on sys.path, as Python runs it; its
exit status and traceback are Python's."""

import os
import runpy
import sys
import textwrap
import traceback
import types
from typing import Optional

_USAGE = (
    "usage: python -m crossover script.py [args ...]\n"
    "       python -m crossover -m module [args ...]\n"
    "       python -m crossover -c command [args ...]\n"
    "       python -m crossover --supported | --version | --help\n"
    "Runs a TensorFlow/Keras script unchanged on crossover: tensorflow, tensorflow.keras and "
    "keras (and their submodules) are imported as crossover's modules."
)


def _public(module: types.ModuleType) -> list[str]:
    names = getattr(module, "__all__", None)
    if names is None:
        names = [n for n in vars(module) if not n.startswith("_")]
        names = [n for n in names if getattr(getattr(module, n), "__module__", "") != "typing"]
    names = [n for n in names if not n.startswith("__")]
    return sorted(set(names), key=lambda n: (n[0].islower(), n.lower()))


def supported_text() -> str:
    """What crossover has, module by module (each module's __all__), with the versions."""
    import crossover
    from crossover import keras

    lines = [
        f"crossover {crossover.__crossover_version__}: the TensorFlow {crossover.__version__} / "
        f"Keras {keras.__version__} API for Sequential models, trained by crossover's C++ engine.",
        "Run a script unchanged with `python -m crossover script.py`, or change its import to "
        "`import crossover as tf` / `from crossover import keras`.",
        "A name not listed here raises an error saying it is not supported (yet); "
        "help(crossover.keras.layers) etc. describe each name's arguments and limits.",
        "",
    ]
    modules = [("tensorflow (tf)", crossover), ("tf.keras, keras", keras)]
    for name in sorted(_public(keras)):
        if isinstance(getattr(keras, name), types.ModuleType):
            modules.append((f"keras.{name}", getattr(keras, name)))
    for name in sorted(_public(crossover)):
        if name != "keras" and isinstance(getattr(crossover, name), types.ModuleType):
            modules.append((f"tf.{name}", getattr(crossover, name)))
    seen: set[int] = set()
    for title, module in modules:
        if id(module) in seen and title.startswith(("keras.", "tf.")):
            continue
        seen.add(id(module))
        names = []
        for n in _public(module):
            value = getattr(module, n, None)
            if isinstance(value, types.SimpleNamespace):  # tf.config.experimental, threading
                names += [f"{n}.{m}" for m in sorted(vars(value)) if not m.startswith("_")]
            else:
                names.append(n)
        if not names:
            continue
        lines.append(f"{title}:")
        lines += textwrap.wrap(
            ", ".join(names), width=100, initial_indent="    ", subsequent_indent="    "
        )
    return "\n".join(lines)


def _print_exception(exc: BaseException, first_file: Optional[str]) -> None:
    """The traceback as Python prints it for the script, without this runner's frames."""
    tb = exc.__traceback__
    if first_file is not None:
        t = tb
        while t is not None and os.path.abspath(t.tb_frame.f_code.co_filename) != first_file:
            t = t.tb_next
        if t is not None:
            tb = t
    sys.excepthook(type(exc), exc.with_traceback(tb), tb)


def _run(kind: str, target: str, args: list[str]) -> int:
    from crossover import _aliases

    _aliases.install()
    first_file: Optional[str] = None
    # sys.path[0] as Python sets it: the script's folder, the current one for -m (already so
    # for `python -m crossover`), '' for -c.
    if kind == "path":
        sys.argv = [target, *args]
        first_file = os.path.abspath(target)
        sys.path[0] = os.path.dirname(first_file)
        if os.path.isdir(target):
            first_file, sys.path[0] = None, first_file
    elif kind == "module":
        sys.argv = [target, *args]  # runpy sets argv[0] to the module's file
    else:
        sys.argv = ["-c", *args]
        sys.path[0] = ""
    try:
        if kind == "path":
            runpy.run_path(os.path.abspath(target), run_name="__main__")
        elif kind == "module":
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            code = compile(target, "<string>", "exec")
            main = types.ModuleType("__main__")
            main.__dict__["__builtins__"] = __builtins__
            sys.modules["__main__"] = main
            exec(code, main.__dict__)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # noqa: B036  (Python's own: print it, status 1)
        if (
            kind == "path"
            and isinstance(e, (FileNotFoundError, IsADirectoryError))
            and (e.filename == target and not os.path.exists(target))
        ):
            print(
                f"{sys.executable}: can't open file {os.path.abspath(target)!r}: "
                f"[Errno {e.errno}] {e.strerror}",
                file=sys.stderr,
            )
            return 2
        _print_exception(e, first_file)
        return 1
    return 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print(_USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    first = argv[0]
    if first == "--supported":
        print(supported_text())
        return 0
    if first == "--version":
        import crossover

        print(
            f"crossover {crossover.__crossover_version__} (TensorFlow {crossover.__version__} / "
            f"Keras {crossover.keras.__version__} API)"
        )
        return 0
    if first in ("-m", "-c"):
        if len(argv) < 2:
            print(f"python -m crossover: argument expected for the {first} option", file=sys.stderr)
            print(_USAGE, file=sys.stderr)
            return 2
        return _run("module" if first == "-m" else "command", argv[1], argv[2:])
    if first.startswith("-"):
        print(f"python -m crossover: unknown option {first}", file=sys.stderr)
        print(_USAGE, file=sys.stderr)
        return 2
    return _run("path", first, argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
