"""Typed reads of `TraceEvent.data`: a value of the expected type, or None.

Trace data is JSON (and may come from an older or newer boundloop), so the view never trusts a
key to be there or to hold the right type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

Data = Mapping[str, object]
"""An event's `data`, or one record inside it (a call of a validation event)."""


def text(data: Data, key: str) -> str | None:
    """The string at `key`.

    Args:
        data: the event data or record.
        key: the key to read.

    Returns:
        The string; None when the key is absent or not a string.
    """
    value = data.get(key)
    return value if isinstance(value, str) else None


def shown(data: Data, key: str) -> str | None:
    """The value at `key` as text to show: a string as it is, any other JSON value through `str`.

    Args:
        data: the event data or record.
        key: the key to read.

    Returns:
        The text; None when the key is absent or null.
    """
    value = data.get(key)
    return None if value is None else str(value)


def integer(data: Data, key: str) -> int | None:
    """The integer at `key` (a bool is not one).

    Args:
        data: the event data or record.
        key: the key to read.

    Returns:
        The integer; None when the key is absent or not an integer.
    """
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def number(data: Data, key: str) -> float | None:
    """The number at `key`, as a float (a bool is not one).

    Args:
        data: the event data or record.
        key: the key to read.

    Returns:
        The number; None when the key is absent or not a number.
    """
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def texts(data: Data, key: str) -> list[str]:
    """The strings of the list at `key`.

    Args:
        data: the event data or record.
        key: the key to read.

    Returns:
        The list's items, each as a string; empty when the key is absent or not a list.
    """
    value = data.get(key)
    if not isinstance(value, list):
        return []
    return [str(item) for item in cast(list[object], value)]


def records(data: Data, key: str) -> list[Data] | None:
    """The JSON objects of the list at `key`.

    Args:
        data: the event data.
        key: the key to read.

    Returns:
        The list's items that are objects; None when the key is absent or not a list.
    """
    value = data.get(key)
    if not isinstance(value, list):
        return None
    items = cast(list[object], value)
    return [cast(Data, item) for item in items if isinstance(item, dict)]
