"""Toolsets: tools known only once connected (MCP servers, `boundloop.mcp`).

A toolset is passed in `AgentLoop(tools=[...])` next to the local tools. The loop's
configuration is built without its tools; `connected(config)` opens every toolset, lists its
tools and yields the configuration of the run with them registered: one registry, so each
call to a toolset's tool passes the same gate as a local tool's (schema, policy, budgets,
repeats, approval, timeouts, output limits, events, metrics, spans). A run opens the
toolsets itself (`start_new`, `resume`) unless the loop was entered (`async with loop:`),
which opens them once for every run until it exits.

A toolset that yields a `ToolList` may list its tools again while connected (an MCP server's
`tools/list_changed`, a reconnect): before each model request the run lists a stale list again
and takes the latest listing (`refresh_tools`), so the request offers the tools as listed now.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager

from ..errors import ConfigurationError
from ..tools import Tool
from .config import LoopConfig, check_policy, tool_spec
from .provenance import provenance
from .registry import ToolRegistry
from .toolset import ToolList, Toolset, lone

Listed = Sequence[tuple[Toolset, Sequence[Tool]]]


def with_tools(config: LoopConfig, listed: Listed) -> LoopConfig:
    """`config` with the toolsets' listed tools registered (after the local ones).

    Raises:
        ConfigurationError: a listed tool's name clashes with a local tool or another
            toolset's (give the toolset a `prefix=`), or the policy names a tool that is
            nowhere.
    """
    owners: dict[str, str] = {name: "a local tool" for name in config.tools}
    owners.update({str(definition["name"]): "a server tool" for definition in config.tools.server})
    extra: list[Tool] = []
    for toolset, tools in listed:
        for tool in tools:
            if tool.name in owners:
                raise ConfigurationError(
                    f"{toolset.label} lists a tool named {tool.name!r}, which is already "
                    f"{owners[tool.name]}: give the server a prefix= to tell them apart"
                )
            owners[tool.name] = f"a tool of {toolset.label}"
            extra.append(tool)
    registry = ToolRegistry([*config.tools.values(), *extra, *config.tools.server])
    spec = config.spec.model_copy(update={"tools": tuple(tool_spec(tool) for tool in registry.values())})
    check_policy(spec.policy, registry)
    metrics = config.metrics
    return dataclasses.replace(
        config,
        spec=spec,
        tools=registry,
        toolsets=(),
        provenance=provenance(spec),
        metrics=None if metrics is None else metrics.with_tools(registry),
        relisted=_relisting(config, listed),
    )


def _versions(listed: Listed) -> tuple[int, ...]:
    return tuple(tools.version if isinstance(tools, ToolList) else 0 for _, tools in listed)


def _relisting(
    base: LoopConfig, listed: Listed
) -> Callable[[LoopConfig], Awaitable[LoopConfig | None]] | None:
    """`LoopConfig.relisted` of the configuration `with_tools(base, listed)` builds."""
    if not any(isinstance(tools, ToolList) for _, tools in listed):
        return None
    seen = _versions(listed)
    refused: list[tuple[int, ...]] = []  # a listing that could not be registered: refused once

    async def relisted(current: LoopConfig) -> LoopConfig | None:
        for _, tools in listed:
            if isinstance(tools, ToolList):
                await tools.relist()
        versions = _versions(listed)
        if versions == seen or versions in refused:
            return None
        try:
            fresh = with_tools(base, listed)
        except ConfigurationError:
            refused.append(versions)
            raise
        # Only what the tools decide changes: a run's own wiring (its store, ...) stays.
        return dataclasses.replace(
            current, spec=fresh.spec, tools=fresh.tools, metrics=fresh.metrics, relisted=fresh.relisted
        )

    return relisted


async def refresh_tools(config: LoopConfig) -> LoopConfig:
    """`config`, or the configuration with the tools its toolsets list now if they listed again
    (a toolset whose tools changed lists them first).

    Raises:
        ConfigurationError: the new listing cannot be registered (a name clash, a tool the
            policy names is gone); the run keeps its tools until a listing that can.
    """
    if config.relisted is None:
        return config
    return await config.relisted(config) or config


def connected(config: LoopConfig) -> AbstractAsyncContextManager[LoopConfig]:
    """Open `config`'s toolsets and yield the run's configuration: `config` itself when it has
    none (a `nullcontext`, not a generator's frame held for the whole run)."""
    return _connected(config) if config.toolsets else contextlib.nullcontext(config)


@contextlib.asynccontextmanager
async def _connected(config: LoopConfig) -> AsyncGenerator[LoopConfig]:
    ready = False
    try:
        async with contextlib.AsyncExitStack() as stack:
            listed = [
                (toolset, await stack.enter_async_context(toolset.open_tools()))
                for toolset in config.toolsets
            ]
            live = with_tools(config, listed)
            ready = True
            yield live
    except BaseExceptionGroup as group:
        # Connections' task groups wrap what failed while starting: raise the error itself.
        error = lone(group)
        if ready or isinstance(error, BaseExceptionGroup) or not isinstance(error, Exception):
            raise
        raise error from None


Entered = tuple[LoopConfig, contextlib.AsyncExitStack]
"""An entered loop's configuration before it was entered, and what closes its connections."""


async def enter(config: LoopConfig, entered: Entered | None) -> tuple[LoopConfig, Entered]:
    """`async with loop:`: the connected configuration every run uses until `leave`.

    Raises:
        RuntimeError: the loop is already entered.
        ConfigurationError: a toolset cannot connect or lists a clashing tool.
    """
    if entered is not None:
        raise RuntimeError("the loop is already entered: `async with loop:` once at a time")
    stack = contextlib.AsyncExitStack()
    try:
        live = await stack.enter_async_context(connected(config))
    except BaseException:
        await stack.aclose()
        raise
    return live, (config, stack)


async def leave(entered: Entered | None) -> LoopConfig | None:
    """Close what `enter` opened; the loop's configuration as it was before (None: not entered)."""
    if entered is None:
        return None
    config, stack = entered
    await stack.aclose()
    return config
