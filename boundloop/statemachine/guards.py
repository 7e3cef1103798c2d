"""Guards: named, pure, synchronous predicates over the typed facts of a run.

Each guard reads the run's `LoopState` (its stop reason, the limit found spent, the
final-answer flag and the current turn) and means on its own what the diagram prints on
its edge. The work of each state records facts; the guards only read them, so they are
cheap and the machine never awaits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, Protocol

from ..records import Limit

__all__ = [
    "Facts",
    "GUARDS",
    "Guard",
    "StateFacts",
    "answer_at_limit",
    "breaker_open",
    "budget_spent",
    "final_answer",
    "has_tool_calls",
    "must_stop",
    "resume_turn",
    "tool_failed",
    "within_budget",
]


class _Limit(Protocol):
    @property
    def limit(self) -> str: ...


class _Turn(Protocol):
    @property
    def open(self) -> bool: ...


class StateFacts(Protocol):
    """The facts of a `LoopState` the guards read (`LoopState` has them)."""

    @property
    def stop_reason(self) -> str | None: ...
    @property
    def exceeded(self) -> _Limit | None: ...
    @property
    def final_call_due(self) -> bool: ...
    @property
    def turn(self) -> _Turn | None: ...


class Facts(Protocol):
    """What a guard may look at: the run's state."""

    @property
    def state(self) -> StateFacts: ...


Guard = Callable[[Facts], bool]


def within_budget(run: Facts) -> bool:
    """No limit of the `Budget` is spent and nothing stops the run: go on."""
    return run.state.exceeded is None and run.state.stop_reason is None


def budget_spent(run: Facts) -> bool:
    """A budget (steps, tool calls, time, tokens, cost) is spent and no final answer is due."""
    exceeded = run.state.exceeded
    return exceeded is not None and not Limit.of(exceeded.limit).breaker and not run.state.final_call_due


def answer_at_limit(run: Facts) -> bool:
    """A step or tool-call budget is spent and one last call without tools is due."""
    return run.state.final_call_due


def breaker_open(run: Facts) -> bool:
    """Too many failing tool results in a row, or too many repeated calls."""
    exceeded = run.state.exceeded
    return exceeded is not None and Limit.of(exceeded.limit).breaker


def tool_failed(run: Facts) -> bool:
    """A tool failed after its retries and `on_tool_error="stop"` ends the run."""
    return run.state.stop_reason == "tool_failure"


def has_tool_calls(run: Facts) -> bool:
    """The model asked for tools, nothing stops the run, and the calls await their answers."""
    state = run.state
    return state.stop_reason is None and state.turn is not None and state.turn.open


def resume_turn(run: Facts) -> bool:
    """Another model turn without tools: pause_turn, a max_tokens continuation, a nudge."""
    state = run.state
    return state.stop_reason is None and (state.turn is None or not state.turn.open)


def final_answer(run: Facts) -> bool:
    """The model ended its turn and the completion check accepted the answer."""
    return run.state.stop_reason == "completed"


def must_stop(run: Facts) -> bool:
    """A stop signal, a policy block, an escalation, missing evidence or a spent budget."""
    state = run.state
    return state.stop_reason is not None and state.stop_reason != "completed" and not state.final_call_due


GUARDS: Final[Mapping[str, Guard]] = {
    guard.__name__: guard
    for guard in (
        within_budget,
        budget_spent,
        answer_at_limit,
        breaker_open,
        tool_failed,
        has_tool_calls,
        resume_turn,
        final_answer,
        must_stop,
    )
}
"""Guard name (as written in the table) -> predicate."""
