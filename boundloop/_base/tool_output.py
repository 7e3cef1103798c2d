"""What a tool returns, checked: a result that does not match what the tool declares is caught.

A `@tool` function's return annotation, or `Tool(output_schema=...)`, declares what the
tool returns. A result that does not match is answered as an error the model sees, with the
outcome `invalid_result`; it never counts as evidence.
"""

from __future__ import annotations

import json
import typing
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias, cast

import jsonschema
import pydantic

from ..errors import ConfigurationError
from .schemas import local_validator, unresolved_ref

OutputCheck: TypeAlias = Callable[[object], "str | None"]
"""`check(value)`: what is wrong with a handler's return value, or None."""


def schema_check(tool: str, schema: Mapping[str, Any]) -> OutputCheck:
    """A check of the result's JSON against a JSON schema (Draft 2020-12).

    Raises:
        ConfigurationError: the schema is not a valid JSON schema, or has a `$ref` that does
            not resolve within it (nothing is fetched).
    """
    try:
        jsonschema.Draft202012Validator.check_schema(dict(schema))
    except jsonschema.SchemaError as exc:
        raise ConfigurationError(f"tool {tool!r}: invalid output_schema: {exc.message}") from exc
    if (unresolved := unresolved_ref(schema)) is not None:
        raise ConfigurationError(f"tool {tool!r}: output_schema: {unresolved}")
    validator = local_validator(schema)

    def check(value: object) -> str | None:
        try:
            document: object = json.loads(
                value.model_dump_json() if isinstance(value, pydantic.BaseModel) else json.dumps(value)
            )
        except (TypeError, ValueError) as exc:
            return f"not JSON ({exc})"
        found: list[jsonschema.ValidationError] = list(
            validator.iter_errors(cast(Any, document))  # pyright: ignore[reportUnknownMemberType]
        )
        if not found:
            return None
        first = min(found, key=lambda error: len(error.absolute_path))
        where = "/".join(str(part) for part in first.absolute_path) or "(result)"
        return f"{where}: {first.message}"

    return check


_EXACT: Final = frozenset({str, int, float, bool, dict, list})
"""Return annotations a value of exactly that class always matches (pydantic's lax mode)."""


def annotation_check(tool: str, hint: object) -> OutputCheck | None:
    """A check against a return annotation; None for an unchecked one (`object`, `Any`).

    Raises:
        ConfigurationError: pydantic cannot validate the annotation.
    """
    if hint is object or hint is Any:
        return None
    try:
        adapter: pydantic.TypeAdapter[object] = pydantic.TypeAdapter(cast(Any, hint))
    except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as exc:
        raise ConfigurationError(f"tool {tool!r}: its return annotation cannot be checked: {exc}") from exc

    exact = hint if isinstance(hint, type) and hint in _EXACT else None

    def check(value: object) -> str | None:
        if value.__class__ is exact:  # the declared type itself: valid, no validation to run
            return None
        try:
            adapter.validate_python(value)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'/'.join(str(part) for part in error['loc']) or '(result)'}: {error['msg']}"
                for error in exc.errors()
            )
            return problems
        return None

    return check


def return_hint(fn: Callable[..., object]) -> object:
    """The function's return annotation (for a coroutine function, what it returns when
    awaited); `object` when there is none."""
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable annotations: the result is not checked
        return object
    return hints.get("return", object)
