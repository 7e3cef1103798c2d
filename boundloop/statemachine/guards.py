"""Guards: named, pure, synchronous predicates over the verdict of the current state's work.

The driver computes a `Verdict` from the work it awaited (budget check, routing and
validation, breaker check) and fires the state's trigger; the guards only read it, so they
are cheap and the machine never awaits.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Final, Protocol


class Verdict(enum.Enum):
    """What the work of a state decided; the guards map it onto the table's edges."""

    CONTINUE = "continue"
    BUDGET_SPENT = "budget_spent"
    TOOL_CALLS = "tool_calls"
    RESUME = "resume"
    FINAL = "final"
    STOP = "stop"
    BREAKER_OPEN = "breaker_open"


class HasVerdict(Protocol):
    """What a guard may look at: the run's current verdict."""

    verdict: Verdict


Guard = Callable[[HasVerdict], bool]


def within_budget(run: HasVerdict) -> bool:
    """Nothing is spent and nothing tripped: go on."""
    return run.verdict is Verdict.CONTINUE


def budget_spent(run: HasVerdict) -> bool:
    """A budget (steps, tool calls, time, tokens, cost) is spent."""
    return run.verdict is Verdict.BUDGET_SPENT


def has_tool_calls(run: HasVerdict) -> bool:
    """The model asked for tools and the batch was validated."""
    return run.verdict is Verdict.TOOL_CALLS


def resume_turn(run: HasVerdict) -> bool:
    """Another model turn without tools: pause_turn, a max_tokens continuation, a nudge."""
    return run.verdict is Verdict.RESUME


def final_answer(run: HasVerdict) -> bool:
    """The model ended its turn and the completion check passed."""
    return run.verdict is Verdict.FINAL


def must_stop(run: HasVerdict) -> bool:
    """A stop signal, a policy block, an escalation or missing evidence."""
    return run.verdict is Verdict.STOP


def breaker_open(run: HasVerdict) -> bool:
    """Too many consecutive tool errors, or too many repeated calls."""
    return run.verdict is Verdict.BREAKER_OPEN


GUARDS: Final[Mapping[str, Guard]] = {
    guard.__name__: guard
    for guard in (
        within_budget,
        budget_spent,
        has_tool_calls,
        resume_turn,
        final_answer,
        must_stop,
        breaker_open,
    )
}
"""Guard name (as written in the table) -> predicate."""

VERDICTS_BY_PHASE: Final[Mapping[str, frozenset[Verdict]]] = {
    "assemble": frozenset({Verdict.CONTINUE, Verdict.BUDGET_SPENT}),
    "propose": frozenset({Verdict.CONTINUE}),
    "validate": frozenset({Verdict.TOOL_CALLS, Verdict.RESUME, Verdict.FINAL, Verdict.STOP}),
    "act": frozenset({Verdict.CONTINUE}),
    "observe": frozenset({Verdict.CONTINUE, Verdict.BREAKER_OPEN, Verdict.BUDGET_SPENT}),
}
"""The verdicts each state's work can produce: exactly one edge must accept each."""
