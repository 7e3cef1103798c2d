"""The JSON Schema of the settings dataclasses (`Budget`, `Policy`), read from their fields:
`LoopSpec` (boundloop/settings.py) and the contract's schema (scripts/contract_schema.py)
both use it."""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, get_args, get_origin

from ..policy import Policy
from ..state import Budget

TOOL_NAME_SCHEMA: dict[str, Any] = {"type": "string", "minLength": 1}

_HOOKS = ("success", "approve", "signal_handlers")
"""`Policy`'s fields that are code, not data."""


def field_schema(
    cls: type[Budget] | type[Policy], tool_name: Mapping[str, Any] = TOOL_NAME_SCHEMA
) -> dict[str, Any]:
    """The JSON Schema of a settings dataclass, from its fields' types: a count is an integer
    >= 1, a time or an amount a number > 0 (>= 0 with `metadata={"zero": True}`), a choice an
    enum, a flag a boolean, a set of tools an array of unique `tool_name`s. `Policy`'s hooks
    (code) are left out."""
    hints = typing.get_type_hints(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in dataclasses.fields(cls):
        if field.name in _HOOKS:
            continue
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            required.append(field.name)
        kind = hints[field.name]
        if isinstance(kind, types.UnionType):  # `X | None`: None is the default, never written
            kind = next(option for option in get_args(kind) if option is not type(None))
        zero = bool(field.metadata.get("zero"))
        if kind is bool:
            properties[field.name] = {"type": "boolean"}
        elif get_origin(kind) is Literal:
            properties[field.name] = {"enum": list(get_args(kind))}
        elif kind is int:
            properties[field.name] = {"type": "integer", "minimum": 0 if zero else 1}
        elif kind is float:
            bound = {"minimum": 0} if zero else {"exclusiveMinimum": 0}
            properties[field.name] = {"type": "number", **bound}
        elif get_origin(kind) is frozenset:
            names = {"type": "array", "items": dict(tool_name), "uniqueItems": True}
            properties[field.name] = names
        else:  # a tool's name
            properties[field.name] = dict(tool_name)
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False}
    if required:
        schema["required"] = required
    schema["properties"] = properties
    return schema
