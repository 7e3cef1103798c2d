"""Server tools: tools the API runs itself (web search, web fetch, code execution, tool search).

A server tool is offered as the SDK's definition, a dict (`{"type": "web_search_20250305",
"name": "web_search", "max_uses": 3}`), in `tools=` next to the loop's own tools; it is sent in
the request's `tools` after them, in the order given. The API runs its calls and returns them
as `server_tool_use` and `*_tool_result` blocks: the loop never answers, validates or counts
them as tool calls, and the policy cannot decide them one by one. So the policy decides at
construction: a server tool `Policy.forbidden` names, or one an allow-list (`Policy.allowed`)
leaves out, is a `ConfigurationError` (never offered, rather than run unchecked), and one that
needs approval or evidence (`requires_approval`, `required_evidence`) cannot be. What they use
is counted from `usage.server_tool_use` (`Budget.max_server_tool_uses`) and priced.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Mapping
from typing import Any, Final

from ..errors import ConfigurationError

SERVER_FAMILIES: Final = ("web_search_", "web_fetch_", "code_execution_", "tool_search_tool_", "advisor_")
"""The type prefixes of the tools the API runs (the others the SDK lists, such as bash, text
editor, computer use and memory, are run by the client: `Tool.defined(definition, handler)`)."""


def _types(union: object) -> set[str]:
    """The `type` literals of the tool definitions a tool union of the SDK lists."""
    found: set[str] = set()
    for definition in typing.get_args(union):
        kind = typing.get_type_hints(definition).get("type")
        found.update(value for value in typing.get_args(kind) if isinstance(value, str))
    return found


@functools.cache
def server_tool_types() -> frozenset[str]:
    """Every server tool type of the installed SDK's `ToolUnionParam` and beta
    `BetaToolUnionParam` (read on first use: `import boundloop` loads no SDK)."""
    from anthropic.types import ToolUnionParam
    from anthropic.types.beta import BetaToolUnionParam

    kinds = _types(ToolUnionParam) | _types(BetaToolUnionParam)
    return frozenset(kind for kind in kinds if kind.startswith(SERVER_FAMILIES))


@functools.cache
def client_tool_names() -> dict[str, frozenset[str]]:
    """The tools the API defines and the client runs (memory, text editor, bash, computer use):
    each type of the installed SDK's tool unions with a `name`, not a server tool's, and the
    names the SDK gives it (empty: any)."""
    from anthropic.types import ToolUnionParam
    from anthropic.types.beta import BetaToolUnionParam

    names: dict[str, frozenset[str]] = {}
    for definition in (*typing.get_args(ToolUnionParam), *typing.get_args(BetaToolUnionParam)):
        hints = typing.get_type_hints(definition)
        for kind in typing.get_args(hints.get("type")):
            if isinstance(kind, str) and "name" in hints and not kind.startswith(SERVER_FAMILIES):
                names[kind] = frozenset(
                    name for name in typing.get_args(hints["name"]) if isinstance(name, str)
                )
    return names


@functools.cache
def server_tool_kinds() -> tuple[str, ...]:
    """The kinds of server tool use `usage.server_tool_use` counts in the installed SDK
    (`web_search`, `web_fetch`): with `OTHER_KIND`, the bounded `kind` label of the metric."""
    from anthropic.types.server_tool_usage import ServerToolUsage

    fields = ServerToolUsage.model_fields
    return tuple(field.removesuffix("_requests") for field in fields if field.endswith("_requests"))


OTHER_KIND: Final = "other"
"""The metric label of a count the API reports that the installed SDK does not model."""


def server_tool(entry: Mapping[str, object]) -> dict[str, Any]:
    """A server tool definition, checked: its `type` a server tool type of the installed SDK,
    its `name` a string.

    Raises:
        ConfigurationError: the definition is not a server tool the SDK knows.
    """
    kind = entry.get("type")
    name = entry.get("name")
    if not isinstance(kind, str) or kind not in server_tool_types():
        client_side = isinstance(kind, str) and kind in client_tool_names()
        hint = " (run by the client: give it as Tool.defined(definition, handler))" if client_side else ""
        raise ConfigurationError(
            f"{dict(entry)!r} is not a server tool{hint}; server tool types of the installed SDK: "
            f"{', '.join(sorted(server_tool_types()))}"
        )
    if not isinstance(name, str) or not name:
        raise ConfigurationError(f"server tool {kind!r} needs a name, e.g. {{'name': 'web_search'}}")
    return dict(entry)


def server_tool_uses(usage: object) -> dict[str, int]:
    """The server tool uses of one response by kind (`web_search`, `web_fetch`, ...): every
    count `usage.server_tool_use` reports, those the SDK does not model included; zero left out."""
    counted: object = getattr(usage, "server_tool_use", None)
    if counted is None:
        return {}
    fields: dict[str, object] = {
        **getattr(counted, "__dict__", {}),
        **(getattr(counted, "model_extra", None) or {}),
    }
    uses: dict[str, int] = {}
    for field, value in fields.items():
        if (
            field.endswith("_requests")
            and isinstance(value, int)
            and not isinstance(value, bool)
            and value > 0
        ):
            uses[field.removesuffix("_requests")] = value
    return uses
