"""The frozen configuration of an `AgentLoop`: validated once, passed down to every run.

`AgentLoop.__init__` builds one `LoopConfig`; the driver and each state's work read it and
never reach back into the loop, so nothing below `loop.py` imports `loop.py`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, cast, final

from .._cache import CacheMode, CacheSettings, check_cache
from .._model_settings import ModelSettings, check_settings, merged, settings_sha256
from .._output import OutputCheck, OutputType
from .._price import Price
from ..checkpoint.signed import checkpoint_key as checkpoint_key_of
from ..checkpoint.signed import signed
from ..checkpoint.store import CheckpointStore
from ..compaction import Compaction, ContextEdit
from ..errors import ConfigurationError
from ..events import Event
from ..metrics.instruments import BoundMetrics, LoopMetrics
from ..model import Model
from ..otel import Tracing, is_provider, tracing_for
from ..policy import Policy
from ..prices import resolve_price, warn_unpriced
from ..records import Observation, Provenance
from ..redaction import Redactor
from ..settings import LoopSpec, ToolSpec
from ..settings import ToolErrors as ToolErrors
from ..signals import DEFAULT_HANDLERS, SignalHandler
from ..state import Budget
from ..statemachine.machine import LoopMachine
from ..tools import Tool
from .provenance import check_client, effective_settings, provenance
from .registry import ToolRegistry
from .toolset import Toolset, declared_specs, split_toolsets

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from .._sdk_tools import SDKTool

RedactHook = Callable[[str], str]
EventHook = Callable[[Event], None]


class Default:
    """Marker for 'not passed', where None has a meaning of its own."""

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Final = Default()
_default_metrics: LoopMetrics | None = None


def default_metrics() -> LoopMetrics:
    """The `LoopMetrics` on the process's default registry, shared by every loop."""
    global _default_metrics
    if _default_metrics is None:
        _default_metrics = LoopMetrics()
    return _default_metrics


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
    redact: RedactHook | None
    redactor: Redactor
    """The default patterns, `redact_patterns` and the `redact` hook, compiled once."""
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
    tracing: Tracing | None = None
    """The `tracer_provider` given and boundloop's tracer on it; None: see `traces_global`."""
    traces_global: bool = False
    """Without a provider of its own: trace each run to the global provider, when one is set."""
    trace_content: bool = False
    """Spans carry message content (redacted): the model's text, tool inputs and results."""
    checkpoint_key: bytes | None = dataclasses.field(default=None, repr=False)
    """Checkpoints are signed with it and verified on load (`store` is then a `SignedStore`)."""
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


def build_config(
    client: Model,
    *,
    model: str,
    tools: Iterable[Tool | Mapping[str, object] | Toolset | SDKTool],
    budget: Budget | None,
    policy: Policy | None,
    system: str | None,
    max_tokens: int,
    name: str,
    on_tool_error: ToolErrors,
    max_tool_output_chars: int,
    redact: RedactHook | None,
    metrics: LoopMetrics | Default | None,
    prices: Mapping[str, Price] | None,
    signal_handlers: Mapping[str, SignalHandler | None] | None,
    on_event: EventHook | None,
    store: CheckpointStore | None,
    redact_patterns: Iterable[str | re.Pattern[str]] = (),
    redact_checkpoints: bool = False,
    count_tokens: bool = False,
    fallback_model: str | Sequence[str] | None = None,
    version: str | None = None,
    tracer_provider: TracerProvider | Default | None = None,
    trace_content: bool = False,
    checkpoint_key: bytes | str | None = None,
    settings: ModelSettings | None = None,
    output_type: OutputType | None = None,
    compaction: Compaction | None = None,
    context_editing: Sequence[ContextEdit] = (),
    cache: CacheMode | CacheSettings = "auto",
) -> LoopConfig:
    """Validate the settings once (`LoopSpec.of`), check the wiring, build the configuration.

    Raises:
        ConfigurationError: the first setting the loop cannot run with, named.
    """
    create = getattr(getattr(client, "messages", None), "create", None)
    _require(
        callable(create),
        f"client {client!r} has no messages.create: pass anthropic.AsyncAnthropic() or ScriptedClient",
    )
    # In code the budget and the policy are objects (the spec reads a contract's JSON objects).
    _require(
        budget is None or isinstance(cast(object, budget), Budget),
        f"budget must be a Budget, got {type(budget).__name__}",
    )
    _require(
        policy is None or isinstance(cast(object, policy), Policy),
        f"policy must be a Policy, got {type(policy).__name__}",
    )
    _require(not isinstance(cast(object, tools), Tool), "tools takes a list of tools: tools=[my_tool]")
    plain, toolsets = split_toolsets(tools)
    registry = ToolRegistry(plain)
    output = None if output_type is None else OutputCheck(output_type)
    escalation = None if policy is None else policy.escalation_tool
    if escalation is not None and escalation not in registry:
        registry = ToolRegistry([*registry.values(), escalation_tool(escalation), *registry.server])
    spec = LoopSpec.of(
        name=name,
        model=model,
        system=system,
        max_tokens=max_tokens,
        tools=[tool_spec(tool) for tool in registry.values()],
        server_tools=registry.server,
        mcp_servers=declared_specs(toolsets),
        budget=budget,
        policy=policy,
        on_tool_error=on_tool_error,
        metrics=metrics is not None,
        max_tool_output_chars=max_tool_output_chars,
        redact_checkpoints=redact_checkpoints,
        count_tokens=count_tokens,
        settings=ModelSettings() if settings is None else settings,
        output_schema=None if output is None else output.schema,
        fallback_model=fallback_model,
        version=version,
        compaction=compaction,
        context_editing=context_editing,
        cache=cache,
    )
    check_client(client, effective_settings(spec, spec.settings.data()))
    _require(
        isinstance(cast(object, metrics), Default | LoopMetrics | None),
        f"metrics must be a LoopMetrics or None, got {type(metrics).__name__}",
    )
    _require(
        redact is None or callable(redact),
        f"redact must be a callable taking and returning a str, got {redact!r}",
    )
    _require(
        on_event is None or callable(on_event),
        f"on_event must be a callable taking an Event, got {on_event!r}",
    )
    _require(
        not spec.count_tokens or callable(getattr(getattr(client, "messages", None), "count_tokens", None)),
        f"count_tokens=True needs a client with messages.count_tokens (AsyncAnthropic), not {client!r}",
    )
    _require(
        tracer_provider is None or isinstance(tracer_provider, Default) or is_provider(tracer_provider),
        f"tracer_provider must be an OpenTelemetry TracerProvider or None, got {tracer_provider!r}",
    )
    _require(
        isinstance(cast(object, trace_content), bool),
        f"trace_content must be True or False, got {trace_content!r}",
    )
    key = checkpoint_key_of(checkpoint_key)
    check_policy(spec.policy, registry, listed_later=bool(toolsets))
    price = resolve_price(spec.model, prices)
    unpriced = [model] if price is None else []
    unpriced += [name for name in other_models(spec, registry) if resolve_price(name, prices) is None]
    if spec.budget.max_cost_usd is not None and unpriced:  # the loop's model, a fallback, an advisor
        name = unpriced[0]
        raise ConfigurationError(
            f"max_cost_usd needs a price for model {name!r}: pass prices={{{name!r}: Price(...)}}"
        )
    chosen_metrics = default_metrics() if isinstance(metrics, Default) else metrics
    config = LoopConfig(
        spec=spec,
        client=client,
        tools=registry,
        redact=redact,
        redactor=Redactor(redact_patterns, redact),
        on_event=on_event,
        store=signed(store, key),
        metrics=None
        if chosen_metrics is None
        else chosen_metrics.bind(spec.name, registry, spec.version or ""),
        price=price,
        signal_handlers=_handlers(signal_handlers),
        machine=LoopMachine(),
        provenance=provenance(spec),
        recorded=None,
        tracing=None
        if tracer_provider is None or isinstance(tracer_provider, Default)
        else tracing_for(tracer_provider),
        traces_global=isinstance(tracer_provider, Default),
        trace_content=trace_content,
        checkpoint_key=key,
        output=output,
        toolsets=toolsets,
        prices=prices,
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
    return dataclasses.replace(config, store=signed(store, config.checkpoint_key))


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
    check_client(config.client, data)
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


def _handlers(overrides: Mapping[str, SignalHandler | None] | None) -> dict[str, SignalHandler]:
    handlers = dict(DEFAULT_HANDLERS)
    for stop_reason, handler in (overrides or {}).items():
        if handler is None and isinstance(cast(object, stop_reason), str):
            handlers.pop(stop_reason, None)  # no handler: this stop_reason raises UnhandledStop
            continue
        if not isinstance(cast(object, stop_reason), str) or not callable(handler):
            raise ConfigurationError(
                f"signal_handlers maps a stop_reason str to a handler, got {stop_reason!r}: {handler!r}"
            )
        handlers[stop_reason] = handler
    return handlers
