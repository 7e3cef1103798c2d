"""A package's module `__getattr__` that imports its public names on first use (PEP 562)."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable, Mapping, MutableMapping
from pathlib import Path


def public_names(init_file: str) -> dict[str, str]:
    """Public name -> the module defining it (relative), read from the `if TYPE_CHECKING:` block
    of a package's `__init__.py`, where each is written once as `from .module import Name as Name`
    (`from .module import name as Public` gives `.module:name`).

    Reading the block, rather than keeping a second map in step with it, is what makes each
    name written once; it costs one parse of the file at import (about a millisecond).
    """
    tree = ast.parse(Path(init_file).read_text(encoding="utf-8"))
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.level:
                    module = "." * statement.level + (statement.module or "")
                    for alias in statement.names:
                        public = alias.asname or alias.name
                        names[public] = module if public == alias.name else f"{module}:{alias.name}"
    return names


def lazy_getattr(
    package: str, namespace: MutableMapping[str, object], sources: Mapping[str, str]
) -> Callable[[str], object]:
    """The `__getattr__` of `package`.

    Args:
        package: the package's `__name__`.
        namespace: its `globals()`, where a loaded name is kept (so it loads once).
        sources: public name -> the module defining it, relative to the package (`public_names`).

    Returns:
        A function that imports a name of `sources` from its module alone, or else a submodule
        of that name, and raises `AttributeError` for anything else.
    """

    def __getattr__(name: str) -> object:
        if name in sources:
            module, _, defined = sources[name].partition(":")
            value = getattr(importlib.import_module(module, package), defined or name)
            namespace[name] = value
            return value
        if name.startswith("__"):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        # `import pkg; pkg.sub.X` and `from . import sub` come here for a submodule not imported yet.
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{package}.{name}":
                raise  # the submodule exists, and something it imports is missing
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None

    return __getattr__


def claim(home: str, *values: object) -> None:
    """Report the classes among `values` that a private module defines as `home`'s own:
    reprs, tracebacks and pickles name the module users import them from (as anyio and trio do).

    Args:
        home: the public module's `__name__`.
        values: its public names' values; functions, and classes a public module defines, are
            left as they are.
    """
    for value in values:
        if isinstance(value, type) and any(part.startswith("_") for part in value.__module__.split(".")):
            value.__module__ = home
