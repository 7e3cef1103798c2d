"""The SDK's own tool helpers (`anthropic.lib.tools`) as tools of the loop, converted once.

A `@beta_tool` / `@beta_async_tool` function becomes a `Tool` with the SDK's definition (its
name, description, schema and per-tool fields); a builtin tool of the SDK (the memory tool
classes, `BetaLocalFilesystemMemoryTool` among them) becomes `Tool.defined` with the API's
definition it gives. Either one's calls pass the loop's gate like any tool's; the SDK's own
`call` runs them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from ..tools import Tool
from .tool_input import ToolFields

if TYPE_CHECKING:
    from anthropic.lib.tools import (
        BetaAsyncBuiltinFunctionTool,
        BetaAsyncFunctionTool,
        BetaBuiltinFunctionTool,
        BetaFunctionTool,
    )

    SDKTool: TypeAlias = (
        BetaFunctionTool[Any]
        | BetaAsyncFunctionTool[Any]
        | BetaBuiltinFunctionTool
        | BetaAsyncBuiltinFunctionTool
    )
    """The SDK's tool helpers `tools=` takes as they are: `@beta_tool` / `@beta_async_tool`
    functions and the SDK's builtin tools (its memory tool classes)."""


def sdk_tool(entry: object) -> Tool | None:
    """`entry` as a `Tool` if it is one of the SDK's tool helpers; None: it is not."""
    from anthropic.lib.tools import (
        BetaAsyncBuiltinFunctionTool,
        BetaAsyncFunctionTool,
        BetaBuiltinFunctionTool,
        BetaFunctionTool,
    )

    if isinstance(entry, BetaFunctionTool | BetaAsyncFunctionTool):
        function: BetaFunctionTool[Any] | BetaAsyncFunctionTool[Any] = cast(Any, entry)
        definition: dict[str, Any] = dict(function.to_dict())
        fields = cast(
            ToolFields, {key: definition[key] for key in ToolFields.__annotations__ if key in definition}
        )
        return Tool(
            name=function.name,
            description=str(definition.get("description") or ""),
            input_schema=cast(dict[str, Any], definition["input_schema"]),
            handler=_calling(function.call, is_async=isinstance(entry, BetaAsyncFunctionTool)),
            **fields,
        )
    if isinstance(entry, BetaBuiltinFunctionTool | BetaAsyncBuiltinFunctionTool):
        builtin = entry
        return Tool.defined(
            cast(dict[str, Any], builtin.to_dict()),
            _calling(builtin.call, is_async=isinstance(entry, BetaAsyncBuiltinFunctionTool), whole=True),
            input_schema=_memory_schema() if _is_memory(entry) else None,
        )
    return None


def _calling(call: Callable[[object], Any], *, is_async: bool, whole: bool = False) -> Callable[..., Any]:
    """The SDK tool's `call(input)` as a tool function (`whole`: one taking the input as one dict,
    for `Tool.defined`); an iterable of content blocks it returns is listed."""

    def listed(value: object) -> object:
        return value if isinstance(value, str) else list(cast("list[object]", value))

    if is_async:

        async def run_async(*whole_input: dict[str, Any], **tool_input: Any) -> object:
            return listed(await call(whole_input[0] if whole else tool_input))

        return run_async

    def run(*whole_input: dict[str, Any], **tool_input: Any) -> object:
        return listed(call(whole_input[0] if whole else tool_input))

    return run


def _is_memory(entry: object) -> bool:
    from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool

    return isinstance(entry, BetaAbstractMemoryTool | BetaAsyncAbstractMemoryTool)


@functools.cache
def _memory_schema() -> dict[str, Any]:
    """The memory tool's commands as the SDK models them, a JSON schema its calls are checked against."""
    import pydantic
    from anthropic.types.beta import BetaMemoryTool20250818Command

    return {"type": "object", **pydantic.TypeAdapter(BetaMemoryTool20250818Command).json_schema()}
