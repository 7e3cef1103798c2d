"""The rules of a contract's `mcp_servers`: names and prefixes, and no secret written in it.

A server's tools are known only once it runs, so the policy cannot be checked against them
here: the policy names a server's tools with its `prefix` (`time_get_current_time`), and a name
under a declared prefix is taken as one (the loop checks it against the listed tools when the
server connects). A server without a prefix has tools the policy cannot name in a contract.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from .._base.mcp_spec import ENV_NAME, ENV_REFERENCE
from ..redaction import Redactor
from ..tools import TOOL_NAME

_SENSITIVE: Final = re.compile(r"auth|cookie|token|secret|key|password|credential", re.IGNORECASE)
"""Header names whose value is a secret: it must come from the environment (`${NAME}`)."""
_SECRETS: Final = Redactor()
"""The default patterns: a value they match is a secret written into the contract."""
_SERVER_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")

Found = tuple[str, str, str]
"""A problem: its rule, its field, what is wrong (`Problem`'s fields)."""


def mcp_prefixes(contract: Mapping[str, Any]) -> tuple[str, ...]:
    """The declared servers' prefixes."""
    return tuple(server["prefix"] for server in contract.get("mcp_servers", ()) if "prefix" in server)


def is_server_tool(name: str, prefixes: tuple[str, ...]) -> bool:
    """Whether a tool name the policy writes is under a declared server's prefix."""
    return any(name.startswith(prefix) and len(name) > len(prefix) for prefix in prefixes)


def mcp_problems(servers: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Iterator[Found]:
    """What is wrong with the declared servers (that the schema cannot say)."""
    seen: dict[str, dict[str, int]] = {"name": {}, "prefix": {}}
    for index, server in enumerate(servers):
        where = f"mcp_servers/{index}"
        for field, taken in seen.items():
            value = server.get(field)
            if value is None:
                continue
            if value in taken:
                yield (
                    "mcp-server",
                    f"{where}/{field}",
                    f"{value!r} is also mcp_servers/{taken[value]}'s {field}",
                )
            taken[value] = index
        yield from _whole(server, where)
        for tool in tools:
            prefix = server.get("prefix")
            if prefix is not None and is_server_tool(tool["name"], (prefix,)):
                yield (
                    "mcp-server",
                    f"{where}/prefix",
                    f"the declared tool {tool['name']!r} is under this server's prefix: "
                    "the policy could not tell them apart",
                )
        for header, value in server.get("headers", {}).items():
            literal = ENV_REFERENCE.sub("", value)
            if _SECRETS(literal) != literal or (_SENSITIVE.search(header) and literal == value):
                yield (
                    "mcp-secret",
                    f"{where}/headers/{header}",
                    "a secret is written into the contract: take it from the environment "
                    'with ${NAME} (e.g. "Bearer ${API_TOKEN}")',
                )


def _whole(server: Mapping[str, Any], where: str) -> Iterator[Found]:
    """Names are matched whole (a JSON Schema pattern's `$` lets a trailing newline through)."""
    if not _SERVER_NAME.fullmatch(server["name"]):
        yield ("schema", f"{where}/name", f"{server['name']!r} is not a server name")
    prefix = server.get("prefix")
    if prefix is not None and not TOOL_NAME.fullmatch(f"{prefix}x"):
        yield ("api-name", f"{where}/prefix", f"{prefix!r} cannot start a tool name")
    for position, name in enumerate(server.get("env", ())):
        if not ENV_NAME.fullmatch(name):
            yield ("schema", f"{where}/env/{position}", f"{name!r} is not a variable's name")
