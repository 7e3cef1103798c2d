"""Tools: `Tool`, the `@tool` decorator, `ToolContext` and `RetryableToolError`."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import typing
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeAlias, cast, final, overload

import anyio.to_thread
import jsonschema
import jsonschema.exceptions
import pydantic

from ._outputs import OutputCheck, annotation_check, return_hint, schema_check
from ._schemas import local_validator, unresolved_ref
from .errors import ConfigurationError
from .records import ToolCall

if TYPE_CHECKING:
    from anthropic.types import ToolParam

_best_match = cast(
    "Callable[[Iterable[jsonschema.ValidationError]], jsonschema.ValidationError | None]",
    # The stub leaves best_match's return type out; this cast is where it gets one.
    jsonschema.exceptions.best_match,  # pyright: ignore[reportUnknownMemberType]
)

TOOL_NAME: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What the Messages API accepts as a tool name."""

Handler: TypeAlias = Callable[..., object]
"""A tool's function: sync, or async (returning an awaitable), called with keyword arguments."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """Passed to a tool function that has a parameter annotated `ToolContext`."""

    task_id: str
    trace_id: str
    step: int
    tool_use_id: str
    idempotency_key: str
    """`f"{task_id}:{step}:{tool_use_id}"`: stable across retries of the same call."""


def idempotency_key(task_id: str, call: ToolCall) -> str:
    """The key a side-effecting tool function uses to do its effect once: `task_id:step:tool_use_id`."""
    return f"{task_id}:{call.step}:{call.id}"


class RetryableToolError(Exception):
    """Raise from a tool function to ask for a retry (up to `Budget.max_tool_retries`)."""

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class ToolInputError(ValueError):
    """A tool_use input does not match the tool's schema; the message names the field."""


def check_tool_name(name: str) -> str:
    """Return `name` if the Messages API accepts it.

    Raises:
        ConfigurationError: the name is not 1-64 of `[a-zA-Z0-9_-]`.
    """
    if not isinstance(cast(object, name), str) or not TOOL_NAME.fullmatch(name):
        raise ConfigurationError(
            f"tool name {name!r} is rejected by the Messages API: use 1-64 characters of [a-zA-Z0-9_-]"
        )
    return name


@final
class Tool:
    """A tool the model may call: name, description, JSON schema and tool function (`handler`).

    The tool function is called with the validated input as keyword arguments, plus the
    `ToolContext` when one parameter is annotated with it. Sync tool functions run in a
    worker thread; async ones run on the event loop.
    """

    __slots__ = (
        "_context_param",
        "_is_async",
        "_validate",
        "check_output",
        "description",
        "handler",
        "input_schema",
        "name",
        "output_schema",
        "requires_approval",
        "side_effect",
        "timeout_s",
    )

    def __init__(
        self,
        *,
        name: str,
        description: str,
        input_schema: Mapping[str, Any],
        handler: Handler,
        side_effect: bool = False,
        timeout_s: float | None = None,
        requires_approval: bool = False,
        output_schema: Mapping[str, Any] | None = None,
        _validate: Callable[[Mapping[str, Any]], dict[str, Any]] | None = None,
        _check_output: OutputCheck | None = None,
    ) -> None:
        """Declare a tool with an explicit JSON schema (Draft 2020-12).

        Raises:
            ConfigurationError: a bad name, an empty description, an invalid schema (or one
                with a `$ref` that does not resolve within it: nothing is fetched), a
                non-callable handler, a side-effecting handler that takes no ToolContext, or
                an invalid `output_schema` (what the tool returns; a result that does not
                match it is answered as `invalid_result`).
        """
        self.name = check_tool_name(name)
        if not isinstance(cast(object, description), str) or not description.strip():
            raise ConfigurationError(f"tool {name!r} needs a description: the model reads it")
        if not callable(handler):
            raise ConfigurationError(f"tool {name!r}: handler {handler!r} is not callable")
        if timeout_s is not None and (
            isinstance(timeout_s, bool)
            or not isinstance(cast(object, timeout_s), int | float)
            or not timeout_s > 0
        ):
            raise ConfigurationError(f"tool {name!r}: timeout_s must be a number > 0, got {timeout_s!r}")
        if not isinstance(cast(object, input_schema), Mapping):
            raise ConfigurationError(
                f"tool {name!r}: input_schema must be a JSON schema object, got {type(input_schema).__name__}"
            )
        schema = dict(input_schema)
        if schema.get("type") != "object":
            raise ConfigurationError(f"tool {name!r}: input_schema must have type 'object'")
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ConfigurationError(f"tool {name!r}: invalid input_schema: {exc.message}") from exc
        if (unresolved := unresolved_ref(schema)) is not None:
            raise ConfigurationError(f"tool {name!r}: input_schema: {unresolved}")
        self.description = description.strip()
        self.input_schema = schema
        self.handler = handler
        self.side_effect = side_effect
        self.timeout_s = timeout_s
        self.requires_approval = requires_approval
        self._context_param = _context_parameter(handler)
        self._is_async = _is_async(handler)
        self._validate = _validate or _jsonschema_validator(schema)
        self.output_schema = None if output_schema is None else dict(output_schema)
        self.check_output: OutputCheck | None = (
            schema_check(name, output_schema) if output_schema is not None else _check_output
        )
        """What is wrong with a return value, or None; None: the result is not checked."""
        if side_effect and self._context_param is None:
            raise ConfigurationError(
                f"tool {name!r} has side effects: its handler must take a ToolContext parameter "
                "to read the idempotency key"
            )

    def __repr__(self) -> str:
        return f"Tool(name={self.name!r}, side_effect={self.side_effect})"

    @property
    def takes_context(self) -> bool:
        """The tool function has a `ToolContext` parameter."""
        return self._context_param is not None

    @property
    def runs_in_thread(self) -> bool:
        """A sync tool function: it runs in a worker thread, which a timeout cannot stop."""
        return not self._is_async

    def to_param(self) -> ToolParam:
        """The tool as the Messages API `tools` entry."""
        return {
            "name": self.name,
            "description": self.description,
            "input_schema": self.input_schema,
        }

    def validate(self, tool_input: object) -> dict[str, Any]:
        """Validate a tool_use input against the schema.

        Returns:
            The keyword arguments for the tool function.

        Raises:
            ToolInputError: the input does not match; the message says which field.
        """
        if not isinstance(tool_input, dict):
            raise ToolInputError(f"input must be a JSON object, got {type(tool_input).__name__}")
        return self._validate(tool_input)  # pyright: ignore[reportUnknownArgumentType]

    async def invoke(self, arguments: Mapping[str, Any], context: ToolContext | None) -> object:
        """Call the tool function with validated arguments (and the context, when it asks for one).

        Nested objects and arrays are copied first: a tool function that mutates its input cannot
        change the transcript, the observation or the next request.
        """
        kwargs = {
            name: value if value.__class__ in _SCALARS else _isolated(value)
            for name, value in arguments.items()
        }
        if self._context_param is not None:
            if context is None:
                raise TypeError(f"tool {self.name!r} takes a ToolContext: invoke it with one")
            kwargs[self._context_param] = context
        if self._is_async:
            pending: Any = self.handler(**kwargs)  # an async tool function's coroutine
            return await pending
        # Sync tool functions never run on the event loop; a timeout abandons the thread's result.
        return await anyio.to_thread.run_sync(
            functools.partial(self.handler, **kwargs), abandon_on_cancel=True
        )


_SCALARS: Final = frozenset({str, int, float, bool, type(None)})
"""JSON values that are immutable: passed to a tool function as they are."""


def _isolated(value: object) -> object:
    """A copy of the JSON containers in `value` (scalars are immutable and shared)."""
    if isinstance(value, dict):
        return {key: _isolated(item) for key, item in cast(dict[object, object], value).items()}
    if isinstance(value, list):
        return [_isolated(item) for item in cast(list[object], value)]
    return value


def _is_async(handler: Handler) -> bool:
    call = getattr(handler, "__call__", None)  # noqa: B004 - async callable objects count too
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)


def _context_parameter(handler: Handler) -> str | None:
    try:
        hints = typing.get_type_hints(handler)
    except Exception:  # unresolvable annotations: look at the raw strings instead
        hints = dict(getattr(handler, "__annotations__", {}))
    for param, hint in hints.items():
        if param != "return" and (hint is ToolContext or hint == "ToolContext"):
            return param
    return None


def _jsonschema_validator(
    schema: Mapping[str, Any],
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    validator = local_validator(schema)  # its references were checked: nothing is retrieved

    def validate(tool_input: Mapping[str, Any]) -> dict[str, Any]:
        error = _best_match(validator.iter_errors(tool_input))
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path) or "(input)"
            raise ToolInputError(f"{where}: {error.message}")
        return dict(tool_input)

    return validate


def _pydantic_validator(
    model: type[pydantic.BaseModel], parameters: Mapping[str, str]
) -> Callable[[Mapping[str, Any]], dict[str, Any]]:
    """Validate with `model`; `parameters` maps each model field to its tool function's parameter."""

    parse = model.__pydantic_validator__.validate_python  # what model_validate calls, bound once
    pairs = tuple(parameters.items())

    def validate(tool_input: Mapping[str, Any]) -> dict[str, Any]:
        try:
            parsed = parse(tool_input)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'/'.join(str(p) for p in err['loc']) or '(input)'}: {err['msg']}" for err in exc.errors()
            )
            raise ToolInputError(problems) from None
        return {param: getattr(parsed, field) for field, param in pairs}

    return validate


def _from_function(
    fn: Handler,
    *,
    name: str | None,
    description: str | None,
    side_effect: bool,
    timeout_s: float | None,
    requires_approval: bool,
) -> Tool:
    tool_name = check_tool_name(str(getattr(fn, "__name__", "")) if name is None else name)
    try:
        hints = typing.get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise ConfigurationError(f"tool {tool_name!r}: cannot resolve type hints: {exc}") from exc
    # Model fields get neutral names, each aliased to its parameter: a parameter may be called
    # `schema`, `json` or `_id` (BaseModel attributes, or private to pydantic) and still be a
    # property of the schema, validated and passed under its own name.
    fields: dict[str, Any] = {}
    parameters: dict[str, str] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ConfigurationError(
                f"tool {tool_name!r}: parameter {param.name!r} must be a plain keyword parameter"
            )
        hint = hints.get(param.name)
        if hint is ToolContext:
            continue
        if hint is None:
            raise ConfigurationError(
                f"tool {tool_name!r}: parameter {param.name!r} needs a type annotation for its schema"
            )
        default = ... if param.default is param.empty else param.default
        field = f"arg{len(fields)}"
        fields[field] = (hint, pydantic.Field(default, alias=param.name))
        parameters[field] = param.name
    try:
        model = pydantic.create_model(
            f"{tool_name}_input",
            __config__=pydantic.ConfigDict(extra="forbid"),
            **fields,
        )
        schema = model.model_json_schema()
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError) as exc:
        raise ConfigurationError(f"tool {tool_name!r}: no JSON schema for its parameters: {exc}") from exc
    schema.pop("title", None)
    return Tool(
        name=tool_name,
        description=(inspect.getdoc(fn) or "") if description is None else description,
        input_schema=schema,
        handler=fn,
        side_effect=side_effect,
        timeout_s=timeout_s,
        requires_approval=requires_approval,
        _validate=_pydantic_validator(model, parameters),
        _check_output=annotation_check(tool_name, return_hint(fn)),
    )


@overload
def tool(fn: Handler, /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    side_effect: bool = False,
    timeout_s: float | None = None,
    requires_approval: bool = False,
) -> Callable[[Handler], Tool]: ...
def tool(
    fn: Handler | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    side_effect: bool = False,
    timeout_s: float | None = None,
    requires_approval: bool = False,
) -> Tool | Callable[[Handler], Tool]:
    """Make a `Tool` from a sync or async function.

    The name comes from the function, the description from its docstring, and the input
    schema from its type hints (through pydantic). A parameter annotated `ToolContext` gets
    the call's context and is left out of the schema.

    Raises:
        ConfigurationError: a name the API rejects, a missing docstring or annotation.
    """

    def make(handler: Handler) -> Tool:
        return _from_function(
            handler,
            name=name,
            description=description,
            side_effect=side_effect,
            timeout_s=timeout_s,
            requires_approval=requires_approval,
        )

    return make if fn is None else make(fn)
