"""AgentLoop: the public entry point; builds the configuration once and runs the driver."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from typing import final

import anyio

from ._config import DEFAULT, Default, EventHook, LoopConfig, Redactor, ToolErrors, build_config
from .checkpoint.store import CheckpointStore
from .errors import ConfigurationError
from .handlers.registry import ToolRegistry
from .handlers.stops import SignalHandler
from .handlers.tools import Tool
from .metrics.instruments import BoundMetrics, LoopMetrics
from .model import Model
from .policy import Policy
from .prices import Price
from .state import Budget, LoopResult, LoopState
from .statemachine._driver import execute


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
        on_tool_error: ToolErrors = "report",
        max_tool_output_chars: int = 100_000,
        redact: Redactor | None = None,
        metrics: LoopMetrics | Default | None = DEFAULT,
        prices: Mapping[str, Price] | None = None,
        signal_handlers: Mapping[str, SignalHandler] | None = None,
        on_event: EventHook | None = None,
        store: CheckpointStore | None = None,
    ) -> None:
        self._config: LoopConfig = build_config(
            client,
            model=model,
            tools=tools,
            budget=budget,
            policy=policy,
            system=system,
            max_tokens=max_tokens,
            name=name,
            on_tool_error=on_tool_error,
            max_tool_output_chars=max_tool_output_chars,
            redact=redact,
            metrics=metrics,
            prices=prices,
            signal_handlers=signal_handlers,
            on_event=on_event,
            store=store,
        )

    @property
    def config(self) -> LoopConfig:
        """The loop's frozen configuration, as every run reads it."""
        return self._config

    @property
    def client(self) -> Model:
        """The model client."""
        return self._config.client

    @property
    def model(self) -> str:
        """The model name sent with every request."""
        return self._config.model

    @property
    def name(self) -> str:
        """The `loop` label on every metric."""
        return self._config.name

    @property
    def tools(self) -> ToolRegistry:
        """The registered tools, by name."""
        return self._config.tools

    @property
    def budget(self) -> Budget:
        """The run's hard limits."""
        return self._config.budget

    @property
    def policy(self) -> Policy:
        """What may run, what needs approval, what counts as done."""
        return self._config.policy

    @property
    def system(self) -> str | None:
        """The system prompt."""
        return self._config.system

    @property
    def store(self) -> CheckpointStore | None:
        """Where states are checkpointed, if anywhere."""
        return self._config.store

    @property
    def metrics(self) -> BoundMetrics | None:
        """The loop's metrics, bound to its `loop` label; None when off."""
        return self._config.metrics

    def __repr__(self) -> str:
        return f"AgentLoop(name={self.name!r}, model={self.model!r}, tools={list(self.tools)})"

    async def run(
        self,
        goal: str,
        *,
        cancel: anyio.Event | None = None,
        task_id: str | None = None,
        on_event: EventHook | None = None,
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
            ConfigurationError: `goal` is empty.
            UnhandledStop: the API returned a stop_reason with no handler (`.result` holds
                the partial result).
            Exception: a tool's exception, with `on_tool_error="raise"`; an exception raised
                by your own callbacks (`Policy.approve`, `Policy.success`, `on_event`, a
                signal handler, the store) propagates as itself, with the run recorded as
                failed first.
            ScriptExhausted: a `ScriptedClient` ran out of responses.
        """
        if not isinstance(goal, str) or not goal.strip():  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ConfigurationError("goal must be a non-empty string")
        state = LoopState(
            task_id=task_id or uuid.uuid4().hex,
            trace_id=uuid.uuid4().hex,
            goal=goal,
            started_at=time.time(),
            provenance=self._config.provenance,
            messages=[{"role": "user", "content": goal}],
        )
        return await execute(self._config, state, cancel=cancel, on_event=on_event)

    async def _continue(
        self, state: LoopState, *, cancel: anyio.Event | None = None, on_event: EventHook | None = None
    ) -> LoopResult:
        """Continue a run from a state read back from a checkpoint, in the phase it was saved."""
        return await execute(self._config, state, cancel=cancel, on_event=on_event)
