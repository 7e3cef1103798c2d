"""A case run through the application's own loop (`boundloop eval --loop module:factory`).

The loop a case runs on is the application's: its model, system prompt, tools, policy (hooks
included), budget, signal handlers, model settings, structured output, version and
redaction. Only two things are the fixture's: the model, for a case with model turns (the
script replaces the client; a live case keeps the application's client, or the one given),
and the tools the fixture mocks, whose handlers are replaced by the mocked results. A tool
of the application that the fixture does not mock runs as the application wrote it. The
fixture's own policy, budget and tool declarations are not used: the case tests the
application's.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .._base.price import Price
from ..checkpoint.store import MemoryStore
from ..loop import AgentLoop
from ..model import Model
from ..tools import Tool
from ._fixture import Case
from ._mocks import Mocks


def app_loop(
    app: AgentLoop[Any], case: Case, mocks: Mocks, client: Model, model: str | None
) -> AgentLoop[Any]:
    """A fresh loop like `app`, on `client`, its mocked tools answered by `mocks`.

    Args:
        app: the application's loop.
        case: the case (its `mocked` names the tools to replace).
        mocks: the mocked results.
        client: the model: the case's script, a live client, or `app.client`.
        model: the model's name (default: the application's).

    Raises:
        ConfigurationError: the loop cannot be built (as `AgentLoop` raises it).
    """
    spec = app.spec if model is None else app.spec.model_copy(update={"model": model})
    tools: list[Tool] = [
        _mocked(tool, mocks) if name in case.mocked else tool for name, tool in app.tools.items()
    ]
    wiring = dataclasses.replace(
        app.wiring,
        client=client,
        tools=tools,  # its server tools are the spec's
        # its prices (a model priced by the application, not in boundloop's table, keeps its
        # cost: its own, its fallbacks' and advisors')
        prices=_prices(app),
        observers=dataclasses.replace(app.wiring.observers, metrics=None, tracing=None),
        store=MemoryStore(),
    )
    return AgentLoop.from_spec(spec, wiring)


def _prices(app: AgentLoop[Any]) -> dict[str, Price] | None:
    """The prices the application's loop was given, its own model's as it prices it."""
    config = app.config
    prices = dict(config.prices or {})
    if config.price is not None:
        prices[config.spec.model] = config.price
    return prices or None


def _mocked(tool: Tool, mocks: Mocks) -> Tool:
    """The application's tool, declared as it is, its handler the fixture's mocked results."""
    return Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        handler=mocks.handler(tool.name),
        side_effect=tool.side_effect,
        timeout_s=tool.timeout_s,
        requires_approval=tool.requires_approval,
        output_schema=tool.output_schema,
    )
