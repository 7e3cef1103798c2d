"""Tools: `Tool`, the `@tool` decorator, `ToolContext` and `RetryableToolError`."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import typing
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Generic, TypeAlias, cast, final, overload

import anyio.to_thread
import docstring_parser
import jsonschema
from typing_extensions import ParamSpec, TypeVar, Unpack

from ._base.schemas import unresolved_ref
from ._base.tool_input import (
    ToolFields,
    Validate,
    api_fields,
    defined_tool,
    jsonschema_validator,
    signature_input,
)
from ._base.tool_input import ToolInputError as ToolInputError
from ._base.tool_output import OutputCheck, annotation_check, return_hint, schema_check
from ._lazy import claim as _claim
from .errors import ConfigurationError
from .records import ToolCall

if TYPE_CHECKING:
    from anthropic.types import ToolUnionParam

__all__ = [
    "DepsT",
    "Handler",
    "RetryableToolError",
    "TOOL_NAME",
    "Tool",
    "ToolContext",
    "ToolInputError",
    "check_tool_name",
    "idempotency_key",
    "tool",
]

_claim(__name__, ToolInputError)  # defined in _base/tool_input.py: reported as this module's

TOOL_NAME: Final = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
"""What the Messages API accepts as a tool name."""

Handler: TypeAlias = Callable[..., object]
"""A tool's function: sync, or async (returning an awaitable), called with keyword arguments."""

DepsT = TypeVar("DepsT", default=object)
"""The type of a run's dependencies (`run(goal, deps=...)`, `ToolContext[DepsT].deps`)."""

_P = ParamSpec("_P", default=...)
_R = TypeVar("_R", covariant=True, default=object)


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext(Generic[DepsT]):
    """Passed to a tool function that has a parameter annotated `ToolContext` (or
    `ToolContext[Deps]`, which types `deps`)."""

    task_id: str
    trace_id: str
    step: int
    tool_use_id: str
    idempotency_key: str
    """`f"{task_id}:{step}:{tool_use_id}"`: stable across retries of the same call."""
    deps: DepsT = dataclasses.field(default=cast("DepsT", None), repr=False)
    """The run's dependencies, as given to `run(goal, deps=...)` or `resume(..., deps=...)`
    (None when none were given): a database pool, an HTTP client, the current user. Never
    checkpointed, recorded or traced (nor in the context's repr): a resumed run is given them again."""


def idempotency_key(task_id: str, call: ToolCall) -> str:
    """The key a side-effecting tool function uses to do its effect once: `task_id:step:tool_use_id`."""
    return f"{task_id}:{call.step}:{call.id}"


class RetryableToolError(Exception):
    """Raise from a tool function to ask for a retry (up to `Budget.max_tool_retries`)."""

    def __init__(self, message: str, *, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


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
class Tool(Generic[_P, _R]):
    """A tool the model may call: name, description, JSON schema and tool function (`handler`).

    The tool function is called with the validated input as keyword arguments, plus the
    `ToolContext` when one parameter is annotated with it. Sync tool functions run in a
    worker thread; async ones run on the event loop. A tool the API defines (the memory tool,
    the text editor, bash, computer use) is made with `Tool.defined(definition, handler)`.

    A tool is still its function: `tool(*args, **kwargs)` calls it as it was written (an async
    one returns its coroutine), typed as the function (`Tool[P, R]`: its parameters and its
    return type); the loop's gate, budget and records are not involved.
    """

    __slots__ = (
        "_context_param",
        "_function",
        "_is_async",
        "_validate",
        "api_fields",
        "check_output",
        "definition",
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
        handler: Callable[_P, _R],
        side_effect: bool = False,
        timeout_s: float | None = None,
        requires_approval: bool = False,
        output_schema: Mapping[str, Any] | None = None,
        _validate: Validate | None = None,
        _check_output: OutputCheck | None = None,
        _definition: dict[str, Any] | None = None,
        **fields: Unpack[ToolFields],
    ) -> None:
        """Declare a tool with an explicit JSON schema (Draft 2020-12).

        `strict`, `defer_loading` (tool search: the API shows the tool once a search finds it;
        it is registered and gated from the start), `allowed_callers` (`"direct"`, a code
        execution tool's type), `input_examples`, `cache_control` and `eager_input_streaming`
        are the API's per-tool fields, sent in the tool's definition as given (None: not sent).

        Raises:
            ConfigurationError: a bad name, an empty description, an invalid schema (or one
                with a `$ref` that does not resolve within it: nothing is fetched), a
                non-callable handler, a side-effecting handler that takes no ToolContext, an
                invalid `output_schema` (what the tool returns; a result that does not
                match it is answered as `invalid_result`), or a per-tool field the API does
                not take (an input example that does not match the schema among them).
        """
        self._function: Callable[_P, _R] = handler
        if isinstance(handler, Tool):  # another tool's function (a contract's handler may be a tool)
            self._function = handler._function
            handler = cast("Callable[_P, _R]", handler.handler)
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
        self.handler: Handler = handler
        self.side_effect = side_effect
        self.timeout_s = timeout_s
        self.requires_approval = requires_approval
        self._context_param = _context_parameter(handler)
        self._is_async = _is_async(handler)
        self._validate = _validate or jsonschema_validator(schema)
        self.api_fields: dict[str, Any] = api_fields(name, fields, self._validate)
        """The API's per-tool fields sent with the tool (`strict`, `defer_loading`, ...)."""
        self.definition = _definition
        """The API's definition of a tool it defines (`Tool.defined`), sent as is; None: a custom tool."""
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

    def __call__(self, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        """Call the tool function as written: `await read_order("O-1")` for an async one."""
        return self._function(*args, **kwargs)

    @property
    def takes_context(self) -> bool:
        """The tool function has a `ToolContext` parameter."""
        return self._context_param is not None

    @property
    def runs_in_thread(self) -> bool:
        """A sync tool function: it runs in a worker thread, which a timeout cannot stop."""
        return not self._is_async

    @classmethod
    def defined(
        cls,
        definition: Mapping[str, Any],
        handler: Handler,
        *,
        side_effect: bool = False,
        timeout_s: float | None = None,
        requires_approval: bool = False,
        input_schema: Mapping[str, Any] | None = None,
    ) -> Tool:
        """A tool the API defines and the client runs: the memory tool, the text editor, bash,
        computer use (`Tool.defined({"type": "memory_20250818", "name": "memory"}, handler)`).

        The request sends `definition` as it is; the calls pass the gate of any tool (policy,
        approval, budget, timeout), their input checked against `input_schema` (default: any
        object). `handler` gets the input as one dict (and a `ToolContext` parameter its context).

        Raises:
            ConfigurationError: the definition is not such a tool of the installed SDK (a
                server tool goes in `tools=` as its dict), or what `Tool(...)` refuses.
        """
        checked = defined_tool(definition)
        name = str(checked["name"])
        if not callable(handler):
            raise ConfigurationError(f"tool {name!r}: handler {handler!r} is not callable")
        context = _context_parameter(handler)
        if side_effect and context is None:
            raise ConfigurationError(
                f"tool {name!r} has side effects: its handler must take a ToolContext parameter "
                "to read the idempotency key"
            )
        made: Tool = Tool(
            name=name,
            description=f"{checked['type']}, defined by the API",
            input_schema={"type": "object"} if input_schema is None else input_schema,
            handler=_whole_input(handler, context),
            side_effect=side_effect,
            timeout_s=timeout_s,
            requires_approval=requires_approval,
            _definition=checked,
        )
        made._function = handler  # called as itself: the input as one dict
        return made

    def to_param(self) -> ToolUnionParam:
        """The tool as the Messages API `tools` entry: its definition, with its per-tool fields."""
        if self.definition is not None:
            return cast("ToolUnionParam", dict(self.definition))
        param = {"name": self.name, "description": self.description, "input_schema": self.input_schema}
        return cast("ToolUnionParam", param | self.api_fields)

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

    def invoke(self, arguments: Mapping[str, Any], context: ToolContext | None) -> Awaitable[object]:
        """Call the tool function with validated arguments (and the context, when it asks for one);
        await what it returns for the function's value.

        Nested objects and arrays are copied first: a tool function that mutates its input cannot
        change the transcript, the observation or the next request. An async tool function's own
        coroutine is returned (no coroutine around it, one a call); a sync one runs in a worker
        thread when awaited.
        """
        kwargs = dict(arguments)  # a loop, not a comprehension: no function made and called a call
        for name, value in arguments.items():
            if value.__class__ not in _SCALARS:
                kwargs[name] = _isolated(value)
        if self._context_param is not None:
            if context is None:
                raise TypeError(f"tool {self.name!r} takes a ToolContext: invoke it with one")
            kwargs[self._context_param] = context
        if self._is_async:
            return cast("Awaitable[object]", self.handler(**kwargs))  # its coroutine
        # Sync tool functions never run on the event loop; a timeout abandons the thread's result.
        return anyio.to_thread.run_sync(functools.partial(self.handler, **kwargs), abandon_on_cancel=True)


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
        if param != "return" and _is_context(hint):
            return param
    return None


def _is_context(hint: object) -> bool:
    """`hint` is `ToolContext`, `ToolContext[Deps]`, or one of them as an unresolved string."""
    if hint is ToolContext or typing.get_origin(hint) is ToolContext:
        return True
    return isinstance(hint, str) and (hint == "ToolContext" or hint.startswith("ToolContext["))


def _whole_input(handler: Handler, context: str | None) -> Handler:
    """An API-defined tool's handler as a tool function: the input as one dict (and the
    context under its own parameter's name, when it takes one)."""

    def extra(value: ToolContext) -> dict[str, ToolContext]:
        return {} if context is None else {context: value}

    if _is_async(handler):

        async def run_async(_boundloop_context: ToolContext, **tool_input: Any) -> object:
            pending: Any = handler(tool_input, **extra(_boundloop_context))
            return await pending

        return run_async

    def run(_boundloop_context: ToolContext, **tool_input: Any) -> object:
        return handler(tool_input, **extra(_boundloop_context))

    return run


def _docstring(fn: Handler) -> tuple[str, dict[str, str]]:
    """A tool function's description and its parameters' texts, read from its docstring (Google,
    NumPy or Sphinx style, by `docstring_parser`): the summary without the parameters' section.
    A docstring that documents no parameter is the description whole."""
    text = inspect.getdoc(fn) or ""
    try:
        parsed = docstring_parser.parse(text)
    except docstring_parser.ParseError:  # not one of the styles: the text as written
        return text, {}
    params = {param.arg_name: param.description for param in parsed.params if param.description}
    if not params:
        return text, {}
    summary = (parsed.short_description, parsed.long_description)
    return "\n\n".join(part for part in summary if part), params


def _described(schema: dict[str, Any], texts: Mapping[str, str]) -> dict[str, Any]:
    """`schema` with each documented parameter's text as its property's description, unless it
    has one (`Annotated[..., Field(description=...)]` wins)."""
    properties: dict[str, Any] = schema.get("properties", {})
    for param, text in texts.items():
        prop = properties.get(param)
        if isinstance(prop, dict) and "description" not in prop:
            prop["description"] = text
    return schema


def _from_function(
    fn: Callable[_P, _R],
    *,
    name: str | None,
    description: str | None,
    side_effect: bool,
    timeout_s: float | None,
    requires_approval: bool,
    api: ToolFields,
) -> Tool[_P, _R]:
    tool_name = check_tool_name(str(getattr(fn, "__name__", "")) if name is None else name)
    schema, validate = signature_input(fn, tool_name, ToolContext)
    summary, params = _docstring(fn)
    return Tool(
        name=tool_name,
        description=summary if description is None else description,
        input_schema=_described(schema, params),
        handler=fn,
        side_effect=side_effect,
        timeout_s=timeout_s,
        requires_approval=requires_approval,
        **api,
        _validate=validate,
        _check_output=annotation_check(tool_name, return_hint(fn)),
    )


@overload
def tool(fn: Callable[_P, _R], /) -> Tool[_P, _R]: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    side_effect: bool = False,
    timeout_s: float | None = None,
    requires_approval: bool = False,
    **fields: Unpack[ToolFields],
) -> Callable[[Callable[_P, _R]], Tool[_P, _R]]: ...
def tool(
    fn: Handler | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    side_effect: bool = False,
    timeout_s: float | None = None,
    requires_approval: bool = False,
    **fields: Unpack[ToolFields],
) -> Tool[..., Any] | Callable[[Callable[..., Any]], Tool[..., Any]]:
    """Make a `Tool` from a sync or async function; the tool is still callable as the function.

    The name comes from the function, the description from its docstring, and the input
    schema from its type hints (through pydantic). A docstring in Google, NumPy or Sphinx
    style gives the description its summary (without the parameters' section) and each
    parameter's text to the parameter's schema (`Annotated[T, Field(description=...)]` wins).
    A parameter annotated `ToolContext` gets the call's context and is left out of the schema.
    `strict`, `defer_loading`, `allowed_callers`, `input_examples`, `cache_control` and
    `eager_input_streaming` are the API's per-tool fields (see `Tool`).

    Raises:
        ConfigurationError: a name the API rejects, a missing docstring or annotation.
    """

    def make(handler: Callable[..., Any]) -> Tool[..., Any]:
        return _from_function(
            handler,
            name=name,
            description=description,
            side_effect=side_effect,
            timeout_s=timeout_s,
            requires_approval=requires_approval,
            api=fields,
        )

    return make if fn is None else make(fn)
