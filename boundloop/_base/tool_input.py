"""What a tool is given, checked: the model's input against the tool's schema, and the API's own
per-tool fields (`strict`, `defer_loading`, `allowed_callers`, ...) and tool definitions against
the installed SDK's `ToolParam` and tool union, so a value the API would refuse is a
`ConfigurationError` at construction rather than a 400 at run time."""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Annotated, Any, Final, NotRequired, TypedDict, cast

import jsonschema
import jsonschema.exceptions
import pydantic
from typing_extensions import TypedDict as TypedDictType

from ..errors import ConfigurationError
from .schemas import local_validator
from .server_tools import client_tool_names

_best_match = cast(
    "Callable[[Iterable[jsonschema.ValidationError]], jsonschema.ValidationError | None]",
    # The stub leaves best_match's return type out; this cast is where it gets one.
    jsonschema.exceptions.best_match,  # pyright: ignore[reportUnknownMemberType]
)

Validate = Callable[[Mapping[str, Any]], dict[str, Any]]
"""A tool's input check: the keyword arguments of its function, or `ToolInputError`."""


class ToolFields(TypedDict, total=False):
    """The API's per-tool fields a `Tool` takes, sent in its definition as given (None: not sent)."""

    strict: bool | None
    """The API holds the model's input to the schema."""
    defer_loading: bool | None
    """Tool search: the model sees the tool once a search finds it (the loop gates it from the start)."""
    allowed_callers: Sequence[str] | None
    """Who may call it: `"direct"` (the model), a code execution tool's type (a program)."""
    input_examples: Sequence[Mapping[str, Any]] | None
    """Example inputs, each matching the input schema."""
    cache_control: Mapping[str, Any] | None
    """A cache breakpoint at this tool: `{"type": "ephemeral"}`, with a `ttl` of `"5m"` or `"1h"`."""
    eager_input_streaming: bool | None
    """Stream the tool's input as it is generated."""


API_FIELDS: Final = (
    "strict",
    "defer_loading",
    "allowed_callers",
    "input_examples",
    "cache_control",
    "eager_input_streaming",
)
"""The API's per-tool fields a `Tool` carries, named as the request names them."""


class ToolInputError(ValueError):
    """A tool_use input does not match the tool's schema; the message names the field."""


def jsonschema_validator(schema: Mapping[str, Any]) -> Validate:
    """The input check of a JSON schema (its references were checked: nothing is retrieved)."""
    validator = local_validator(schema)

    def validate(tool_input: Mapping[str, Any]) -> dict[str, Any]:
        error = _best_match(validator.iter_errors(tool_input))
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path) or "(input)"
            raise ToolInputError(f"{where}: {error.message}")
        return dict(tool_input)

    return validate


def pydantic_validator(adapter: pydantic.TypeAdapter[Any]) -> Validate:
    """Validate with `adapter`, a TypedDict's keyed by the tool function's parameters: what it
    returns is the function's keyword arguments, defaults filled in."""

    parse = adapter.validator.validate_python

    def validate(tool_input: Mapping[str, Any]) -> dict[str, Any]:
        try:
            return cast("dict[str, Any]", parse(tool_input))
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'/'.join(str(p) for p in err['loc']) or '(input)'}: {err['msg']}" for err in exc.errors()
            )
            raise ToolInputError(problems) from None

    return validate


def signature_input(fn: Callable[..., object], tool: str, context: type) -> tuple[dict[str, Any], Validate]:
    """The input schema of a tool function from its type hints (through pydantic), and its check;
    a parameter annotated `context` (the `ToolContext`, parametrised or not) is left out.

    Raises:
        ConfigurationError: a hint that cannot be resolved, a parameter that is not a plain
            keyword parameter or has no annotation, or parameters pydantic has no schema for.
    """
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ConfigurationError(f"tool {tool!r}: cannot resolve type hints: {exc}") from exc
    # The schema comes from a model whose fields get neutral names, each aliased to its
    # parameter: a parameter may be called `schema`, `json` or `_id` (BaseModel attributes, or
    # private to pydantic) and still be a property of the schema. The input is checked by a
    # TypedDict keyed by the parameters themselves, each with the model's field: its result is
    # the keyword arguments (defaults filled in, in the signature's order), no model built.
    fields: dict[str, Any] = {}
    keys: dict[str, Any] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ConfigurationError(
                f"tool {tool!r}: parameter {param.name!r} must be a plain keyword parameter"
            )
        hint = hints.get(param.name)
        if hint is context or typing.get_origin(hint) is context:
            continue
        if hint is None:
            raise ConfigurationError(
                f"tool {tool!r}: parameter {param.name!r} needs a type annotation for its schema"
            )
        required = param.default is param.empty
        field = pydantic.Field(... if required else param.default, alias=param.name)
        fields[f"arg{len(fields)}"] = (hint, field)
        # A hint made at run time: the type checkers take only hints written in the source.
        key = Annotated[hint, field]  # type: ignore[valid-type]
        keys[param.name] = key if required else NotRequired[key]
    try:
        model = pydantic.create_model(
            f"{tool}_input", __config__=pydantic.ConfigDict(extra="forbid"), **fields
        )
        schema = model.model_json_schema()
        # typing_extensions' TypedDict: pydantic takes typing's only from Python 3.12.
        typed_dict = TypedDictType(f"{tool}_input", keys)  # type: ignore[misc]  # pyright: ignore[reportArgumentType]
        arguments = pydantic.with_config(pydantic.ConfigDict(extra="forbid"))(typed_dict)
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(arguments)
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError) as exc:
        raise ConfigurationError(f"tool {tool!r}: no JSON schema for its parameters: {exc}") from exc
    schema.pop("title", None)
    return schema, pydantic_validator(adapter)


@functools.cache
def _literals(field: str) -> frozenset[str]:
    """The values the installed SDK's `ToolParam` allows for `field` (a list of literals, or the
    `ttl` of its `cache_control`)."""
    from anthropic.types import CacheControlEphemeralParam, ToolParam

    hints = typing.get_type_hints(CacheControlEphemeralParam if field == "ttl" else ToolParam)
    found: set[str] = set()
    pending: list[object] = [hints[field]]
    while pending:  # through List[...], Optional[...] to the Literal's values
        for arg in typing.get_args(pending.pop()):
            (found.add if isinstance(arg, str) else pending.append)(arg)
    return frozenset(found)


def api_fields(tool: str, fields: Mapping[str, Any], validate: Validate | None) -> dict[str, Any]:
    """The per-tool fields of `fields` that are given (not None), checked; `validate` checks
    each of `input_examples` (None: the API defines the schema).

    Raises:
        ConfigurationError: a field of a type or value the API does not take.
    """
    checked: dict[str, Any] = {}
    for field in API_FIELDS:
        value = fields.get(field)
        if value is None:
            continue
        problem = _problem(field, value, validate)
        if problem is not None:
            raise ConfigurationError(f"tool {tool!r}: {field} {problem}, got {value!r}")
        checked[field] = _copied(value)
    return checked


def _problem(field: str, value: object, validate: Validate | None) -> str | None:
    """What is wrong with a per-tool field's value; None: nothing."""
    if field in ("strict", "defer_loading", "eager_input_streaming"):
        return None if isinstance(value, bool) else "must be True or False"
    if field == "cache_control":
        if not isinstance(value, Mapping) or cast(Mapping[str, object], value).get("type") != "ephemeral":
            return "must be {'type': 'ephemeral'} (with a 'ttl' of '5m' or '1h')"
        ttl = cast(Mapping[str, object], value).get("ttl")
        return (
            None
            if ttl is None or ttl in _literals("ttl")
            else f"ttl must be one of {sorted(_literals('ttl'))}"
        )
    if not isinstance(value, list | tuple) or not value:
        return "must be a non-empty list"
    items = cast("list[object] | tuple[object, ...]", value)
    if field == "allowed_callers":
        known = _literals("allowed_callers")
        wrong = [item for item in items if not isinstance(item, str) or item not in known]
        return f"names callers the installed SDK does not know {wrong!r}: {sorted(known)}" if wrong else None
    for index, example in enumerate(items):  # input_examples
        if not isinstance(example, Mapping):
            return f"[{index}] must be a JSON object"
        if validate is not None:
            try:
                validate(cast(Mapping[str, Any], example))
            except ToolInputError as exc:
                return f"[{index}] does not match the input schema ({exc})"
    return None


def _copied(value: object) -> object:
    """A per-tool field's value as plain JSON containers (a list for a tuple, a dict for a mapping)."""
    if isinstance(value, Mapping):
        return {str(key): _copied(item) for key, item in cast(Mapping[object, object], value).items()}
    if isinstance(value, list | tuple):
        return [_copied(item) for item in cast("list[object] | tuple[object, ...]", value)]
    return value


def defined_tool(definition: object) -> dict[str, Any]:
    """An API-defined tool run by the client (`{"type": "memory_20250818", "name": "memory"}`),
    checked: its `type` one of the installed SDK's tool unions with a name (memory, text editor,
    bash, computer use), its `name` the one the SDK gives that type, its per-tool fields valid.

    Raises:
        ConfigurationError: not such a definition.
    """
    if not isinstance(definition, Mapping):
        raise ConfigurationError(f"Tool.defined takes the API's tool definition, a dict, got {definition!r}")
    entry = dict(cast(Mapping[str, Any], definition))
    kind, name = entry.get("type"), entry.get("name")
    names = client_tool_names()
    if not isinstance(kind, str) or kind not in names:
        raise ConfigurationError(
            f"{entry!r} is not a tool the API defines and the client runs; types of the installed "
            f"SDK: {', '.join(sorted(names))}"
        )
    if not isinstance(name, str) or (names[kind] and name not in names[kind]):
        raise ConfigurationError(f"tool {kind!r} is named {' or '.join(sorted(names[kind]))!r} by the API")
    api_fields(name, entry, None)
    return entry
