"""The rule for a name a store keys by (a task id, a budget pool's name): what is wrong with one."""

from __future__ import annotations

import re
from typing import Final

MAX_NAME_LENGTH: Final = 200
"""The longest task id or pool name, in characters."""

_FORBIDDEN: Final = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")
"""Control characters (Unicode category Cc: NUL, newlines, escapes) and lone surrogates."""


def name_problem(name: object, what: str) -> str | None:
    """What keeps every store from keying by `name` (a `what`: "task id", "pool name"), or None:
    it must be a string of 1 to 200 characters, not only whitespace, with no control character
    (NUL, a newline, ...) and no lone surrogate."""
    if not isinstance(name, str):
        return f"a {what} is a string, not {type(name).__name__}"
    if not name.strip():
        return "it is empty" if not name else "it is only whitespace"
    if len(name) > MAX_NAME_LENGTH:
        return f"it has {len(name)} characters; a {what} has at most {MAX_NAME_LENGTH}"
    bad = _FORBIDDEN.search(name)
    if bad is not None:
        return f"it holds the control character {bad.group()!r} at index {bad.start()}"
    return None
