"""The frozen configuration of an `AgentLoop`: validated once, passed down to every run.

`AgentLoop.__init__` builds one `LoopConfig`; the driver and each state's work read it and
never reach back into the loop, so nothing below `loop.py` imports `loop.py`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, cast, final

import anyio

from .._base.cache import CacheSettings, Heads, cache_settings, check_cache
from .._base.model_settings import ModelSettings, check_settings, merged, settings_sha256
from .._base.output import OutputCheck, OutputType
from .._base.price import Price
from ..checkpoint.store import CheckpointStore
from ..compaction import ContextManagement
from ..errors import ConfigurationError
from ..metrics.instruments import BoundMetrics, LoopMetrics
from ..model import Model
from ..otel import TraceSettings, Tracing, is_provider, tracing_for
from ..platforms import FEATURES, Platform, platform_of, vertex_region
from ..policy import Policy, SignalHandler
from ..policy import ToolErrors as ToolErrors
from ..prices import resolve_price, warn_unpriced
from ..records import Observation, Provenance, StopReason
from ..redaction import Redaction, Redactor
from ..settings import LoopSpec, ToolSpec
from ..signals import DEFAULT_HANDLERS
from ..state import Budget
from ..statemachine.machine import LoopMachine
from ..tools import Tool
from .observers import Default, Observers
from .observers import EventHook as EventHook  # the core's modules name it from here
from .provenance import check_client, effective_settings, provenance
from .registry import ToolRegistry
from .toolset import Toolset, declared_specs, split_toolsets

if TYPE_CHECKING:
    from .._base.sdk_tools import SDKTool
    from ..pools.pool import BudgetPool

RedactHook = Callable[[str], str]
_default_metrics: LoopMetrics | None = None


def default_metrics() -> LoopMetrics:
    """The `LoopMetrics` on the process's default registry, shared by every loop."""
    global _default_metrics
    if _default_metrics is None:
        _default_metrics = LoopMetrics()
    return _default_metrics


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Cut:
    """Where a recorded run was cut (a cancel, or its deadline), re-enacted: the call the
    recording never answered (the model call past its responses, a tool call it answered
    `cancelled`) sets `event`, the run's cancel event, and never answers; the run stops `reason`."""

    reason: StopReason
    """`cancelled` or `timeout`: the recorded run's stop."""
    event: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    """The run's cancel event (`drive(..., cancel=cut.event)`)."""

    async def reached(self) -> NoReturn:
        """Cut the run here: set the event and wait for the run's cancel scope to end the call."""
        self.event.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable: the run's cancel scope ends the call")  # pragma: no cover


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LoopConfig:
    """Everything a run reads of its loop; see `AgentLoop` for what each setting means.

    The settings that are data are `spec`'s, validated there and read from it
    (`config.spec.budget`); the fields here are the code-only wiring and what is derived once.
    """

    spec: LoopSpec
    client: Model
    tools: ToolRegistry
    redactor: Redactor
    """The default patterns, `Redaction.patterns` and `Redaction.hook`, compiled once."""
    on_event: EventHook | None
    store: CheckpointStore | None
    metrics: BoundMetrics | None
    price: Price | None
    signal_handlers: Mapping[str, SignalHandler]
    machine: LoopMachine
    """The transition table as a `transitions.Machine`, built once: every run of the loop is its model."""
    provenance: Provenance
    recorded: Mapping[tuple[int, str], Observation] | None
    """Replay only: recorded tool results by (step, tool_use_id), answered instead of running tools."""
    cut: Cut | None = None
    """Replay and exported eval cases only: the recorded run was cut (cancelled, or its deadline
    passed) where the recording ends; the replay is cut there, with the same stop reason."""
    tracing: Tracing | None = None
    """`TraceSettings.provider` and boundloop's tracer on it; None: see `traces_global`."""
    traces_global: bool = False
    """Without a provider of its own: trace each run to the global provider, when one is set."""
    metrics_default: bool = False
    """The loop was built without `Observers.metrics`: its runs count on the default registry, except
    a delegated run, which counts where its parent's loop does (`BoundMetrics.on`)."""
    trace_content: bool = False
    """Spans carry message content (redacted): the model's text, tool inputs and results."""
    output: OutputCheck | None = None
    """Structured output: the check of the final answer against `output_type` (its schema is
    `spec.output_schema`)."""
    toolsets: tuple[Toolset, ...] = ()
    """MCP servers whose tools are registered once connected (`_core.connect`); `tools` and
    `spec.tools` hold them only in a connected configuration, where this is empty."""
    relisted: Callable[[LoopConfig], Awaitable[LoopConfig | None]] | None = None
    """A connected configuration's: `await relisted(config)` is `config` with the toolsets' tools
    as they list them now, or None when none listed them again since (`_core.connect`)."""
    prices: Mapping[str, Price] | None = None
    """The caller's `prices`: a model other than `spec.model` (a fallback, an advisor) is
    priced from them, else from the built-in table (`_core.pricing`)."""
    cache: CacheSettings | None = None
    """The breakpoints each request gets (`_base/cache.py`'s `add_breakpoints`), from `spec.cache` once (one
    object for every request: the run's `MessageMarkers` know it by identity); None: caching off."""
    heads: Heads = dataclasses.field(default_factory=Heads)
    """The breakpoints of the tools and system prompt every request of the loop's runs carries,
    made once and shared by its runs (each run's `MessageMarkers` asks it)."""
    platform: Platform = "anthropic"
    """Where the client runs (`boundloop.platforms.platform_of`): what its requests may hold and
    how its model ids are priced."""
    region: str | None = None
    """A Vertex AI client's region (`boundloop.platforms.vertex_region`): a regional endpoint's
    premium is in its prices."""

    @property
    def automatic_cache(self) -> bool:
        """The platform takes the top-level `cache_control` (else the last block is marked)."""
        return FEATURES[self.platform].automatic_cache

    pools: tuple[BudgetPool, ...] = ()
    """The budget pools each model call reserves from: the loop's, a run's (`sessions.for_run`)
    and a delegated run's tree's (`tree.enter`)."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Wiring:
    """What a loop is given that is not data: the code beside its `LoopSpec`.

    `AgentLoop` builds one from its arguments; `AgentLoop.from_spec(spec, wiring)` builds a loop
    from a spec and a wiring (another loop's `loop.wiring`, its fields replaced).
    """

    client: Model
    tools: Iterable[Tool | Mapping[str, object] | Toolset | SDKTool] = ()
    """The tool functions, the SDK's tool helpers, MCP servers and server tool definitions."""
    output_type: OutputType | None = None
    store: CheckpointStore | None = None
    observers: Observers = dataclasses.field(default_factory=Observers)
    """The loop's metrics, tracing and event hook."""
    redactor: Redactor = dataclasses.field(default_factory=Redactor)
    """The default patterns, `Redaction.patterns` and `Redaction.hook`, compiled once."""
    prices: Mapping[str, Price] | None = None
    pools: Sequence[BudgetPool] = ()
    """The budget pools every run of the loop reserves its model calls from (docs/pools.md)."""


def check_objects(*, budget: object, policy: object, redaction: object, context: object) -> None:
    """In code the budget, the policy, the redaction and the context management are objects (a
    spec also reads JSON).

    Raises:
        ConfigurationError: one is not.
    """
    _require(
        budget is None or isinstance(budget, Budget), f"budget must be a Budget, got {type(budget).__name__}"
    )
    _require(
        policy is None or isinstance(policy, Policy), f"policy must be a Policy, got {type(policy).__name__}"
    )
    _require(isinstance(redaction, Redaction), f"redaction must be a Redaction, got {_kind(redaction)}")
    _require(
        isinstance(context, ContextManagement), f"context must be a ContextManagement, got {_kind(context)}"
    )


def declarations(policy: Policy | None, wiring: Wiring) -> dict[str, Any]:
    """The declarations `wiring` makes for a spec of `policy`: its `tools` (the escalation tool
    the policy names included), `server_tools`, `mcp_servers` and `output_schema`.

    Raises:
        ConfigurationError: a tool is not one, two share a name, the output type has no schema.
    """
    return _declare(policy or Policy(), wiring, (), None)[3]


def _declare(
    policy: Policy, wiring: Wiring, server_tools: Sequence[Mapping[str, Any]], schema: dict[str, Any] | None
) -> tuple[ToolRegistry, tuple[Toolset, ...], OutputCheck | None, dict[str, Any]]:
    tools = wiring.tools
    _require(not isinstance(cast(object, tools), Tool), "tools takes a list of tools: tools=[my_tool]")
    plain, toolsets = split_toolsets(tools)
    given = {str(definition["name"]) for definition in ToolRegistry(plain).server}
    registry = ToolRegistry([*plain, *(dict(item) for item in server_tools if item["name"] not in given)])
    output_type = schema if wiring.output_type is None else wiring.output_type
    output = None if output_type is None else OutputCheck(output_type)
    escalation = policy.escalation_tool
    if escalation is not None and escalation not in registry:
        registry = ToolRegistry([*registry.values(), escalation_tool(escalation), *registry.server])
    declared = {
        "tools": [tool_spec(tool) for tool in registry.values()],
        "server_tools": registry.server,
        "mcp_servers": declared_specs(toolsets),
        "output_schema": None if output is None else output.schema,
    }
    return registry, toolsets, output, declared


def _kind(value: object) -> str:
    return type(value).__name__


def build_config(spec: LoopSpec, wiring: Wiring) -> LoopConfig:
    """Check the wiring and build the configuration of `spec` run with it.

    The spec's tool declarations are those of `wiring.tools` (with the escalation tool the policy
    names), its server tools and those in `wiring.tools`; `wiring.output_type`, when given, sets
    `output_schema`; `metrics` is off when either turns it off. Every other setting is the
    spec's, as it is.

    Raises:
        ConfigurationError: the first setting the loop cannot run with, named.
    """
    observers = wiring.observers
    _require(
        isinstance(cast(object, observers), Observers),
        f"observers must be an Observers, got {type(observers).__name__}",
    )
    client, metrics, tracing = wiring.client, observers.metrics, observers.tracing
    create = getattr(getattr(client, "messages", None), "create", None)
    _require(
        callable(create),
        f"client {client!r} has no messages.create: pass anthropic.AsyncAnthropic() or ScriptedClient",
    )
    if not spec.metrics:  # a spec with metrics turned off (a contract's `metrics.enabled: false`)
        metrics = None
    registry, toolsets, output, declared = _declare(
        spec.policy, wiring, spec.server_tools, spec.output_schema
    )
    spec = LoopSpec.of(**{**dict(spec), **declared, "metrics": metrics is not None})
    platform = platform_of(client)
    check_client(client, effective_settings(spec, spec.settings.data()), platform)
    _require(
        isinstance(cast(object, metrics), Default | LoopMetrics | None),
        f"metrics must be a LoopMetrics or None, got {type(metrics).__name__}",
    )
    _require(
        observers.on_event is None or callable(observers.on_event),
        f"on_event must be a callable taking an Event, got {observers.on_event!r}",
    )
    _require(
        not spec.budget.count_tokens
        or callable(getattr(getattr(client, "messages", None), "count_tokens", None)),
        "Budget.count_tokens=True needs a client with messages.count_tokens (AsyncAnthropic), "
        f"not {client!r}",
    )
    _require(
        not spec.budget.count_tokens or FEATURES[platform].count_tokens,
        f"Budget.count_tokens=True: {FEATURES[platform].title} ({platform}) has no token counting "
        "(messages.count_tokens); leave count_tokens off there (docs/platforms.md)",
    )
    _require(
        tracing is None or isinstance(cast(object, tracing), TraceSettings),
        f"tracing must be a TraceSettings or None, got {tracing!r}",
    )
    provider = None if tracing is None else tracing.provider
    _require(
        provider is None or is_provider(provider),
        f"TraceSettings.provider must be an OpenTelemetry TracerProvider or None, got {provider!r}",
    )
    content = tracing is not None and tracing.content
    _require(
        isinstance(cast(object, content), bool),
        f"TraceSettings.content must be True or False, got {content!r}",
    )
    check_policy(spec.policy, registry, listed_later=bool(toolsets))
    prices = wiring.prices
    region = vertex_region(client)
    price = resolve_price(spec.model, prices, platform, region)
    unpriced = [spec.model] if price is None else []
    unpriced += [
        name for name in other_models(spec, registry) if resolve_price(name, prices, platform, region) is None
    ]
    pools: tuple[BudgetPool, ...] = ()
    if wiring.pools:  # a loop without pools does not load them
        from ..pools.pool import joined_pools

        pools = joined_pools((), wiring.pools)
    costed = spec.budget.max_cost_usd is not None or any(pool.max_cost_usd is not None for pool in pools)
    if costed and unpriced:  # the loop's model, a fallback, an advisor
        name = unpriced[0]
        raise ConfigurationError(
            f"max_cost_usd needs a price for model {name!r}: pass prices={{{name!r}: Price(...)}}"
        )
    chosen_metrics = default_metrics() if isinstance(metrics, Default) else metrics
    config = LoopConfig(
        spec=spec,
        client=client,
        tools=registry,
        redactor=wiring.redactor,
        on_event=observers.on_event,
        store=wiring.store,
        metrics=None
        if chosen_metrics is None
        else chosen_metrics.bind(spec.name, registry, spec.version or "", platform),
        price=price,
        signal_handlers=_handlers(spec.policy.signal_handlers),
        machine=LoopMachine(),
        provenance=provenance(spec, platform),
        recorded=None,
        tracing=None if provider is None else tracing_for(provider),
        traces_global=tracing is not None and provider is None,
        metrics_default=isinstance(metrics, Default),
        trace_content=content,
        output=output,
        toolsets=toolsets,
        prices=prices,
        cache=cache_settings(spec.cache),
        platform=platform,
        region=region,
        pools=pools,
    )
    for name in unpriced:  # last: a loop that fails to build does not warn
        warn_unpriced(name)
    return config


def other_models(spec: LoopSpec, tools: ToolRegistry) -> list[str]:
    """The models a loop's calls may run on besides its own: the fallback route and the advisor
    tools' models (each billed at its own price, `_core.pricing`)."""
    named = [*(spec.fallback_model or ())]
    for definition in tools.server:
        advisor = definition.get("model")
        if str(definition.get("type", "")).startswith("advisor_") and isinstance(advisor, str):
            named.append(advisor)
    return [name for name in dict.fromkeys(named) if name != spec.model]


def with_store(config: LoopConfig, store: CheckpointStore | None) -> LoopConfig:
    """The configuration checkpointing to `store` (signed with the loop's key, when it has one)."""
    from ..checkpoint.signed import resigned  # signing loads with the store that swaps (replay, DBOS)

    return dataclasses.replace(config, store=resigned(store, config.store))


def escalation_tool(name: str) -> Tool:
    """The tool the model calls to ask a human; validation answers it, its handler never runs."""

    def never_called(reason: str) -> str:
        raise AssertionError("the escalation tool is answered by a human, never run")

    return Tool(
        name=name,
        description=(
            "Ask a human for help when you cannot go on safely: missing authority, conflicting "
            "evidence, or a decision that is not yours. The run pauses until a human replies."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "reason": {"type": "string", "description": "What you need from the human, and why."}
            },
            "required": ["reason"],
        },
        handler=never_called,
    )


def run_settings(config: LoopConfig, override: ModelSettings | None) -> tuple[dict[str, Any], Provenance]:
    """A run's settings as JSON (the loop's, the fields `override` was given in their place)
    and the run's provenance, which hashes them.

    Raises:
        ConfigurationError: `override` is not a `ModelSettings`, or the merged settings break a
            rule of the API or need a beta client the loop does not have.
    """
    spec = config.spec
    if override is None:
        return effective_settings(spec, spec.settings.data()), config.provenance
    _require(
        isinstance(cast(object, override), ModelSettings),
        f"settings must be a ModelSettings, got {type(override).__name__}",
    )
    data = merged(spec.settings, override).data()
    check_settings(data, max_tokens=spec.max_tokens, tools=config.tools)
    check_cache(spec.cache, data)
    data = effective_settings(spec, data)
    check_client(config.client, data, config.platform)
    return data, dataclasses.replace(config.provenance, settings_sha256=settings_sha256(data))


def tool_spec(tool: Tool) -> ToolSpec:
    """A tool's declaration."""
    return ToolSpec(
        name=tool.name,
        description=tool.description,
        input_schema=dict(tool.input_schema),
        output_schema=None if tool.output_schema is None else dict(tool.output_schema),
        side_effect=tool.side_effect,
        requires_approval=tool.requires_approval,
        timeout_s=tool.timeout_s,
    )


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigurationError(message)


def check_policy(policy: Policy, tools: ToolRegistry, *, listed_later: bool = False) -> None:
    """The policy names registered tools (`listed_later`: toolsets' names are checked once
    listed) and forbids no server tool."""
    server = {str(definition["name"]) for definition in tools.server}
    for field in ("allowed", "requires_approval", "required_evidence"):
        names: frozenset[str] = getattr(policy, field) or frozenset()
        if field != "allowed" and names & server:
            raise ConfigurationError(
                f"Policy.{field} names server tools {sorted(names & server)}: the API runs their "
                "calls, so no approval or evidence can apply to them"
            )
        unknown = sorted(names - set(tools) - server)
        if unknown and not listed_later:
            raise ConfigurationError(
                f"Policy.{field} names tools with no handler: {unknown}; register them in tools=[...]"
            )
    # The API runs a server tool's calls: the policy decides whether it is offered at all.
    refused = server & policy.forbidden
    if policy.allowed is not None:
        refused |= server - policy.allowed
    if refused:
        raise ConfigurationError(
            f"server tools {sorted(refused)} are forbidden by the policy (Policy.forbidden, or left "
            "out of Policy.allowed): the API runs their calls, the policy cannot deny one; remove "
            "them from tools=[...]"
        )


def _handlers(overrides: Mapping[str, SignalHandler | None]) -> dict[str, SignalHandler]:
    """The built-in handlers with `Policy.signal_handlers` over them (None removes one)."""
    handlers = dict(DEFAULT_HANDLERS)
    for stop_reason, handler in overrides.items():
        if handler is None:
            handlers.pop(stop_reason, None)  # no handler: this stop_reason raises UnhandledStop
        else:
            handlers[stop_reason] = handler
    return handlers
