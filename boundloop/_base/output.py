"""Structured output: what `AgentLoop(output_type=...)` asks of the final answer, and its check.

The output type is a pydantic model class, a TypedDict (any type pydantic's `TypeAdapter`
takes) or a JSON schema dict. Its JSON schema is loop data (`LoopSpec.output_schema`: the
contract carries it, provenance hashes it); the request carries it, made acceptable to the API
(`api_schema`), as `output_config.format`. The final answer's text is validated against the
type (pydantic) or the schema (JSON Schema, Draft 2020-12): the validated value is
`LoopResult.output`. A type cannot round-trip through a contract: from a contract the loop gets
the schema back, and its output is the JSON value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, TypeAlias, cast, final

import jsonschema
import jsonschema.protocols
import pydantic

from ..errors import ConfigurationError
from .schemas import local_validator, unresolved_ref

OutputType: TypeAlias = "type[Any] | Mapping[str, Any]"
"""A pydantic model class, a TypedDict (a type `pydantic.TypeAdapter` takes) or a JSON schema."""

EMPTY_ANSWER: Final = "empty answer"
"""The start of the stop detail of a run whose final answer was blank."""

STRING_FORMATS: Final = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"}
)
"""The string `format`s the API's structured outputs accept."""


def api_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The schema as the API's structured outputs accept it (validation keeps the original).

    Every object gets `additionalProperties: false`; `oneOf` becomes `anyOf`; a string `format`
    the API does not know, `minItems` other than 0 or 1, and the keywords it does not support
    (`minimum`, `maxLength`, `pattern`, `default`, ...) move into the `description`; an `enum`
    or `const` of primitives stands without its `type`. `$ref`s stay local (`#/$defs/...`).

    Raises:
        ConfigurationError: a (sub)schema with no `type`, `anyOf`, `oneOf`, `allOf`, `enum` or
            `const`: the API takes none such.
    """
    rest = dict(schema)
    out: dict[str, Any] = {}
    defs = rest.pop("$defs", None)
    if isinstance(defs, Mapping):
        out["$defs"] = {
            name: api_schema(sub) for name, sub in cast(Mapping[str, Mapping[str, Any]], defs).items()
        }
    if "$ref" in rest:
        out["$ref"] = rest.pop("$ref")
        return out
    kind = rest.pop("type", None)
    for key in ("enum", "const"):
        if key in rest and _primitive(rest[key]):
            out[key] = rest.pop(key)
    literal = "enum" in out or "const" in out
    if not _combined(rest, out) and not literal:
        if kind is None:
            raise ConfigurationError(
                f"output schema {json.dumps(dict(schema))[:200]}: each (sub)schema needs a 'type', "
                "'anyOf', 'oneOf', 'allOf', or an 'enum'/'const' of primitives"
            )
        out["type"] = kind
    for key in ("description", "title"):
        if key in rest:
            out[key] = rest.pop(key)
    if not literal:
        _typed(kind, rest, out)
    if rest:  # unsupported: told to the model in the description, checked on the answer
        note = "{" + ", ".join(f"{key}: {value}" for key, value in rest.items()) + "}"
        out["description"] = f"{out['description']}\n\n{note}" if "description" in out else note
    return out


def _combined(rest: dict[str, Any], out: dict[str, Any]) -> bool:
    """`anyOf` (or `oneOf`, as `anyOf`) or `allOf`, moved from `rest` to `out`; False: none."""
    variants = rest.pop("anyOf", None) or rest.pop("oneOf", None)
    every = rest.pop("allOf", None)
    if isinstance(variants, list):
        out["anyOf"] = [api_schema(variant) for variant in cast(list[Mapping[str, Any]], variants)]
    elif isinstance(every, list):
        out["allOf"] = [api_schema(part) for part in cast(list[Mapping[str, Any]], every)]
    else:
        return False
    return True


def _typed(kind: object, rest: dict[str, Any], out: dict[str, Any]) -> None:
    """The keywords of an object, a string or an array the API takes, moved from `rest` to `out`."""
    if kind == "object":
        properties = cast(Mapping[str, Mapping[str, Any]], rest.pop("properties", {}))
        out["properties"] = {name: api_schema(sub) for name, sub in properties.items()}
        rest.pop("additionalProperties", None)
        out["additionalProperties"] = False
        if "required" in rest:
            out["required"] = list(rest.pop("required"))
    elif kind == "string" and rest.get("format") in STRING_FORMATS:
        out["format"] = rest.pop("format")
    elif kind == "array":
        if "items" in rest:
            out["items"] = api_schema(rest.pop("items"))
        if rest.get("minItems") in (0, 1):
            out["minItems"] = rest.pop("minItems")


def _primitive(value: object) -> bool:
    values = cast(list[object], value) if isinstance(value, list) else [value]
    return bool(values) and all(item is None or isinstance(item, str | int | float | bool) for item in values)


@final
class OutputCheck:
    """The check of a final answer against the output type: `check(text) -> (value, problem)`."""

    def __init__(self, output_type: OutputType) -> None:
        """
        Raises:
            ConfigurationError: not a type pydantic can validate, not a valid JSON schema, or
                a schema the API's structured outputs cannot take.
        """
        self.output_type = output_type
        self._adapter: pydantic.TypeAdapter[Any] | None = None
        self._validator: jsonschema.protocols.Validator | None = None
        if isinstance(output_type, Mapping):
            try:
                schema = json.loads(json.dumps(output_type))  # a plain JSON copy
                jsonschema.Draft202012Validator.check_schema(schema)
            except (TypeError, ValueError) as exc:
                raise ConfigurationError(f"output_type: the schema is not JSON: {exc}") from None
            except jsonschema.SchemaError as exc:
                raise ConfigurationError(f"output_type: invalid JSON schema: {exc.message}") from None
            if (unresolved := unresolved_ref(schema)) is not None:
                raise ConfigurationError(f"output_type: {unresolved}")
            self._validator = local_validator(schema)
        else:
            try:
                self._adapter = pydantic.TypeAdapter(output_type)
                schema = self._adapter.json_schema()
            except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as exc:
                raise ConfigurationError(
                    f"output_type {output_type!r}: pydantic cannot validate it ({exc}); pass a "
                    "pydantic model class, a TypedDict or a JSON schema dict"
                ) from None
        self.schema: dict[str, Any] = schema
        """The JSON schema of the output, as given or as pydantic generates it."""
        self.format: dict[str, Any] = {"type": "json_schema", "schema": api_schema(schema)}
        """The request's `output_config.format`."""

    def check(self, text: str) -> tuple[Any, str | None]:
        """The validated value of an answer, or None and what is wrong with it."""
        if self._adapter is not None:
            try:
                return self._adapter.validate_json(text), None
            except pydantic.ValidationError as exc:
                problems = "; ".join(
                    f"{'/'.join(str(part) for part in error['loc']) or '(answer)'}: {error['msg']}"
                    for error in exc.errors(include_url=False)
                )
                return None, problems
        assert self._validator is not None  # one of the two is set
        try:
            value: object = json.loads(text)
        except ValueError as exc:
            return None, f"(answer): not JSON ({exc})"
        found: list[jsonschema.ValidationError] = list(
            self._validator.iter_errors(cast(Any, value))  # pyright: ignore[reportUnknownMemberType]
        )
        if not found:
            return value, None
        first = min(found, key=lambda error: len(error.absolute_path))
        return None, f"{'/'.join(str(part) for part in first.absolute_path) or '(answer)'}: {first.message}"


def answer_problem(check: OutputCheck | None, text: str) -> tuple[Any, str | None]:
    """The output of a final answer and what is wrong with it: a blank answer never passes.

    Without an output type the output is the answer's text.
    """
    if not text.strip():
        return None, f"{EMPTY_ANSWER}: the final answer has no text"
    if check is None:
        return text, None
    return check.check(text)


def add_output_format(request: dict[str, Any], check: OutputCheck | None) -> None:
    """Merge the output type's `format` into the request's `output_config` (other keys, e.g. an
    `effort` from the model settings, are kept)."""
    if check is None:
        return
    config = request.get("output_config")
    merged: dict[str, Any] = dict(cast(Mapping[str, Any], config)) if isinstance(config, Mapping) else {}
    merged["format"] = check.format
    request["output_config"] = merged
