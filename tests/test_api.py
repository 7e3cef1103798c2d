"""Every public class has one documented home (docs/api.md), imports from it, and the docs, the
README and the examples import it from there and nowhere else."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from collections import defaultdict
from pathlib import Path

import pytest

import boundloop

ROOT = Path(__file__).resolve().parent.parent
API = ROOT / "docs" / "api.md"

ROW = re.compile(r"^\| `(\w+)` \| `from ([\w.]+) import (\w+)` \|", flags=re.MULTILINE)


def documented_homes() -> dict[str, str]:
    """Class name -> the module docs/api.md says to import it from."""
    rows = ROW.findall(API.read_text(encoding="utf-8"))
    assert rows, "docs/api.md has no table of homes"
    names = [name for name, _, _ in rows]
    assert len(names) == len(set(names)), "a class has two rows in docs/api.md"
    for name, _, imported in rows:
        assert imported == name, f"the row of {name} imports {imported}"
    return {name: home for name, home, _ in rows}


def public_modules() -> list[str]:
    """boundloop and every module of it with no `_` in its path."""
    modules = ["boundloop"]
    for found in pkgutil.walk_packages(boundloop.__path__, "boundloop."):
        parts = found.name.split(".")
        if not any(part.startswith("_") for part in parts):
            modules.append(found.name)
    return modules


def exported_classes() -> dict[type, set[str]]:
    """Each public class -> the public modules that export it: a module's `__all__`, or, for a
    module without one, the classes it defines. `PostgresStore` is exported by
    `boundloop.checkpoint` without being in its `__all__` (which must not need the extra)."""
    exports: defaultdict[type, set[str]] = defaultdict(set)
    for name in public_modules():
        module = importlib.import_module(name)
        listed = getattr(module, "__all__", None)
        if listed is not None:
            values = [(member, getattr(module, member)) for member in listed]
        else:
            values = [(member, value) for member, value in vars(module).items() if not member.startswith("_")]
            values = [(member, value) for member, value in values if getattr(value, "__module__", "") == name]
        for _, value in values:
            if inspect.isclass(value):
                exports[value].add(name)
    checkpoint = importlib.import_module("boundloop.checkpoint")
    exports[checkpoint.PostgresStore].add("boundloop.checkpoint")
    return exports


def test_every_public_class_has_one_home_and_imports_from_it() -> None:
    """Each public class has a row in docs/api.md; its home gives that very class (the suite
    turns a DeprecationWarning into an error); and no module exports
    it but its home and the module that defines it."""
    homes = documented_homes()
    exports = exported_classes()
    assert sorted(homes) == sorted(cls.__name__ for cls in exports)
    for cls, modules in exports.items():
        home = homes[cls.__name__]
        assert getattr(importlib.import_module(home), cls.__name__) is cls, home
        assert modules - {home, cls.__module__} == set(), f"{cls.__name__} is exported by {modules}"


def test_a_public_class_reports_the_module_it_is_imported_from() -> None:
    """Every public class's `__module__` is a public module (its home when it is defined in a
    private one): reprs, tracebacks and pickles name where users import it from."""
    homes = documented_homes()
    private = {
        f"{cls.__module__}.{cls.__qualname__}": homes[cls.__name__]
        for cls in exported_classes()
        if any(part.startswith("_") for part in cls.__module__.split("."))
    }
    assert private == {}


LATER_CLASSES = (
    "BudgetPool",
    "PoolStatus",
    "MemoryPoolStore",
    "SQLitePoolStore",
    "PostgresPoolStore",
    "PoolStore",
    "PoolUsage",
    "Hold",
    "Claim",
    "Grant",
    "Shortfall",
    "Ledger",
    "PoolGauges",
    "PlatformFeatures",
)
"""The public classes of the budget pools and the platforms (added after the rules above):
named here, so dropping one from its `__all__` (and so from the checks above) fails too."""


@pytest.mark.parametrize("name", LATER_CLASSES)
def test_the_pools_and_platforms_classes_are_public_where_users_import_them(name: str) -> None:
    """Each is a public class with a docs/api.md row, exported by its home, and reports a public
    module (its home, or the public module defining it)."""
    home = documented_homes()[name]
    cls = getattr(importlib.import_module(home), name)
    assert cls in exported_classes()
    assert not any(part.startswith("_") for part in cls.__module__.split(".")), cls.__module__
    assert getattr(importlib.import_module(cls.__module__), name) is cls


def _defined_names(module: str) -> set[str]:
    """The public names a module's source defines at its top level (classes, functions, values)."""
    source = importlib.import_module(module).__file__
    assert source is not None
    names: set[str] = set()
    for node in ast.parse(Path(source).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_")}


@pytest.mark.parametrize("module", public_modules())
def test_every_public_module_lists_its_names_in_all(module: str) -> None:
    """Each public module has an `__all__`; every name it lists is there, and every public name
    its source defines is listed (a package's `__init__` lists what it re-exports as well)."""
    imported = importlib.import_module(module)
    listed: list[str] = getattr(imported, "__all__", None) or []
    assert hasattr(imported, "__all__"), f"{module} has no __all__"
    assert [name for name in listed if not hasattr(imported, name)] == []
    assert sorted(_defined_names(module) - set(listed)) == []


def test_the_names_of_boundloop_all_have_boundloop_as_home() -> None:
    """A class `boundloop.__all__` lists is imported from `boundloop`, and only a class it lists."""
    homes = documented_homes()
    classes = {name for name in boundloop.__all__ if inspect.isclass(getattr(boundloop, name))}
    assert {name for name, home in homes.items() if home == "boundloop"} == classes


@pytest.mark.parametrize("module", public_modules())
def test_no_module_re_exports_a_class_it_is_not_the_home_of(module: str) -> None:
    """`from .x import Name as Name` (a re-export to type checkers) of a documented class only in
    its home's module; a module uses another's class under its own name or through its module."""
    homes = documented_homes()
    source = importlib.import_module(module).__file__
    assert source is not None
    tree = ast.parse(Path(source).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.asname == alias.name and alias.name in homes:
                    assert homes[alias.name] == module, f"{module} re-exports {alias.name}"


DOCS = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "examples").rglob("*.py")])
FROM_IMPORT = re.compile(r"from (boundloop(?:\.\w+)*) import (?:\(([\w,\s]+)\)|([\w, ]+))")
DOTTED = re.compile(r"\b(boundloop(?:\.[a-z_]\w*)*)\.([A-Z]\w*)\b")


def doc_imports(text: str) -> list[tuple[str, str]]:
    """(module, name) of every `from boundloop... import` and `boundloop.x.Name` in a text."""
    found = [
        (module, name.strip())
        for module, wrapped, names in FROM_IMPORT.findall(text)
        for name in (wrapped or names).split(",")
        if name.strip()
    ]
    return found + DOTTED.findall(text)


def test_doc_imports_sees_every_form() -> None:
    """The scanner finds one-line, parenthesised and dotted forms."""
    text = "from boundloop import A, B\nfrom boundloop.x import (\n    C,\n    D,\n)\nsee `boundloop.y.E`."
    assert doc_imports(text) == [
        ("boundloop", "A"),
        ("boundloop", "B"),
        ("boundloop.x", "C"),
        ("boundloop.x", "D"),
        ("boundloop.y", "E"),
    ]


@pytest.mark.parametrize("path", DOCS, ids=[str(path.relative_to(ROOT)) for path in DOCS])
def test_the_docs_import_each_class_from_its_home(path: Path) -> None:
    """README.md, docs/*.md and examples/
    name a public class only at its home, in code and in prose."""
    homes = documented_homes()
    text = path.read_text(encoding="utf-8")
    wrong = [
        f"{module}.{name}" for module, name in doc_imports(text) if name in homes and homes[name] != module
    ]
    assert wrong == [], f"{path.name} imports these from elsewhere than docs/api.md says"
