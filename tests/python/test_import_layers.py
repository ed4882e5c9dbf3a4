"""The Python package's modules import in layers, without cycles (issue 38, item 5): _tensor and
_tape at the bottom reach keras through hooks that keras registers (crossover._tensor's tracer,
keras.layers' calls), never by importing it. The graph is read from the sources: every import,
at module level or inside a function (a function-level import closes a cycle when it runs just
as well), except those under `if TYPE_CHECKING:`. Two cycles are a package's __init__ and the
modules it imports, which import names back from it, and stay: keras.datasets (its _load) and
crossover with compat.v1 (`import crossover as _tf`)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "crossover"
# The modules the build makes (python/CMakeLists.txt): no source here, and they import nothing.
BUILT = {"crossover._core", "crossover._build_version"}

ALLOWED = [
    {"keras/datasets/__init__.py", "keras/datasets/fashion_mnist.py", "keras/datasets/mnist.py"},
    {"__init__.py", "compat/__init__.py", "compat/v1.py"},
]


def _modules() -> dict[str, tuple[Path, bool]]:
    """Each module's dotted name: its file and whether it is a package's __init__."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        out[".".join(["crossover", *parts])] = (path, is_package)
    return out


class _Imports(ast.NodeVisitor):
    """The crossover modules one module imports (names resolved to the longest known module)."""

    def __init__(self, name: str, is_package: bool, known: set[str]) -> None:
        self.name, self.is_package, self.known = name, is_package, known
        self.found: set[str] = set()

    def visit_If(self, node: ast.If) -> None:
        if "TYPE_CHECKING" in (getattr(node.test, "id", None), getattr(node.test, "attr", None)):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def _add(self, dotted: str) -> None:
        while dotted and dotted not in self.known:
            dotted = dotted.rpartition(".")[0]
        if dotted and dotted != self.name:
            self.found.add(dotted)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] == "crossover":
                self._add(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.name.split(".")
            if not self.is_package:
                base = base[:-1]
            base = base[: len(base) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        elif node.module and node.module.split(".")[0] == "crossover":
            module = node.module
        else:
            return
        for alias in node.names:
            full = f"{module}.{alias.name}"
            self._add(full if full in self.known else module)


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph = {}
    for name, (path, is_package) in modules.items():
        visitor = _Imports(name, is_package, set(modules) | BUILT)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        graph[name] = visitor.found - BUILT
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _files(component: set[str]) -> set[str]:
    modules = _modules()
    return {modules[m][0].relative_to(PACKAGE).as_posix() for m in component}


def test_the_graph_is_read() -> None:
    graph = _graph()
    # A few edges the layering rests on, so that an empty graph cannot pass.
    assert "crossover._tensor" in graph["crossover.keras.layers"]
    assert "crossover.keras.layers" in graph["crossover.keras._sequential"]
    assert "crossover.keras._sequential" in graph["crossover.keras.models"]


def test_no_import_cycle_but_the_package_inits() -> None:
    found = [_files(c) for c in _cycles(_graph())]
    unexpected = [sorted(files) for files in found if files not in ALLOWED]
    assert not unexpected, f"import cycles among python/crossover's files: {unexpected}"


def test_the_bottom_modules_import_no_keras() -> None:
    graph = _graph()
    for name in ("crossover._tensor", "crossover._tape", "crossover._args", "crossover.data"):
        keras = sorted(m for m in graph[name] if m.startswith("crossover.keras"))
        assert not keras, f"{name} imports {keras}"


# The package's layers, bottom to top (docs/ARCHITECTURE.md, "python/"): a module imports only
# from its own layer or the ones below it, never up. The TensorFlow-shaped modules of crossover/
# (eager tensors, the tape, tf.data, tf.math, ...) are below keras; only these import keras:
ABOVE_KERAS = {
    "crossover",
    "crossover.__main__",
    "crossover._aliases",
    "crossover.saved_model",
    "crossover.train",
}
# Inside keras, the modules that make layers and models, in their layers (the others, such as
# datasets or utils, import only those below them and are left out here).
KERAS_LAYERS = [
    ["_names", "mixed_precision", "initializers", "regularizers", "schedules", "losses"],
    ["_symbolic"],
    ["layers"],
    ["metrics", "optimizers", "_trace"],  # a custom Metric's add_weight makes layers' Variables
    ["_summary", "_graph", "_archive", "callbacks", "_python_step", "_py_dataset_fit"],
    ["_sequential"],
    ["_eager"],
    ["functional", "saving"],
    ["models"],
]


def test_the_tensorflow_shaped_modules_import_no_keras() -> None:
    graph = _graph()
    for name in sorted(graph):
        if name.startswith("crossover.keras") or name in ABOVE_KERAS:
            continue
        keras = sorted(m for m in graph[name] if m.startswith("crossover.keras"))
        assert not keras, f"{name} imports {keras}, which are above it"


def test_no_keras_module_imports_one_of_a_higher_layer() -> None:
    graph = _graph()
    level = {f"crossover.keras.{m}": i for i, layer in enumerate(KERAS_LAYERS) for m in layer}
    assert set(level) <= set(graph), sorted(set(level) - set(graph))
    upward = sorted(
        f"{name} -> {target}"
        for name in level
        for target in graph[name]
        if target in level and level[target] > level[name]
    )
    assert not upward, f"imports pointing up a layer: {upward}"
