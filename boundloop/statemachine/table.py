"""The transition table: the one place a transition of the loop exists.

The runtime driver and the diagram renderer both read `TRANSITIONS`; a change to the
loop's control flow is a change to this list, and shows up as a diagram diff.
Guards are referenced by name here and resolved to predicates in `guards.py`: pure
functions of the run's `LoopState` (its stop reason, spent limit and current turn).
"""

from __future__ import annotations

import enum
from typing import Final, TypedDict

__all__ = [
    "FINAL",
    "INITIAL",
    "Phase",
    "STATES",
    "TRANSITIONS",
    "TransitionRow",
    "Trigger",
]


class Phase(enum.StrEnum):
    """The states of the loop."""

    ASSEMBLE = "assemble"
    """Check the budget before any model call; build the next request from the state."""
    PROPOSE = "propose"
    """The model call: the model proposes the next step."""
    VALIDATE = "validate"
    """Route on the typed stop_reason and validate every proposed action."""
    ACT = "act"
    """Run the allowed tool calls concurrently; answer all of them in one user message."""
    OBSERVE = "observe"
    """Record the observations; check the circuit breaker and the budget."""
    STOPPED = "stopped"
    """Final: the run has a stop reason."""


class Trigger(enum.StrEnum):
    """The events the driver fires, one per completed unit of work."""

    ASSEMBLED = "assembled"
    PROPOSED = "proposed"
    VALIDATED = "validated"
    ACTED = "acted"
    OBSERVED = "observed"
    HALT = "halt"
    """Timeout, cancellation or a failed model call: leave any state for `stopped`."""


class TransitionRow(TypedDict):
    """One edge of the machine, in the shape `transitions.Machine` accepts."""

    trigger: str
    source: str
    dest: str
    conditions: list[str]


STATES: Final[tuple[Phase, ...]] = tuple(Phase)
INITIAL: Final = Phase.ASSEMBLE
FINAL: Final = Phase.STOPPED


def _row(trigger: Trigger, source: Phase, dest: Phase, *guards: str) -> TransitionRow:
    return {
        "trigger": str(trigger),
        "source": str(source),
        "dest": str(dest),
        "conditions": list(guards),
    }


TRANSITIONS: Final[tuple[TransitionRow, ...]] = (
    _row(Trigger.ASSEMBLED, Phase.ASSEMBLE, Phase.PROPOSE, "within_budget"),
    _row(Trigger.ASSEMBLED, Phase.ASSEMBLE, Phase.PROPOSE, "answer_at_limit"),
    _row(Trigger.ASSEMBLED, Phase.ASSEMBLE, Phase.STOPPED, "budget_spent"),
    _row(Trigger.PROPOSED, Phase.PROPOSE, Phase.VALIDATE),
    _row(Trigger.VALIDATED, Phase.VALIDATE, Phase.ACT, "has_tool_calls"),
    _row(Trigger.VALIDATED, Phase.VALIDATE, Phase.ASSEMBLE, "resume_turn"),
    _row(Trigger.VALIDATED, Phase.VALIDATE, Phase.ASSEMBLE, "answer_at_limit"),
    _row(Trigger.VALIDATED, Phase.VALIDATE, Phase.STOPPED, "final_answer"),
    _row(Trigger.VALIDATED, Phase.VALIDATE, Phase.STOPPED, "must_stop"),
    _row(Trigger.ACTED, Phase.ACT, Phase.OBSERVE),
    _row(Trigger.OBSERVED, Phase.OBSERVE, Phase.ASSEMBLE, "within_budget"),
    _row(Trigger.OBSERVED, Phase.OBSERVE, Phase.ASSEMBLE, "answer_at_limit"),
    _row(Trigger.OBSERVED, Phase.OBSERVE, Phase.STOPPED, "breaker_open"),
    _row(Trigger.OBSERVED, Phase.OBSERVE, Phase.STOPPED, "budget_spent"),
    _row(Trigger.OBSERVED, Phase.OBSERVE, Phase.STOPPED, "tool_failed"),
    *(_row(Trigger.HALT, phase, Phase.STOPPED) for phase in STATES if phase is not FINAL),
)
"""Every edge. Rows sharing a trigger and source have guards that exclude one another, so
exactly one fires for any state of the run (tests/statemachine/test_table.py proves it).
`answer_at_limit` is the final answer at a spent step or tool-call budget
(`Budget(on_exhausted="final_answer")`): one more trip through propose, without tools."""
