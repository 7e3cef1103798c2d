"""An MCP server as a contract declares it: how to start or reach it, never a secret itself.

A stdio server is a `command` with `args`, the names of the environment variables passed to it
(`env`) and a working directory (`cwd`); a streamable-HTTP server is a `url` with `headers`,
whose values take secrets from the environment as `${NAME}`. `boundloop.mcp` builds the server
from it (`from_contract`); this module needs no `mcp` SDK, so a contract is read and checked
without the extra.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Final, final

import pydantic
from pydantic import BaseModel, ConfigDict, Field
from pydantic.config import JsonDict

from ..errors import ConfigurationError

ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""An environment variable's name (matched whole)."""
ENV_REFERENCE: Final = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
"""`${NAME}` in a header's value: the environment variable's value, read when the loop is built."""

_TRANSPORTS: Final[JsonDict] = {
    # Exactly one of `command` and `url`; the fields of one transport need it.
    "oneOf": [{"required": ["command"]}, {"required": ["url"]}],
    "dependentRequired": {"args": ["command"], "env": ["command"], "cwd": ["command"], "headers": ["url"]},
}


@final
class MCPServerSpec(BaseModel):
    """An MCP server a contract declares (`mcp_servers`): stdio (`command`) or HTTP (`url`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", title="mcp_server", json_schema_extra=_TRANSPORTS)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="The server in messages; unique.")
    command: str | None = Field(default=None, min_length=1, description="stdio: the command to start.")
    args: tuple[str, ...] = Field(default=(), description="stdio: the command's arguments.")
    env: tuple[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")], ...] = Field(
        default=(),
        description="stdio: names of environment variables passed to the server with their "
        "values when the loop is built (never the values themselves).",
    )
    cwd: str | None = Field(default=None, min_length=1, description="stdio: the server's working directory.")
    url: str | None = Field(
        default=None,
        pattern=r"^https?://",
        description="Streamable HTTP: the server's MCP endpoint (http:// or https://).",
    )
    headers: dict[str, str] = Field(
        default_factory=dict[str, str],
        description="Streamable HTTP: sent with every request; a value takes a secret from the "
        "environment as ${NAME}, never literally.",
    )
    prefix: str | None = Field(
        default=None,
        pattern=r"^[a-zA-Z0-9_-]{1,63}$",
        description="Put before each of the server's tool names; the policy names its tools with it.",
    )
    timeout_s: float | None = Field(default=None, gt=0, description="Each call's timeout.")
    connect_timeout_s: float = Field(
        default=30.0, gt=0, description="The start, initialize and tools/list together (default 30 s)."
    )

    @pydantic.model_validator(mode="after")
    def _one_transport(self) -> MCPServerSpec:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r} needs a command (stdio) or a url (HTTP), not both")
        stdio = bool(self.args or self.env or self.cwd is not None)
        if (self.url is not None and stdio) or (self.command is not None and self.headers):
            raise ValueError(f"MCP server {self.name!r}: args, env and cwd are stdio's, headers HTTP's")
        return self

    def data(self) -> dict[str, object]:
        """The declaration as JSON, as a contract writes it (unset fields left out)."""
        return self.model_dump(mode="json", exclude_defaults=True)


def unique_servers(servers: tuple[MCPServerSpec, ...]) -> tuple[MCPServerSpec, ...]:
    """`servers`, if no two share a name or a prefix."""
    for field in ("name", "prefix"):
        values = [getattr(server, field) for server in servers if getattr(server, field) is not None]
        if len(set(values)) != len(values):
            raise ValueError(f"MCP servers' {field}s must be unique, got {values}")
    return servers


def resolved(server: MCPServerSpec, environ: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """The server's environment (`env`'s names with their values) and headers (`${NAME}` replaced).

    Raises:
        ConfigurationError: a variable it names is not set (its name said, never a value).
    """

    def value(name: str) -> str:
        if name not in environ:
            raise ConfigurationError(
                f"MCP server {server.name!r} needs the environment variable {name}, which is not set"
            )
        return environ[name]

    env = {name: value(name) for name in server.env}
    headers = {
        key: ENV_REFERENCE.sub(lambda match: value(match.group(1)), text)
        for key, text in server.headers.items()
    }
    return env, headers
