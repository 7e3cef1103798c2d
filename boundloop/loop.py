"""AgentLoop: wires the model, the machine, the handlers, the metrics and the budget."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Final, Literal, cast, final

import anyio

from ._run import Run
from .checkpoint.store import CheckpointStore
from .errors import ConfigurationError
from .handlers.registry import ToolRegistry
from .handlers.stops import DEFAULT_HANDLERS, SignalHandler
from .handlers.tools import Tool
from .metrics.instruments import BoundMetrics, LoopMetrics
from .model import Model
from .policy import Policy
from .prices import PRICES, Price, price_for
from .state import Budget, LoopResult
from .statemachine.driver import Engine, StateMachine
from .trace import TraceEvent

Redactor = Callable[[str], str]


class _Default:
    """Marker for 'not passed', where None has a meaning of its own."""

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Final = _Default()
_default_metrics: LoopMetrics | None = None


def default_metrics() -> LoopMetrics:
    """The `LoopMetrics` on the process's default registry, shared by every loop."""
    global _default_metrics
    if _default_metrics is None:
        _default_metrics = LoopMetrics()
    return _default_metrics


@final
class AgentLoop:
    """A bounded agent loop: the model proposes, the loop validates, acts and decides.

    Args:
        client: anything with `async messages.create(**request) -> Message`:
            `anthropic.AsyncAnthropic` or `ScriptedClient`.
        model: the model name sent with every request.
        tools: the tools the model may call (`@tool` functions or `Tool` objects).
        budget: the run's hard limits; required.
        policy: what may run, what needs approval, what counts as done.
        system: the system prompt.
        max_tokens: `max_tokens` of every request.
        name: the `loop` label on every metric.
        on_tool_error: `"report"` a failing handler to the model as an `is_error` result,
            or `"raise"` its exception from `run()`.
        max_tool_output_chars: longer tool results are truncated with a visible marker.
        redact: a hook applied to text written to the trace, `state.errors` and stop details
            (API keys are always removed there). The transcript, observations and pending
            approvals are what the model saw and are kept verbatim, also in checkpoints.
        metrics: a `LoopMetrics`; default: shared instruments on the default registry;
            None: no metrics.
        prices: per-model prices merged over the built-in table (for `max_cost_usd`).
        signal_handlers: overrides of the stop_reason handlers, by API stop_reason.
        on_event: called synchronously with every `TraceEvent` as it is recorded (for live
            views and logging); it must not block.
        store: where the state is checkpointed after every step and at the stop
            (`boundloop.checkpoint.MemoryStore`, `SQLiteStore`); None: not saved.
        engine: how the machine fires: `"compiled"` (its transitions, indexed once) or
            `"transitions"` (`Event.trigger` every time); same table, same guards.

    Raises:
        ConfigurationError: no budget, a bad tool, a duplicate tool name, a policy naming a
            tool that is not registered, a cost budget for a model without a price.
    """

    def __init__(
        self,
        client: Model,
        *,
        model: str,
        tools: Iterable[Tool] = (),
        budget: Budget | None = None,
        policy: Policy | None = None,
        system: str | None = None,
        max_tokens: int = 4096,
        name: str = "agent",
        on_tool_error: Literal["report", "raise"] = "report",
        max_tool_output_chars: int = 100_000,
        redact: Redactor | None = None,
        metrics: LoopMetrics | _Default | None = DEFAULT,
        prices: Mapping[str, Price] | None = None,
        signal_handlers: Mapping[str, SignalHandler] | None = None,
        on_event: Callable[[TraceEvent], None] | None = None,
        engine: Engine = "compiled",
        store: CheckpointStore | None = None,
    ) -> None:
        create = getattr(getattr(client, "messages", None), "create", None)
        _require(
            callable(create),
            f"client {client!r} has no messages.create: pass anthropic.AsyncAnthropic() or ScriptedClient",
        )
        _require(
            isinstance(model, str) and bool(model),
            "model must be a non-empty model name, e.g. 'claude-sonnet-4-6'",
        )
        _require(
            budget is not None,
            "a Budget is required: there is no unbounded loop (e.g. budget=Budget(max_steps=8))",
        )
        _require(isinstance(budget, Budget), f"budget must be a Budget, got {type(budget).__name__}")
        _require(not isinstance(cast(object, tools), Tool), "tools takes a list of tools: tools=[my_tool]")
        _require(
            isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens >= 1,
            f"max_tokens must be a positive int, got {max_tokens!r}",
        )
        _require(
            policy is None or isinstance(cast(object, policy), Policy),
            f"policy must be a Policy, got {type(policy).__name__}",
        )
        _require(
            isinstance(metrics, _Default | LoopMetrics | None),
            f"metrics must be a LoopMetrics or None, got {type(metrics).__name__}",
        )
        _require(
            redact is None or callable(redact),
            f"redact must be a callable taking and returning a str, got {redact!r}",
        )
        _require(
            on_event is None or callable(on_event),
            f"on_event must be a callable taking a TraceEvent, got {on_event!r}",
        )
        _require(
            on_tool_error in ("report", "raise"),
            f"on_tool_error must be 'report' or 'raise', got {on_tool_error!r}",
        )
        _require(
            isinstance(max_tool_output_chars, int) and max_tool_output_chars >= 1,
            "max_tool_output_chars must be a positive int",
        )
        _require(
            engine in ("compiled", "transitions"),
            f"engine must be 'compiled' or 'transitions', got {engine!r}",
        )
        assert budget is not None  # checked above, for the type checker
        self.client = client
        self.model = model
        self.tools = ToolRegistry(tools)
        self.budget = budget
        self.policy = Policy() if policy is None else policy
        self.system = system
        self.max_tokens = max_tokens
        self.name = name
        self.on_tool_error = on_tool_error
        self.max_tool_output_chars = max_tool_output_chars
        self.redact = redact
        self.on_event = on_event
        self.store = store
        self.prices: Mapping[str, Price] = {**PRICES, **(prices or {})}
        self.price = price_for(model, self.prices)
        self.signal_handlers = _handlers(signal_handlers)
        self._check_policy()
        if budget.max_cost_usd is not None and self.price is None:
            raise ConfigurationError(
                f"max_cost_usd needs a price for model {model!r}: pass prices={{{model!r}: Price(...)}}"
            )
        chosen = default_metrics() if isinstance(metrics, _Default) else metrics
        self.metrics: BoundMetrics | None = None if chosen is None else chosen.bind(name, self.tools)
        self.machine = StateMachine(engine)

    def _check_policy(self) -> None:
        policy = self.policy
        for field in ("allowed", "requires_approval", "required_evidence"):
            names: frozenset[str] | None = getattr(policy, field)
            unknown = sorted((names or frozenset()) - set(self.tools))
            if unknown:
                raise ConfigurationError(
                    f"Policy.{field} names tools with no handler: {unknown}; register them in tools=[...]"
                )

    def __repr__(self) -> str:
        return f"AgentLoop(name={self.name!r}, model={self.model!r}, tools={list(self.tools)})"

    async def run(
        self,
        goal: str,
        *,
        cancel: anyio.Event | None = None,
        task_id: str | None = None,
        on_event: Callable[[TraceEvent], None] | None = None,
    ) -> LoopResult:
        """Run the loop on `goal` until it stops, and return the typed outcome.

        Args:
            goal: the first user message.
            cancel: setting this event stops the run cooperatively with `cancelled`.
            task_id: the run's id (default: a new uuid); part of every idempotency key.
            on_event: called with every `TraceEvent` of this run as it is recorded, after the
                loop's own `on_event`.

        Returns:
            The result: stop reason, answer, state, trace and transcript.

        Raises:
            UnhandledStop: the API returned a stop_reason with no handler (`.result` holds
                the partial result).
            Exception: a tool's exception, with `on_tool_error="raise"`; an exception raised
                by your own callbacks (`Policy.approve`, `Policy.success`, `on_event`, a
                signal handler, the store) propagates as itself, with the run recorded as
                failed first.
            ScriptExhausted: a `ScriptedClient` ran out of responses.
        """
        if not isinstance(goal, str) or not goal.strip():
            raise ConfigurationError("goal must be a non-empty string")
        run = Run(self, goal, task_id=task_id, on_event=on_event)
        self.machine.add(run)
        metrics = self.metrics
        if metrics is not None:
            metrics.run_started()
        try:
            await run.execute(cancel)
        finally:
            self.machine.remove(run)
        return run.result()


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigurationError(message)


def _handlers(overrides: Mapping[str, SignalHandler] | None) -> dict[str, SignalHandler]:
    handlers = dict(DEFAULT_HANDLERS)
    for stop_reason, handler in (overrides or {}).items():
        if not isinstance(stop_reason, str) or not callable(handler):
            raise ConfigurationError(
                f"signal_handlers maps a stop_reason str to a handler, got {stop_reason!r}: {handler!r}"
            )
        handlers[stop_reason] = handler
    return handlers
