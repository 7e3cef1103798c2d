"""Recorded material as JSON: what the model or a tool sent, made JSON (and redacted) on write.

Loads neither pydantic nor the SDK: `boundloop.state` and the checkpoint code use it too.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, TypeGuard, cast, final

from .._lazy import claim
from ..records import ModelResponse

if TYPE_CHECKING:
    from pydantic import BaseModel


@final
class Deferred:
    """What the model or a tool sent, kept by reference while the run goes on and made JSON
    (every string redacted) only when the event is written or read as JSON."""

    __slots__ = ("_redact", "_value")

    def __init__(self, value: object, redact: Callable[[str], str] | None = None) -> None:
        self._value = value
        self._redact = redact

    def json(self) -> object:
        """The value as JSON, every string redacted."""
        plain = _plain(self._value)
        return plain if self._redact is None else redact_strings(plain, self._redact)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Deferred) and self.json() == other.json()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Deferred({type(self._value).__name__})"


def redact_strings(value: object, redact: Callable[[str], str], *, all_keys: bool = True) -> object:
    """`value` (plain JSON) with every string redacted: values, and the keys of objects too.

    With `all_keys=False` only the keys inside an `input` or `metadata` (a tool_use's input,
    where the model picks the keys; the caller's metadata) are redacted: the others are field
    names that must read back (a pattern of yours matching `input_tokens` must not drop the
    usage of a checkpoint). Two keys that redact to the same text stay apart: the later one
    gets a `#2`, `#3` suffix.
    """
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_strings(item, redact, all_keys=all_keys) for item in cast(list[object], value)]
    if isinstance(value, dict):
        redacted: dict[object, object] = {}
        for key, item in cast(dict[object, object], value).items():
            inside = all_keys or key in _DATA_KEYS
            if all_keys and isinstance(key, str):
                key = _free_key(redacted, redact(key))
            redacted[key] = redact_strings(item, redact, all_keys=inside)
        return redacted
    return value


_DATA_KEYS: Final = frozenset({"input", "metadata"})
"""Fields whose objects' keys are data, not field names (see `redact_strings`)."""


def _free_key(taken: dict[object, object], key: str) -> str:
    """`key`, or `key#2`, `key#3`, ...: the first not in `taken`."""
    candidate, count = key, 1
    while candidate in taken:
        count += 1
        candidate = f"{key}#{count}"
    return candidate


def _plain(value: object) -> object:
    """A recorded value as JSON: SDK objects, records and messages holding them converted."""
    if isinstance(value, Deferred):
        return value.json()
    if is_sdk_object(value):
        return json_default(value)
    if type(value) is ModelResponse:  # a response's record: the JSON the API sent
        return value.json()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in cast(list[object], value)]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in cast(dict[object, object], value).items()}
    return value


def is_sdk_object(value: object) -> TypeGuard[BaseModel]:
    """Whether `value` is a pydantic model (an SDK object): never while pydantic is not loaded."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(value, pydantic.BaseModel)


def json_default(value: object) -> object:
    """`json.dumps(default=...)` for SDK objects: the fields the API sent, as it sent them."""
    if is_sdk_object(value):
        # No serializer warnings: a block type the SDK does not model sits in its union as
        # another model, and is dumped right (its fields kept as extras), but pydantic warns.
        return value.model_dump(mode="json", exclude_unset=True, warnings=False)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


claim("boundloop.events", Deferred)  # reported at its public home
