"""The package's shape: no import cycles, no private import across packages, and nothing below
`loop.py` importing it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "boundloop"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(tree: ast.Module, *, typing_too: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    """Imports that run when the module is imported, and with `typing_too` those under
    `if TYPE_CHECKING:` as well."""
    for node in tree.body:
        if not typing_too and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for child in ast.walk(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child


def imported(name: str, path: Path, *, typing_too: bool = False) -> set[str]:
    """The package's modules that importing `name` runs first (parent packages included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in _imports(ast.parse(path.read_text(encoding="utf-8")), typing_too=typing_too):
        if isinstance(node, ast.Import):
            bases = [alias.name for alias in node.names]
            names: list[str] = []
        else:
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = node.module or ""
            bases = [f"{base}.{module}".strip(".") if node.level else module]
            names = [alias.name for alias in node.names]
        for target in bases:
            if target not in MODULES:
                continue
            targets.add(target)
            targets.update(f"{target}.{n}" for n in names if f"{target}.{n}" in MODULES)
    closure: set[str] = set()
    for target in targets:
        parts = target.split(".")
        # Importing a.b.c runs a.b's __init__ first (the root package is always under way).
        closure.update(".".join(parts[:i]) for i in range(2, len(parts) + 1))
    # A module's own packages are always being imported before it: not an edge.
    own = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return closure - own - {name}


GRAPH = {name: imported(name, path) for name, path in MODULES.items()}
TYPE_GRAPH = {name: imported(name, path, typing_too=True) for name, path in MODULES.items()}
# The one import for type checking only that points up: `RunError.result` is a `LoopResult`
# (as httpx's exceptions name its `Request` and `Response`). At run time errors.py imports
# nothing of ours.
TYPE_GRAPH["boundloop.errors"] -= {"boundloop.state"}


@pytest.mark.parametrize("graph", [GRAPH, TYPE_GRAPH], ids=["runtime", "type-checking-too"])
def test_there_is_no_import_cycle_inside_the_package(graph: dict[str, set[str]]) -> None:
    """A depth-first walk over the import graph never comes back to a module on its path."""
    done: set[str] = set()

    def visit(name: str, path: list[str]) -> None:
        if name in path:
            cycle = [*path[path.index(name) :], name]
            pytest.fail(f"import cycle: {' -> '.join(cycle)}")
        if name in done:
            return
        for target in sorted(graph[name]):
            if target != "boundloop":
                visit(target, [*path, name])
        done.add(name)

    for name in sorted(graph):
        if name != "boundloop":
            visit(name, [])


def test_nothing_below_the_loop_imports_it() -> None:
    """Configuration travels down: only what sits above the loop (the package's `__init__`,
    replay, which drives a loop's configuration, and the evals, which build and run loops)
    imports `boundloop.loop`."""
    importers = sorted(name for name, targets in TYPE_GRAPH.items() if "boundloop.loop" in targets)
    assert importers == [
        "boundloop",
        "boundloop._replay",
        "boundloop.evals._app",
        "boundloop.evals._build",
        "boundloop.evals._live",
        "boundloop.evals._runner",
    ]


def test_errors_import_nothing_of_the_package_at_run_time() -> None:
    """The exception tree is the bottom of the package."""
    assert GRAPH["boundloop.errors"] == set()


def _inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


SEALED = ("boundloop._core",)
"""The private packages entered only through their `__init__`: the core's one seam. Any other
private package (`boundloop._base`) is a folder: its modules are private to the package holding it."""


def _violations(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a private module from outside the package that holds it.

    A name starting with `_` is private to its package: `boundloop.cli._parser` to `boundloop.cli`
    (and its subpackages), `boundloop._base.recorded` to `boundloop`. A sealed private package is
    entered only through its `__init__`: outside `boundloop._core`, `boundloop._core.toolset` is
    private (the names the core exports are the way in), as a private module of a private package
    is private twice."""
    found: list[str] = []
    for name, targets in sorted(graph.items()):
        for target in sorted(targets):
            parts = target.split(".")
            for index, part in enumerate(parts):
                if not part.startswith("_") or part.startswith("__"):
                    continue
                # `a._b` is private to `a`; a module under a sealed `a._b` is private to `a._b` itself.
                package = ".".join(parts[: index + 1])
                sealed = index + 1 < len(parts) and package in SEALED
                owner = package if sealed else ".".join(parts[:index])
                if not _inside(name, owner):
                    found.append(f"{name} imports {target}, private to {owner}")
                    break
    return found


def test_the_private_rule_finds_what_it_is_for() -> None:
    """The rule itself: a private module from another package, and a module inside the core from
    outside it, are found; a package's own private modules, a private package's `__init__` and
    the modules of a private folder (`_base`) from inside its package are not."""
    graph = {
        "boundloop.mcp._link": {"boundloop._core.toolset", "boundloop._core", "boundloop.mcp._stdio"},
        "boundloop.cli._ready": {"boundloop.contract._lint", "boundloop._base.price", "boundloop._replay"},
        "boundloop._core.driver": {"boundloop._core.toolset", "boundloop._core.engine"},
        "boundloop.state": {"boundloop._base.finite", "boundloop._base._hidden", "boundloop.loop._stream"},
    }
    assert _violations(graph) == [
        "boundloop.cli._ready imports boundloop.contract._lint, private to boundloop.contract",
        "boundloop.mcp._link imports boundloop._core.toolset, private to boundloop._core",
        "boundloop.state imports boundloop._base._hidden, private to boundloop._base",
        "boundloop.state imports boundloop.loop._stream, private to boundloop.loop",
    ]


def test_no_module_imports_another_packages_private_module() -> None:
    """A module named `_x` is private to the package holding it (and that package's subpackages);
    the core is entered only through `boundloop._core` itself. Type-only imports count too."""
    assert _violations(TYPE_GRAPH) == []


def _private_names(path: Path) -> Iterator[str]:
    """`from x import _name` where `_name` is a function, class or value rather than a module."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = f"{base}.{node.module or ''}".strip(".") if node.level else node.module or ""
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and f"{module}.{alias.name}" not in MODULES:
                    yield f"{name} imports {alias.name} from {module}"


def test_no_module_imports_a_private_name_of_another() -> None:
    """A function or value named `_x` belongs to its module: a second module that needs it needs
    it under a public name (in a private module if it is not for users)."""
    assert [found for path in MODULES.values() for found in _private_names(path)] == []


@pytest.mark.parametrize("name", ["table", "guards", "machine", "diagram"])
def test_the_state_machine_is_the_ground_floor(name: str) -> None:
    """`statemachine/` holds the table, its machine and its drawing only: it imports neither the
    core, the loop, the observers (metrics, OTel) nor the stores."""
    above = (
        "boundloop._core",
        "boundloop.loop",
        "boundloop.metrics",
        "boundloop.otel",
        "boundloop.checkpoint",
    )
    targets = TYPE_GRAPH[f"boundloop.statemachine.{name}"]
    assert [t for t in sorted(targets) if t.startswith(above)] == []
    assert sorted(m.rsplit(".", 1)[-1] for m in MODULES if m.startswith("boundloop.statemachine.")) == [
        "diagram",
        "guards",
        "machine",
        "table",
    ]
