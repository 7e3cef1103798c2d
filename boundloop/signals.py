"""Signal handlers: one explicit signal handler per API `stop_reason`.

Control comes only from the typed `stop_reason` of the response; no signal handler looks at the
model's prose to decide what happens next. A stop_reason missing from the map makes the
run raise `UnhandledStop`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Final

from .policy import Route, SignalContext, Verdict
from .records import StopReason
from .state import LoopState

if TYPE_CHECKING:
    from anthropic.types import Message, ToolUseBlock

__all__ = [
    "CONTINUE_AFTER_MAX_TOKENS",
    "DEFAULT_HANDLERS",
    "KNOWN_STOP_REASONS",
    "on_compaction",
    "on_context_exceeded",
    "on_end_turn",
    "on_max_tokens",
    "on_pause_turn",
    "on_refusal",
    "on_tool_use",
    "stop",
    "succeeded_tools",
]


_RUN_TOOLS: Final = Route(verdict=Verdict.TOOL_CALLS)
"""Every tool_use response's route: a route is immutable, so one serves them all."""


def stop(reason: StopReason, detail: str | None = None) -> Route:
    """A route that ends the run."""
    return Route(verdict=Verdict.STOP, stop_reason=reason, detail=detail)


def succeeded_tools(state: LoopState) -> set[str]:
    """Tools with at least one successful call: the run's evidence."""
    return {obs.tool for obs in state.observations if obs.outcome == "ok"}


@functools.cache
def _tool_use_block() -> type[ToolUseBlock]:
    """The SDK's `ToolUseBlock`, imported once, when the first response is read (a response
    exists: the SDK is loaded; this module does not load it)."""
    from anthropic.types import ToolUseBlock

    return ToolUseBlock


def on_tool_use(message: Message, ctx: SignalContext) -> Route:
    """Validate and run the tool calls."""
    tool_use = _tool_use_block()
    for block in message.content:
        if isinstance(block, tool_use):
            return _RUN_TOOLS
    return stop(StopReason.FAILED, "stop_reason tool_use without any tool_use block")


def on_end_turn(message: Message, ctx: SignalContext) -> Route:
    """A claim of completion, checked against the required evidence and `success`."""
    policy = ctx.policy
    missing = sorted(policy.required_evidence - succeeded_tools(ctx.state))
    problem: str | None = None
    if missing:
        problem = f"missing evidence from {', '.join(missing)}"
    elif policy.success is not None and not policy.success(ctx.state, ctx.answer(message)):
        problem = "the success check rejected the answer"
    if problem is None:
        return Route(verdict=Verdict.FINAL, stop_reason=StopReason.COMPLETED)
    if policy.on_missing_evidence == "continue" and ctx.state.continuations < policy.max_continuations:
        nudge = f"Your answer is not accepted yet: {problem}. " + (
            f"Call {', '.join(missing)} first, then answer." if missing else "Revise the answer."
        )
        return Route(verdict=Verdict.RESUME, nudge=nudge, continuation=True)
    return stop(StopReason.EVIDENCE_MISSING, problem)


def on_pause_turn(message: Message, ctx: SignalContext) -> Route:
    """Send the paused turn back unchanged so the model continues it."""
    return Route(verdict=Verdict.RESUME)


CONTINUE_AFTER_MAX_TOKENS: Final = (
    "Your previous reply was cut off by the output token limit. "
    "Continue exactly where it stopped, without repeating anything."
)


def on_max_tokens(message: Message, ctx: SignalContext) -> Route:
    """Never a final answer; a truncated tool_use is never executed.

    A continuation asks for the rest in a user turn: ending a request with an assistant
    turn (prefill) is rejected by current models.
    """
    last = next(reversed(message.content), None)  # where the output was cut
    kind = getattr(last, "type", None)
    if kind in ("tool_use", "server_tool_use", "mcp_tool_use"):  # a cut call never runs
        name = getattr(last, "name", None)
        return stop(StopReason.TRUNCATED, f"output cut inside {kind} {name!r}: not executed")
    policy = ctx.policy
    if policy.on_max_tokens == "continue" and ctx.state.continuations < policy.max_continuations:
        return Route(verdict=Verdict.RESUME, nudge=CONTINUE_AFTER_MAX_TOKENS, continuation=True)
    return stop(StopReason.TRUNCATED, "the model hit max_tokens")


def on_compaction(message: Message, ctx: SignalContext) -> Route:
    """The API compacted the context: send the turn back as received, the model continues it.

    The compaction block stays in the assistant turn exactly as the API sent it."""
    return Route(verdict=Verdict.RESUME)


def on_refusal(message: Message, ctx: SignalContext) -> Route:
    """The model refused: record the stop details (each model of `fallback_model` is tried once first)."""
    details = message.stop_details
    detail = None if details is None else details.model_dump_json(exclude_none=True)
    return stop(StopReason.REFUSED, detail)


def on_context_exceeded(message: Message, ctx: SignalContext) -> Route:
    """The context window is full: nothing more fits; the text so far is the partial answer.

    It is kept in `state.answer`; the stop reason says it is not complete."""
    return stop(StopReason.CONTEXT_EXCEEDED, "the model's context window was exceeded")


DEFAULT_HANDLERS: Final[Mapping[str, Callable[[Message, SignalContext], Route]]] = {
    "tool_use": on_tool_use,
    "end_turn": on_end_turn,
    "stop_sequence": on_end_turn,
    "pause_turn": on_pause_turn,
    "compaction": on_compaction,
    "max_tokens": on_max_tokens,
    "refusal": on_refusal,
    "model_context_window_exceeded": on_context_exceeded,
}
"""The routing table of the README ("Routing"), as code: API stop_reason -> signal handler."""

KNOWN_STOP_REASONS: Final = frozenset(DEFAULT_HANDLERS)
"""The API's stop reasons (those with a default signal handler): recorded as they are; anything
else the model's, redacted."""
