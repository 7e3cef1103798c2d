"""The transition table and its machine: reachability, one final state, an exit for every
outcome, and the `transitions.Machine` every run fires, built from these rows.
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
from boundloop.records import Exceeded, Limit, Turn
from boundloop.state import Budget, LoopState
from boundloop.statemachine.guards import GUARDS
from boundloop.statemachine.machine import InvalidTransition, LoopMachine, build
from boundloop.statemachine.table import FINAL, INITIAL, STATES, TRANSITIONS, Phase, Trigger

FACT_STOPS = (
    None,
    StopReason.COMPLETED,
    StopReason.NEEDS_HUMAN,
    StopReason.MAX_STEPS,
    StopReason.MAX_TOOL_CALLS,
    StopReason.TOOL_FAILURE,
)
FACT_LIMITS = (None, "max_steps", "max_tool_calls", "max_total_tokens", "max_consecutive_tool_errors")
FACT_TURNS = ("none", "open", "answered")


@dataclasses.dataclass
class Probe:
    """What a guard reads: the run's state."""

    state: LoopState


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
    machine = build(Machine)
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


def table_edge(state: LoopState, source: Phase, trigger: Trigger) -> tuple[Phase, str | None] | None:
    """The table's own meaning: the first row of (source, trigger) whose guards all pass, in
    table order, with its guard names; None: no row accepts the trigger."""
    for row in TRANSITIONS:
        if row["source"] == source and row["trigger"] == trigger:
            if all(GUARDS[name](Probe(state)) for name in row["conditions"]):
                return Phase(row["dest"]), " & ".join(row["conditions"]) or None
    return None


@given(
    start=st.sampled_from([p for p in Phase if p is not FINAL]),
    trigger=st.sampled_from(list(Trigger)),
    combo=st.sampled_from(ALL_FACTS),
)
def test_the_machine_fires_the_edge_the_table_means(
    start: Phase, trigger: Trigger, combo: tuple[StopReason | None, str | None, bool, str]
) -> None:
    """For any state, trigger and facts, the loop's `transitions.Machine` moves the run along the
    first row whose guards pass and reports that row's guards, or refuses and leaves it where it was."""
    machine = LoopMachine()
    state = facts(*combo)
    state.phase = start
    run = machine.start(state)
    expected = table_edge(state, start, trigger)
    if expected is None:
        with pytest.raises(InvalidTransition, match="no transition"):
            machine.fire(run, trigger)
        assert state.phase is start
    else:
        guard = machine.fire(run, trigger)
        assert (state.phase, guard) == expected
        assert type(state.phase) is Phase  # the machine keeps the state's phase a `Phase`
    machine.end(run)
    assert machine.runs == 0


def test_the_machine_fires_every_row_of_the_table() -> None:
    """Every row of the table fires for some consistent facts, its guard names reported."""
    machine = LoopMachine()
    fired: set[tuple[str, str, str, str | None]] = set()
    for row in TRANSITIONS:
        for combo in CONSISTENT_FACTS:
            state = facts(*combo)
            state.phase = Phase(row["source"])
            run = machine.start(state)
            try:
                guard = machine.fire(run, Trigger(row["trigger"]))
                fired.add((row["source"], row["trigger"], str(state.phase), guard))
            except InvalidTransition:
                pass
            machine.end(run)
    assert fired == {
        (row["source"], row["trigger"], row["dest"], " & ".join(row["conditions"]) or None)
        for row in TRANSITIONS
    }


def test_the_guard_reported_is_the_edge_that_fired_not_the_destination() -> None:
    """Two edges from `assemble` on `assembled` go to `propose`: the machine tells which fired."""
    machine = LoopMachine()
    within, at_limit = (
        facts(None, None, False, "none"),
        facts(StopReason.MAX_STEPS, "max_steps", True, "none"),
    )
    runs = [machine.start(within), machine.start(at_limit)]
    assert [machine.fire(run, Trigger.ASSEMBLED) for run in runs] == ["within_budget", "answer_at_limit"]
    assert (within.phase, at_limit.phase) == (Phase.PROPOSE, Phase.PROPOSE)
    assert machine.fire(runs[0], Trigger.PROPOSED) is None  # unguarded
    with pytest.raises(InvalidTransition):
        machine.fire(runs[0], Trigger.ACTED)  # no edge leaves validate on `acted`
    assert within.phase is Phase.VALIDATE


def test_start_refuses_a_phase_outside_the_table_and_keeps_no_run() -> None:
    """A saved state with a phase the table does not have cannot start a run; a saved phase of
    the table is where the run starts."""
    machine = LoopMachine()
    state = facts(None, None, False, "none")
    state.phase = cast(Phase, "nowhere")
    with pytest.raises(InvalidTransition, match="not a state of the table"):
        machine.start(state)
    assert machine.runs == 0
    state.phase = Phase.OBSERVE
    run = machine.start(state)
    assert run.phase == "observe"
    assert machine.runs == 1


def test_one_machine_holds_many_runs_each_in_its_own_phase() -> None:
    """A thousand runs are models of one machine at once; each moves alone, and each leaves."""
    machine = LoopMachine()
    states = [facts(None, None, False, "none") for _ in range(1000)]
    runs = [machine.start(state) for state in states]
    assert machine.runs == 1000
    for run in runs[::2]:
        machine.fire(run, Trigger.ASSEMBLED)
    assert [state.phase for state in states[:4]] == [Phase.PROPOSE, Phase.ASSEMBLE] * 2
    for run in runs:
        machine.end(run)
    assert machine.runs == 0


def test_a_run_keeps_none_of_the_methods_add_model_gives_it() -> None:
    """`add_model` sets convenience methods on a model (`trigger`, `may_<trigger>`,
    `is_phase_<state>`: partials holding the run, about 5 KiB a run); the run keeps none of
    them, in flight or ended, so a run in flight costs only its own fields and an ended run holds
    no reference cycle. Firing goes through the machine all the same."""
    machine = LoopMachine()
    run = machine.start(facts(None, None, False, "none"))
    given = ["trigger", "may_trigger", "may_assembled", "assembled", "is_phase_assemble", "is_phase_stopped"]
    assert [name for name in given if getattr(run, name, None) is not None] == []  # none kept
    assert not hasattr(run, "__dict__")
    assert machine.fire(run, Trigger.ASSEMBLED) == "within_budget"  # the edge's `after` callback set it
    assert (run.phase, run.state.phase) == ("propose", Phase.PROPOSE)
    machine.end(run)
    assert run.state.phase is Phase.PROPOSE  # its own fields stay


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
