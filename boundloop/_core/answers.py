"""Answers: the turn's tool calls answered in ONE user message, and what came back recorded.

Every `tool_use` gets exactly one `tool_result`, also when the run stops before it ran, so
the transcript stays valid. Recording an answer updates the run's facts: observations, the
repeat history, the breaker's count, errors; and its `tool_result` event (the metrics read it).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

from .._base.recorded import Deferred
from ..events import ToolResult
from ..records import (
    FAILED_OUTCOMES,
    CallResult,
    ErrorRecord,
    Observation,
    Outcome,
    StopReason,
    ToolCall,
    Turn,
)
from ..tools import idempotency_key
from ..transcript import append_user
from .context import RunContext
from .results import refused

if TYPE_CHECKING:
    from anthropic.types import ContentBlockParam

_CANCELS: Final = frozenset({StopReason.CANCELLED, StopReason.TIMEOUT, StopReason.FAILED})


def finish(ctx: RunContext, reason: StopReason, detail: str | None) -> None:
    """Decide the run's stop reason and answer any open tool_use; the transition fires after."""
    state = ctx.state
    state.stop_reason = reason
    state.stop_detail = None if detail is None else ctx.redact(detail)
    if reason is StopReason.COMPLETED:
        answer_open_calls(ctx, "denied", "not run: the model ended its turn")
    else:
        answer_open_calls(ctx, "cancelled" if reason in _CANCELS else "denied", f"not run: {reason}")


def answer_open_calls(ctx: RunContext, outcome: Outcome, text: str) -> None:
    """Answer every tool_use of the turn in ONE user message, in block order."""
    turn = ctx.state.turn
    if turn is None or not turn.open:
        return
    turn.answered = True
    invoked: set[int] | None = None  # made for the first open call (usually none is)
    results: list[CallResult] = []
    blocks: list[ContentBlockParam] = []
    for index, (call, answer) in enumerate(zip(turn.calls, turn.answers, strict=True)):
        if answer is None:
            if invoked is None:
                invoked = set(turn.invoked)  # one look-up per call, not a scan of the list
            answer = _unanswered(ctx, index in invoked, call, outcome, text)
        results.append(answer)
        blocks.append(answer.to_block())
    turn.answers[:] = results
    append_user(ctx.state.messages, blocks)
    if not turn.awaiting_human:  # provisional answers are recorded once a human has decided
        _record(ctx, turn, results)


def _unanswered(ctx: RunContext, invoked: bool, call: ToolCall, outcome: Outcome, text: str) -> CallResult:
    if invoked:
        key = idempotency_key(ctx.state.task_id, call)
        tool = ctx.config.tools.get(call.name)
        where = (
            " in a worker thread, which was abandoned and may still finish"
            if tool is not None and tool.runs_in_thread
            else ""
        )
        return refused(
            call,
            "cancelled",
            f"interrupted while running{where} ({text.removeprefix('not run: ')}): its effect is "
            f"unknown; idempotency key {key}",
        )
    return refused(call, outcome, text)


def _record(ctx: RunContext, turn: Turn, results: list[CallResult]) -> None:
    state = ctx.state
    redactor = ctx.config.redactor
    events = ctx.events
    quiet = events.numbers  # nothing but the metrics hears a tool result as it happens
    for result, key, (name, call_id) in zip(results, turn.keys, ctx.recorded(turn), strict=True):
        call = result.call
        outcome = result.outcome
        observation = Observation.of(result)
        state.observations.append(observation)
        if outcome == "ok":
            state.consecutive_tool_errors = 0
            if key:  # a call from code execution has none: it is not a repeat of anything
                state.succeeded[key] = len(state.observations) - 1
        elif outcome in FAILED_OUTCOMES and not result.by_human:
            state.consecutive_tool_errors += 1
            if outcome != "invalid":  # invalid actions are recorded when validation decides them
                state.errors.append(
                    ErrorRecord(
                        kind=f"tool_{outcome}",
                        step=call.step,
                        tool=name,
                        message=ctx.redact(str(result.content)),
                    )
                )
        # Redacted first: a redact hook that raises takes no `seq`.
        reason = None if result.reason is None else ctx.redact(result.reason)
        if quiet and reason is None and name == call.name and call_id == call.id:
            # The observation says all the event does: kept as its numbers beside it.
            events.answered(
                ctx.next_seq(), state.step, ctx.epoch + time.perf_counter(), result.duration_s, observation
            )
            continue
        # Built here (a turn records one per call; not `ctx.event`'s keywords).
        ctx.emit(
            ToolResult.of(
                seq=ctx.next_seq(),
                task_id=state.task_id,
                at=ctx.epoch + time.perf_counter(),
                step=state.step,
                tool=name,
                tool_use_id=call_id,
                outcome=outcome,
                is_error=result.is_error,
                by_human=result.by_human,
                reason=reason,
                attempts=result.attempts,
                duration_s=result.duration_s,
                input=Deferred(call.input, redactor),
                content=Deferred(result.content, redactor),
            )
        )
