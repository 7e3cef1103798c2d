"""One run of an `AgentLoop`: the `transitions` model, and the work of each state.

The driver (`Run.drive`) awaits the work of the current state — the model call in
`propose`, the tool task group in `act` — stores its outcome as `verdict`, then fires the
state's trigger; the table's guards read the verdict. Nothing here awaits inside a
`transitions` callback, so anyio cancellation and timeouts propagate untouched.
"""

from __future__ import annotations

import json
import re
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final, cast

import anthropic
import anyio
import pydantic
from anthropic.types import Message, ToolUseBlock

from .errors import BUDGET_LIMITS, UnhandledStop
from .handlers.dispatch import (
    FAILED_OUTCOMES,
    CallResult,
    DispatchConfig,
    Outcome,
    Planned,
    dispatch,
    refused,
)
from .handlers.stops import Route, SignalContext, answer_text
from .handlers.tools import idempotency_key
from .handlers.validation import BatchValidator, canonical
from .policy import ToolCall
from .state import JSON, LoopResult, LoopState, StopReason
from .statemachine.guards import Verdict
from .statemachine.table import Phase, Trigger
from .trace import TraceEvent, TraceKind
from .transcript import append_user

if TYPE_CHECKING:
    from .loop import AgentLoop

API_KEY: Final = re.compile(r"sk-ant-[A-Za-z0-9_\-]{8,}")
"""Anthropic API keys: never written to the trace, the errors or the logs."""

CHECKPOINT_TIMEOUT_S: Final = 10.0
"""How long the shielded final checkpoint may take."""


class Run:
    """The state of one run while it executes; added to the loop's machine as a model."""

    phase: str  # maintained by transitions (model_attribute="phase")

    def __init__(
        self,
        loop: AgentLoop,
        goal: str,
        *,
        task_id: str | None,
        on_event: Callable[[TraceEvent], None] | None = None,
    ) -> None:
        self.loop = loop
        self.hooks = tuple(hook for hook in (loop.on_event, on_event) if hook is not None)
        """Called with every trace event as it is recorded: the loop's hook, then the run's."""
        self.verdict = Verdict.CONTINUE
        self.state = LoopState(
            task_id=task_id or uuid.uuid4().hex,
            trace_id=uuid.uuid4().hex,
            goal=goal,
            started_at=time.time(),
            messages=[{"role": "user", "content": goal}],
        )
        self.trace: list[TraceEvent] = []
        self.started = time.perf_counter()
        self.entered = self.started
        self.deadline: float | None = None
        self.request: dict[str, Any] = {}
        self.response: Message | None = None
        self.calls: list[ToolCall] = []
        """The tool_use blocks of the latest response."""
        self.keys: list[str] = []
        """`canonical(name, input)` of each call, for repeat detection."""
        self.slots: list[CallResult | None] = []
        """Answers to `calls`, by block index: decided in validate, filled in act."""
        self.planned: list[Planned] = []
        self.invoked: set[int] = set()
        """Indexes of `calls` whose handler was invoked (its effect may have happened)."""
        self.open_calls = False
        """The last assistant message has tool_use blocks not yet answered."""
        self.validator = BatchValidator(
            policy=loop.policy, tools=loop.tools, budget=loop.budget, state=self.state, redact=self.redact
        )
        self.cancel_requested = False
        self.earlier_text = ""
        """Text of the current assistant turn before a pause_turn / max_tokens continuation."""
        self._work: dict[str, Callable[[], Awaitable[Trigger]]] = {
            Phase.ASSEMBLE: self._assemble,
            Phase.PROPOSE: self._propose,
            Phase.VALIDATE: self._validate,
            Phase.ACT: self._act,
            Phase.OBSERVE: self._observe,
        }
        budget = loop.budget
        self._dispatch_config = DispatchConfig(
            task_id=self.state.task_id,
            trace_id=self.state.trace_id,
            default_timeout_s=budget.tool_timeout_s,
            max_retries=budget.max_tool_retries,
            retry_backoff_s=budget.retry_backoff_s,
            max_output_chars=loop.max_tool_output_chars,
            raise_errors=loop.on_tool_error == "raise",
            may_attempt=self._take_tool_call,
        )

    # -- driving -------------------------------------------------------------------------

    async def execute(self, cancel: anyio.Event | None) -> None:
        """Drive the run to `stopped` under its time budget and cancel event.

        Raises:
            UnhandledStop: the API sent a stop_reason with no handler.
            Exception: a tool's exception with `on_tool_error="raise"`; a bug.
            anyio's cancellation exception: the caller cancelled the task (re-raised).
        """
        timeout = self.loop.budget.timeout_s
        if timeout is not None:
            self.deadline = anyio.current_time() + timeout
        try:
            with anyio.CancelScope(deadline=self.deadline or float("inf")) as scope:
                if cancel is None:
                    await self.drive()
                else:
                    await self._drive_cancellable(cancel, scope)
            if scope.cancelled_caught and self.phase != Phase.STOPPED:
                if self.cancel_requested:
                    self.abort(StopReason.CANCELLED, "the cancel event was set")
                else:
                    self.abort(StopReason.TIMEOUT, f"the run exceeded timeout_s={timeout}")
        except anyio.get_cancelled_exc_class():
            # Cancellation from outside: answer every call, record it, and re-raise it.
            self.abort(StopReason.CANCELLED, "the task running the loop was cancelled")
            raise
        except BaseException as exc:
            self.error("exception", exc)
            self.abort(StopReason.FAILED, f"{type(exc).__name__}: {exc}")
            if isinstance(exc, UnhandledStop):
                exc.result = self.result()
            raise
        finally:
            self._record_stop()
            await self._last_checkpoint()

    async def _last_checkpoint(self) -> None:
        """Save the final state, shielded from the caller's cancellation.

        A failing store never replaces an exception or cancellation already on its way out:
        then the store's error is recorded in the state and the trace instead.
        """
        store = self.loop.store
        if store is None:
            return
        in_flight = sys.exc_info()[1] is not None
        try:
            with anyio.move_on_after(CHECKPOINT_TIMEOUT_S, shield=True):
                await store.save(self.state)
        except Exception as exc:
            if not in_flight:
                raise
            self.error("checkpoint", exc)

    async def _drive_cancellable(self, cancel: anyio.Event, scope: anyio.CancelScope) -> None:
        async def watch() -> None:
            await cancel.wait()
            self.cancel_requested = True
            scope.cancel()

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(watch)
                await self.drive()
                group.cancel_scope.cancel()
        except BaseExceptionGroup as group_error:
            # One failure in the host task: surface it as itself, not as a group.
            if len(group_error.exceptions) == 1:
                raise group_error.exceptions[0] from None
            raise

    async def drive(self) -> None:
        """Await each state's work and fire its trigger until the run is stopped."""
        work = self._work
        store = self.loop.store
        while self.phase != Phase.STOPPED:
            trigger = await work[self.phase]()
            self.fire(trigger)
            if store is not None and trigger is Trigger.OBSERVED and self.phase == Phase.ASSEMBLE:
                await store.save(self.state)  # a step is complete: its observations are durable

    def fire(self, trigger: Trigger) -> None:
        """Fire a trigger; trace and measure the transition it took."""
        source = self.phase
        machine = self.loop.machine
        dest = machine.fire(self, trigger)
        guard = machine.guard(source, trigger, self.verdict)
        now = time.perf_counter()
        duration = now - self.entered
        self.entered = now
        self.emit(
            TraceEvent(
                kind="transition",
                step=self.state.step,
                at=time.time(),
                source=source,
                dest=dest,
                trigger=trigger,
                duration_s=duration,
                data={} if guard is None else {"guard": guard},
            )
        )
        metrics = self.loop.metrics
        if metrics is not None:
            metrics.transition(source, dest, duration, self.state.trace_id)

    def event(self, kind: TraceKind, /, **data: Any) -> None:
        """Add a non-transition event to the trace."""
        self.emit(TraceEvent(kind=kind, step=self.state.step, at=time.time(), data=data))

    def emit(self, event: TraceEvent) -> None:
        """Append to the trace and tell the loop's `on_event` hook, as it happens."""
        self.trace.append(event)
        for hook in self.hooks:
            hook(event)

    # -- the work of each state ----------------------------------------------------------

    async def _assemble(self) -> Trigger:
        if await self._budget_spent():
            return Trigger.ASSEMBLED
        self.request = self._build_request()
        self.verdict = Verdict.CONTINUE
        return Trigger.ASSEMBLED

    def _build_request(self, *, tools_allowed: bool = True) -> dict[str, Any]:
        """The Messages API request for the transcript so far."""
        loop = self.loop
        request: dict[str, Any] = {
            "model": loop.model,
            "max_tokens": loop.max_tokens,
            "messages": list(self.state.messages),
        }
        if loop.system is not None:
            request["system"] = loop.system
        if loop.tools:
            request["tools"] = loop.tools.params
            if not tools_allowed:
                request["tool_choice"] = {"type": "none"}
        return request

    async def _propose(self) -> Trigger:
        started = time.perf_counter()
        response = await self._call_model(self.request)
        if response is None:
            return Trigger.HALT
        self.state.step += 1
        self._accept(response, time.perf_counter() - started)
        self.verdict = Verdict.CONTINUE
        return Trigger.PROPOSED

    async def _validate(self) -> Trigger:
        response = self.response
        assert response is not None  # propose always sets it before validate
        handler = self.loop.signal_handlers.get(str(response.stop_reason))
        if handler is None:
            raise UnhandledStop(response.stop_reason)
        context = SignalContext(policy=self.loop.policy, state=self.state, earlier_text=self.earlier_text)
        route = handler(response, context)
        decisions: list[JSON] = []
        if route.verdict is Verdict.TOOL_CALLS:
            self.planned, decisions, batch_stop = await self.validator.plan(self.calls, self.keys)
            self.slots = [item.result for item in self.planned]
            if batch_stop is not None:
                route = Route(verdict=Verdict.STOP, stop_reason=batch_stop[0], detail=batch_stop[1])
        self.event(
            "validation",
            decision=_DECISIONS[route.verdict],
            stop_reason=None if route.stop_reason is None else str(route.stop_reason),
            reason=self.redact(route.detail),
            calls=decisions,
        )
        self.verdict = route.verdict
        if route.verdict is Verdict.RESUME:
            if route.continuation:
                self.state.continuations += 1
            # A paused or cut-off turn goes on in the next response: keep its text for the answer.
            resumed = response.stop_reason in ("pause_turn", "max_tokens")
            self.earlier_text = context.answer(response) if resumed else ""
            # Client tool_use blocks do not come with a resumable turn; if one does, answer it so
            # the transcript stays valid (the model continues after the answers).
            self._answer_open_calls("denied", f"not run: the response stopped with {response.stop_reason}")
            if route.nudge is not None:
                append_user(self.state.messages, [{"type": "text", "text": route.nudge}])
        elif route.verdict is Verdict.FINAL:
            self.state.answer = context.answer(response) or None
            self.finish(StopReason.COMPLETED, None)
        elif route.verdict is Verdict.STOP:
            assert route.stop_reason is not None  # Route.__post_init__ guarantees it
            self.finish(route.stop_reason, route.detail)
            if route.stop_reason is StopReason.MAX_TOOL_CALLS:
                await self._final_answer(route.stop_reason)
        return Trigger.VALIDATED

    async def _act(self) -> Trigger:
        self.event(
            "tool_call",
            calls=[
                {"tool": item.call.name, "tool_use_id": item.call.id}
                for item in self.planned
                if item.tool is not None and item.result is None
            ],
        )
        self.earlier_text = ""
        await dispatch(self.planned, self.slots, self._dispatch_config, self.invoked)
        self._answer_open_calls("cancelled", "not run")
        self.verdict = Verdict.CONTINUE
        return Trigger.ACTED

    async def _observe(self) -> Trigger:
        state = self.state
        budget = self.loop.budget
        if state.consecutive_tool_errors >= budget.max_consecutive_tool_errors:
            self.verdict = Verdict.BREAKER_OPEN
            self.finish(
                StopReason.NEEDS_HUMAN,
                f"circuit breaker open: {state.consecutive_tool_errors} failing tool results in a row",
            )
        elif state.repeated_calls > budget.max_repeated_calls:
            self.verdict = Verdict.BREAKER_OPEN
            self.finish(StopReason.NEEDS_HUMAN, f"{state.repeated_calls} repeated tool calls")
        elif not await self._budget_spent():
            self.verdict = Verdict.CONTINUE
        return Trigger.OBSERVED

    # -- model calls ---------------------------------------------------------------------

    async def _call_model(self, request: dict[str, Any]) -> Message | None:
        """Call the model; an API failure stops the run with `failed` and returns None."""
        try:
            response = await self.loop.client.messages.create(**request)
        except anthropic.APIError as exc:
            self.error("model_api", exc)
            self.finish(StopReason.FAILED, f"model API error: {type(exc).__name__}: {exc}")
            return None
        except (json.JSONDecodeError, pydantic.ValidationError) as exc:
            self.error("model_response", exc)
            self.finish(StopReason.FAILED, f"the model's response does not parse: {type(exc).__name__}")
            return None
        if not isinstance(cast(object, response), Message):
            self.error("model_response", TypeError(f"messages.create returned {type(response).__name__}"))
            self.finish(StopReason.FAILED, "the model client did not return an anthropic Message")
            return None
        for block in response.content:
            if isinstance(block, ToolUseBlock) and not isinstance(cast(object, block.input), dict):
                self.error("model_response", ValueError(f"tool_use {block.id} input is not an object"))
                self.finish(StopReason.FAILED, f"malformed tool_use input in block {block.id}")
                return None
        return response

    def _accept(self, response: Message, duration_s: float) -> None:
        """Record a response: transcript (exactly as received), usage, cost, trace, metrics."""
        state = self.state
        # The SDK's own blocks, exactly as received (thinking signatures, server tool blocks).
        state.responses.append(response)
        state.messages.append({"role": "assistant", "content": response.content})
        self.response = response
        self.calls = [
            ToolCall(id=block.id, name=block.name, input=block.input, step=state.step)
            for block in response.content
            if isinstance(block, ToolUseBlock)
        ]
        self.keys = [canonical(call.name, call.input) for call in self.calls]
        self.slots = [None] * len(self.calls)
        self.invoked = set()
        self.planned = []
        self.open_calls = bool(self.calls)
        usage = response.usage
        cache_read = usage.cache_read_input_tokens or 0
        cache_creation = usage.cache_creation_input_tokens or 0
        totals = state.usage
        totals.input_tokens += usage.input_tokens
        totals.output_tokens += usage.output_tokens
        totals.cache_read_input_tokens += cache_read
        totals.cache_creation_input_tokens += cache_creation
        price = self.loop.price
        if price is not None:
            totals.cost_usd += price.cost(usage)
        self.event(
            "proposal",
            stop_reason=response.stop_reason,
            stop_sequence=response.stop_sequence,
            tools=[call.name for call in self.calls],
            duration_s=duration_s,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
        )
        metrics = self.loop.metrics
        if metrics is not None:
            metrics.model_request(
                response.stop_reason,
                duration_s,
                state.trace_id,
                (usage.input_tokens, usage.output_tokens, cache_read, cache_creation),
            )

    async def _final_answer(self, reason: StopReason) -> None:
        """With `on_exhausted="final_answer"`: one last call without tools, for the best answer.

        Only for the step and tool-call budgets: time, tokens and cost are hard ceilings.
        """
        if self.loop.budget.on_exhausted != "final_answer" or reason not in _FINAL_ANSWER_AFTER:
            return
        note = (
            f"The budget of this run is spent ({BUDGET_LIMITS[reason]}). Do not call tools. "
            "Give your best final answer now from what you have gathered, and say what is uncertain."
        )
        append_user(self.state.messages, [{"type": "text", "text": note}])
        started = time.perf_counter()
        detail = self.state.stop_detail
        response = await self._call_model(self._build_request(tools_allowed=False))
        if response is None:  # keep the budget's reason; the API error is in state.errors
            self.state.stop_reason = reason
            self.state.stop_detail = f"{detail}; the final-answer call failed"
            return
        self._accept(response, time.perf_counter() - started)
        self.state.answer = answer_text(response) or None
        self._answer_open_calls("denied", "not run: the budget is spent")

    # -- validation ----------------------------------------------------------------------

    def _take_tool_call(self) -> bool:
        limit = self.loop.budget.max_tool_calls
        if limit is not None and self.state.tool_calls >= limit:
            return False
        self.state.tool_calls += 1
        return True

    # -- budget --------------------------------------------------------------------------

    async def _budget_spent(self) -> bool:
        """Check every budget before a model call; on a spent one, stop (maybe answering last)."""
        state = self.state
        budget = self.loop.budget
        spent: tuple[StopReason, float, float] | None = None
        if state.step >= budget.max_steps:
            spent = (StopReason.MAX_STEPS, budget.max_steps, state.step)
        elif budget.max_total_tokens is not None and state.usage.total_tokens >= budget.max_total_tokens:
            spent = (StopReason.TOKEN_BUDGET, budget.max_total_tokens, state.usage.total_tokens)
        elif budget.max_cost_usd is not None and state.usage.cost_usd >= budget.max_cost_usd:
            spent = (StopReason.COST_BUDGET, budget.max_cost_usd, state.usage.cost_usd)
        elif self.deadline is not None and anyio.current_time() >= self.deadline:
            spent = (
                StopReason.TIMEOUT,
                budget.timeout_s or 0.0,
                time.perf_counter() - self.started,
            )
        if spent is None:
            return False
        reason, value, used = spent
        self.verdict = Verdict.BUDGET_SPENT
        state.exceeded = {"limit": BUDGET_LIMITS[reason], "value": value, "used": used}
        self.finish(reason, f"{BUDGET_LIMITS[reason]}={value} spent (used {used:g})")
        await self._final_answer(reason)
        return True

    # -- transcript ----------------------------------------------------------------------

    def _answer_open_calls(self, outcome: Outcome, text: str) -> None:
        """Answer every tool_use of the last response in ONE user message, in block order."""
        if not self.open_calls:
            return
        self.open_calls = False
        results = [
            slot if slot is not None else self._unanswered(index, call, outcome, text)
            for index, (call, slot) in enumerate(zip(self.calls, self.slots, strict=True))
        ]
        append_user(self.state.messages, [result.to_block() for result in results])
        self._observe_results(results, self.keys)

    def _unanswered(self, index: int, call: ToolCall, outcome: Outcome, text: str) -> CallResult:
        if index in self.invoked:
            key = idempotency_key(self.state.task_id, call)
            return refused(
                call,
                "cancelled",
                f"interrupted while running ({text.removeprefix('not run: ')}): its effect is unknown; "
                f"idempotency key {key}",
            )
        return refused(call, outcome, text)

    def _observe_results(self, results: list[CallResult], keys: list[str]) -> None:
        state = self.state
        metrics = self.loop.metrics
        for result, key in zip(results, keys, strict=True):
            call = result.call
            outcome = result.outcome
            state.observations.append(
                {
                    "step": call.step,
                    "tool_use_id": call.id,
                    "tool": call.name,
                    "input": call.input,
                    "outcome": outcome,
                    "content": result.content,
                }
            )
            if outcome == "ok":
                state.consecutive_tool_errors = 0
                self.validator.remember(key, result)
            elif outcome in FAILED_OUTCOMES:
                state.consecutive_tool_errors += 1
                if outcome != "invalid":
                    state.errors.append(
                        {
                            "kind": f"tool_{outcome}",
                            "step": call.step,
                            "tool": call.name,
                            "message": self.redact(str(result.content)),
                        }
                    )
            self.event(
                "tool_result",
                tool=call.name,
                tool_use_id=call.id,
                outcome=outcome,
                is_error=result.is_error,
                attempts=result.attempts,
                duration_s=result.duration_s,
            )
            if metrics is not None:
                metrics.tool_call(
                    call.name, outcome, result.duration_s if result.attempts else None, state.trace_id
                )

    # -- stopping ------------------------------------------------------------------------

    def finish(self, reason: StopReason, detail: str | None) -> None:
        """Set the stop reason and answer any open tool_use; the transition fires after."""
        state = self.state
        state.stop_reason = reason
        state.stop_detail = self.redact(detail)
        if reason is not StopReason.COMPLETED:
            self._answer_open_calls("cancelled" if reason in _CANCELS else "denied", f"not run: {reason}")
        else:
            self._answer_open_calls("denied", "not run: the model ended its turn")

    def abort(self, reason: StopReason, detail: str) -> None:
        """Leave any state for `stopped` (timeout, cancellation, failure)."""
        if self.phase == Phase.STOPPED:
            return
        state = self.state
        if state.stop_reason is not None:
            # The stop was decided first; only its final-answer call was interrupted.
            state.stop_detail = f"{state.stop_detail}; the final-answer call was interrupted: {detail}"
            self._answer_open_calls("cancelled", f"not run: {reason}")
        else:
            if reason is StopReason.TIMEOUT:
                self.state.exceeded = {
                    "limit": "timeout_s",
                    "value": self.loop.budget.timeout_s,
                    "used": time.perf_counter() - self.started,
                }
            self.finish(reason, detail)
        self.verdict = Verdict.STOP
        self.fire(Trigger.HALT)

    def error(self, kind: str, exc: BaseException) -> None:
        """Record an error in the state and the trace, with secrets redacted."""
        record: JSON = {
            "kind": kind,
            "step": self.state.step,
            "type": type(exc).__name__,
            "message": self.redact(str(exc)),
        }
        if isinstance(exc, anthropic.APIStatusError):
            record["status_code"] = exc.status_code
            record["request_id"] = exc.request_id
        self.state.errors.append(record)
        self.event("error", **record)

    def redact(self, text: str | None) -> str | None:
        """Remove API keys (and whatever the user's `redact` hook removes) from text."""
        if text is None:
            return None
        text = API_KEY.sub("[REDACTED]", text)
        hook = self.loop.redact
        return text if hook is None else hook(text)

    def _record_stop(self) -> None:
        state = self.state
        reason = state.stop_reason or StopReason.FAILED
        state.stop_reason = reason
        duration = time.perf_counter() - self.started
        metrics = self.loop.metrics
        if metrics is not None:  # first: a failing on_event hook must not leave runs_active up
            metrics.run_finished(reason, duration, state.trace_id)
        self.event(
            "stop",
            stop_reason=str(reason),
            detail=state.stop_detail,
            steps=state.step,
            tool_calls=state.tool_calls,
            duration_s=duration,
        )

    def result(self) -> LoopResult:
        """The run's result (partial until stopped)."""
        state = self.state
        return LoopResult(
            stop_reason=state.stop_reason or StopReason.FAILED,
            answer=state.answer,
            state=state,
            trace=self.trace,
        )


_DECISIONS: Final = {
    Verdict.TOOL_CALLS: "execute",
    Verdict.RESUME: "resume",
    Verdict.FINAL: "final",
    Verdict.STOP: "stop",
}
_FINAL_ANSWER_AFTER: Final = frozenset({StopReason.MAX_STEPS, StopReason.MAX_TOOL_CALLS})
_CANCELS: Final = frozenset({StopReason.CANCELLED, StopReason.TIMEOUT, StopReason.FAILED})
