"""The model route: `fallback_model` as one model name or several, in the order a refusal
tries them (`_core/refusals.py`); the spec holds a tuple, a contract and the provenance write
one model as its name, as before routes."""

from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import Annotated, Any, Final, TypeAlias

import pydantic

from ..errors import ConfigurationError


def _route(value: object) -> object:
    """The fallback models, in order: one name, or a non-empty sequence of names."""
    models: object = (value,) if isinstance(value, str) else value
    if isinstance(models, (str, bytes)) or not isinstance(models, Sequence) or not models:
        raise ConfigurationError("fallback_model must be a model name or a non-empty list of model names")
    names = tuple(typing.cast("Sequence[object]", models))
    if not all(isinstance(name, str) and name for name in names):
        raise ConfigurationError(f"fallback_model must name models, e.g. 'claude-opus-4-7', got {value!r}")
    return names


_SCHEMA: Final[dict[str, Any]] = {
    "anyOf": [
        {"type": "string", "minLength": 1},
        {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
    ]
}
"""A contract names one fallback model or several, in order."""

FallbackModels: TypeAlias = Annotated[
    Annotated[tuple[str, ...], pydantic.BeforeValidator(_route)] | None,
    pydantic.WithJsonSchema(_SCHEMA),
    pydantic.PlainSerializer(lambda route: route_data(route), when_used="json"),
]
"""`LoopSpec.fallback_model`: None, or the fallback models in order."""


def route_data(route: tuple[str, ...] | None) -> str | tuple[str, ...] | None:
    """The model route as a contract and the provenance write it: one fallback model as its
    name (as before routes), several as the tuple."""
    if route is not None and len(route) == 1:
        return route[0]
    return route
