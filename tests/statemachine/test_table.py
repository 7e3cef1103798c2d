"""The transition table: reachability, one final state, an exit for every outcome, two equal engines.

The runtime's engine is an index of the table's rows; `transitions.Machine`, built here from the
same rows, is the oracle it is compared with.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable
from typing import cast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from transitions import Machine

from boundloop import StopReason, ToolCall
from boundloop._core.engine import InvalidTransition, StateMachine
from boundloop.records import Exceeded, Limit, Turn
from boundloop.state import Budget, LoopState
from boundloop.statemachine.guards import GUARDS
from boundloop.statemachine.table import FINAL, INITIAL, STATES, TRANSITIONS, Phase, Trigger

FACT_STOPS = (
    None,
    StopReason.COMPLETED,
    StopReason.NEEDS_HUMAN,
    StopReason.MAX_STEPS,
    StopReason.MAX_TOOL_CALLS,
)
FACT_LIMITS = (None, "max_steps", "max_tool_calls", "max_total_tokens", "max_consecutive_tool_errors")
FACT_TURNS = ("none", "open", "answered")


@dataclasses.dataclass
class Probe:
    """A bare model for the machine: only the state the guards read."""

    state: LoopState
    phase: str = "assemble"


def oracle() -> Machine:
    """`transitions.Machine` built from the table's rows, the guards resolved by name."""
    return Machine(
        model=None,
        states=[{"name": str(state), "final": state is FINAL} for state in STATES],
        transitions=[
            {**row, "conditions": [GUARDS[name] for name in row["conditions"]]} for row in TRANSITIONS
        ],
        initial=str(INITIAL),
        auto_transitions=False,
        send_event=False,
        queued=False,
        model_attribute="phase",
    )


def facts(stop: StopReason | None, limit: str | None, due: bool, turn: str) -> LoopState:
    """A state with these facts: stop reason, spent limit, final answer due, current turn."""
    state = LoopState(task_id="t", trace_id="tr", goal="g", started_at=0.0)
    state.stop_reason = stop
    state.exceeded = None if limit is None else Exceeded(limit=limit, value=1, used=1)
    state.final_call_due = due
    if turn != "none":
        call = ToolCall(id="toolu_1", name="lookup", input={}, step=1)
        state.turn = Turn(calls=[call], keys=["k"], answers=[None], answered=turn == "answered")
    return state


def consistent(stop: StopReason | None, limit: str | None, due: bool, turn: str) -> bool:
    """The invariants the work of the states keeps between them.

    A spent limit always comes with its stop reason (the breaker's is needs_human), and a
    final answer is due only at a spent step or tool-call budget.
    """
    if limit is None:
        return not due
    if stop is not Limit.of(limit).stop:
        return False
    return not due or Limit.of(limit).final_answer


ALL_FACTS = list(itertools.product(FACT_STOPS, FACT_LIMITS, (False, True), FACT_TURNS))
CONSISTENT_FACTS = [combo for combo in ALL_FACTS if consistent(*combo)]
REACHABLE: dict[Phase, Callable[[StopReason | None, str | None, bool, str], bool]] = {
    # assemble is entered with no stop decided, or with a final answer due.
    Phase.ASSEMBLE: lambda stop, limit, due, turn: (stop is None and limit is None) or due,
    # propose is entered within budget or for the final answer.
    Phase.PROPOSE: lambda stop, limit, due, turn: (stop is None and limit is None) or due,
    # validate is entered with a fresh turn: any stop it decides comes from its own work.
    Phase.VALIDATE: lambda stop, limit, due, turn: turn != "none",
    # act is entered with open calls; its work answers them.
    Phase.ACT: lambda stop, limit, due, turn: stop is None and limit is None and turn != "none",
    # observe sees a stop only when its own breaker or budget check decided one.
    Phase.OBSERVE: lambda stop, limit, due, turn: turn == "answered" and (limit is None) == (stop is None),
}


def test_every_state_is_reachable_from_the_initial_state() -> None:
    """A breadth-first walk over the table reaches every state."""
    seen = {str(INITIAL)}
    frontier = [str(INITIAL)]
    while frontier:
        source = frontier.pop()
        for row in TRANSITIONS:
            if row["source"] == source and row["dest"] not in seen:
                seen.add(row["dest"])
                frontier.append(row["dest"])
    assert seen == {str(state) for state in STATES}


def test_stopped_is_the_only_final_state() -> None:
    """Only `stopped` has no outgoing edge, and it is marked final on the machine."""
    sources = {row["source"] for row in TRANSITIONS}
    assert {str(state) for state in STATES} - sources == {str(FINAL)}
    machine = oracle()
    assert [name for name, state in machine.states.items() if state.final] == [str(FINAL)]


def test_every_guard_in_the_table_is_a_named_predicate() -> None:
    """Guards are referenced by name and resolve to a predicate of the same name."""
    names = {name for row in TRANSITIONS for name in row["conditions"]}
    assert names <= set(GUARDS)
    assert all(GUARDS[name].__name__ == name for name in names)


@pytest.mark.parametrize("phase", [p for p in Phase if p is not FINAL], ids=str)
def test_exactly_one_edge_fires_for_every_state_and_fact_combination(phase: Phase) -> None:
    """Guards of one (state, trigger) exclude one another over every consistent combination of
    facts, and accept exactly one edge for every combination the state can be entered with."""
    triggers = {
        row["trigger"] for row in TRANSITIONS if row["source"] == phase and row["trigger"] != Trigger.HALT
    }
    assert len(triggers) == 1, triggers
    rows = [row for row in TRANSITIONS if row["source"] == phase and row["trigger"] in triggers]
    reachable = 0
    for combo in CONSISTENT_FACTS:
        probe = Probe(facts(*combo))
        accepting = [row for row in rows if all(GUARDS[name](probe) for name in row["conditions"])]
        assert len(accepting) <= 1, (phase, combo, accepting)
        if REACHABLE[phase](*combo):
            reachable += 1
            assert len(accepting) == 1, (phase, combo)
    assert reachable > 0


@pytest.mark.parametrize("phase", [p for p in Phase if p is not FINAL], ids=str)
def test_halt_leaves_every_non_final_state_for_stopped(phase: Phase) -> None:
    """Timeouts, cancellation and failures can stop a run from any state."""
    assert {"trigger": "halt", "source": str(phase), "dest": "stopped", "conditions": []} in TRANSITIONS


@given(
    start=st.sampled_from([p for p in Phase if p is not FINAL]),
    trigger=st.sampled_from(list(Trigger)),
    combo=st.sampled_from(ALL_FACTS),
)
def test_the_engine_agrees_with_event_trigger(
    start: Phase, trigger: Trigger, combo: tuple[StopReason | None, str | None, bool, str]
) -> None:
    """For any state, trigger and facts, the indexed engine and `Event.trigger` of a
    `transitions.Machine` built from the same rows reach the same state, or both refuse."""
    probe = Probe(facts(*combo))
    try:
        indexed = str(StateMachine().edge(probe, start, trigger)[0])
    except InvalidTransition:
        indexed = "refused"
    machine = oracle()
    machine.add_model(probe, initial=str(start))
    try:
        # Guards receive the run as the trigger's argument.
        machine.events[str(trigger)].trigger(probe, probe)
        reached = str(probe.phase)
    except Exception:  # transitions raises MachineError for a trigger with no edge here
        reached = "refused"
    if indexed == "refused":  # Event.trigger returns False when no guard passes: the state stays
        assert reached in ("refused", str(start))
    else:
        assert indexed == reached


def test_the_engine_covers_every_row_of_the_table() -> None:
    """Every row of the table fires for some consistent facts."""
    machine = StateMachine()
    fired: set[tuple[str, str, str]] = set()
    for row in TRANSITIONS:
        for combo in CONSISTENT_FACTS:
            probe = Probe(facts(*combo))
            try:
                dest, _ = machine.edge(probe, Phase(row["source"]), Trigger(row["trigger"]))
                fired.add((row["source"], row["trigger"], str(dest)))
            except InvalidTransition:
                pass
    assert fired == {(row["source"], row["trigger"], row["dest"]) for row in TRANSITIONS}


def test_check_refuses_a_phase_outside_the_table() -> None:
    """A saved state with a phase the table does not have cannot start a run."""
    with pytest.raises(InvalidTransition, match="not a state of the table"):
        StateMachine.check(cast(Phase, "nowhere"))
    assert StateMachine.check("act") is Phase.ACT


def test_the_edge_label_names_the_guards_that_let_it_go() -> None:
    """The trace's guard label is the row's guard names; an unguarded edge has none."""
    machine = StateMachine()
    probe = Probe(facts(None, None, False, "none"))
    assert machine.edge(probe, Phase.ASSEMBLE, Trigger.ASSEMBLED) == (Phase.PROPOSE, "within_budget")
    assert machine.edge(probe, Phase.PROPOSE, Trigger.PROPOSED) == (Phase.VALIDATE, None)
    with pytest.raises(InvalidTransition):
        machine.edge(probe, Phase.ASSEMBLE, Trigger.ACTED)


def test_each_limit_carries_its_field_stop_reason_and_final_answer() -> None:
    """`Limit` is the one table of limits: a `Budget` field each, the stop reason it ends the run
    with, whether a final answer may follow it, whether it is a breaker, and the counter it reads."""
    assert {limit.field: (limit.stop, limit.final_answer, limit.breaker) for limit in Limit} == {
        "max_steps": (StopReason.MAX_STEPS, True, False),
        "max_tool_calls": (StopReason.MAX_TOOL_CALLS, True, False),
        "max_server_tool_uses": (StopReason.MAX_TOOL_CALLS, True, False),
        "timeout_s": (StopReason.TIMEOUT, False, False),
        "max_total_tokens": (StopReason.TOKEN_BUDGET, False, False),
        "max_cost_usd": (StopReason.COST_BUDGET, False, False),
        "max_consecutive_tool_errors": (StopReason.NEEDS_HUMAN, False, True),
        "max_repeated_calls": (StopReason.NEEDS_HUMAN, False, True),
    }
    budget_fields = {field.name for field in dataclasses.fields(Budget)}
    state = facts(None, None, False, "none")
    for limit in Limit:
        assert limit.field in budget_fields
        assert Limit.of(limit.field) is limit
        owner, _, name = limit.counter.rpartition(".")
        assert limit.counter == "clock" or hasattr(state.usage if owner else state, name)
    assert [Limit.stopping(reason) for reason in ("timeout", "needs_human", "completed")] == [
        Limit.TIMEOUT_S,
        None,
        None,
    ]
