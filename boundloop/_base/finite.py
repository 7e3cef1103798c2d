"""Numbers JSON can hold: Python's `json` reads and writes NaN and the infinities; JSON has none.

A state with one would be written as `null` (pydantic) and could not be read back, or read back
as a number no budget check compares sensibly; `LoopState` refuses both directions.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import cast

from .._lazy import claim


class NonFinite(ValueError):
    """JSON text holds NaN or an infinity; `field` is where (`elapsed_s`, `usage.cost_usd`)."""

    def __init__(self, field: str, constant: str) -> None:
        self.field = field
        super().__init__(f"LoopState JSON holds {constant} at {field}, which is not a JSON number")


class _Constant(Exception):
    def __init__(self, name: str) -> None:
        self.name = name


def _refuse(name: str) -> object:
    raise _Constant(name)


def strict_loads(text: str | bytes) -> object:
    """`json.loads`, refusing NaN and Infinity (a number too large, `1e999`, reads as infinity:
    `first_non_finite` finds it in the fields that hold floats).

    Raises:
        NonFinite: such a number, with where it is.
        json.JSONDecodeError: the text is not JSON.
    """
    try:
        raw: object = json.loads(text, parse_constant=_refuse)
    except _Constant as exc:  # found again to say where: the error path only
        raise NonFinite(constant_at(json.loads(text)) or "?", exc.name) from None
    return raw


def constant_at(raw: object, path: str = "") -> str | None:
    """Where in parsed JSON a non-finite number is (`usage.cost_usd`, `messages[2].content`)."""
    if isinstance(raw, float) and not math.isfinite(raw):
        return path
    items: list[tuple[str, object]] = []
    if isinstance(raw, dict):
        entries = cast(dict[str, object], raw)
        items = [(f"{path}.{key}" if path else key, value) for key, value in entries.items()]
    elif isinstance(raw, list):
        values = cast(list[object], raw)
        items = [(f"{path}[{index}]", value) for index, value in enumerate(values)]
    for where, value in items:
        found = constant_at(value, where)
        if found is not None:
            return found
    return None


def first_non_finite(floats: Iterable[tuple[str, float | None]]) -> tuple[str, str] | None:
    """The first `(field, value)` that is NaN or infinite, as `(field, problem)`; or None."""
    for field, value in floats:
        if value is not None and not math.isfinite(value):
            return field, f"{value!r} is not a finite number"
    return None


claim("boundloop.state", NonFinite)  # reported at its public home
