"""The transition table: reachability, one final state, an exit for every outcome, two equal engines."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from boundloop.statemachine.driver import InvalidTransition, StateMachine
from boundloop.statemachine.guards import GUARDS, VERDICTS_BY_PHASE, Verdict
from boundloop.statemachine.table import FINAL, INITIAL, STATES, TRANSITIONS, Phase, Trigger


class Probe:
    """A bare model for the machine: only the verdict the guards read."""

    phase: str

    def __init__(self, verdict: Verdict = Verdict.CONTINUE) -> None:
        self.verdict = verdict


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
    machine = StateMachine().machine
    assert [name for name, state in machine.states.items() if state.final] == [str(FINAL)]


def test_every_guard_in_the_table_is_a_named_predicate() -> None:
    """Guards are referenced by name and resolve to a predicate of the same name."""
    names = {name for row in TRANSITIONS for name in row["conditions"]}
    assert names <= set(GUARDS)
    assert all(GUARDS[name].__name__ == name for name in names)


@pytest.mark.parametrize("phase", [p for p in Phase if p is not FINAL], ids=str)
def test_each_outcome_of_a_state_has_exactly_one_edge(phase: Phase) -> None:
    """For every verdict a state's work can produce, exactly one edge of its trigger accepts it."""
    triggers = {
        row["trigger"] for row in TRANSITIONS if row["source"] == phase and row["trigger"] != Trigger.HALT
    }
    assert len(triggers) == 1, triggers
    rows = [row for row in TRANSITIONS if row["source"] == phase and row["trigger"] in triggers]
    for verdict in VERDICTS_BY_PHASE[phase]:
        probe = Probe(verdict)
        accepting = [row for row in rows if all(GUARDS[name](probe) for name in row["conditions"])]
        assert len(accepting) == 1, (phase, verdict, accepting)


@pytest.mark.parametrize("phase", [p for p in Phase if p is not FINAL], ids=str)
def test_halt_leaves_every_non_final_state_for_stopped(phase: Phase) -> None:
    """Timeouts, cancellation and failures can stop a run from any state."""
    assert {"trigger": "halt", "source": str(phase), "dest": "stopped", "conditions": []} in TRANSITIONS


@given(
    start=st.sampled_from([p for p in Phase if p is not FINAL]),
    trigger=st.sampled_from(list(Trigger)),
    verdict=st.sampled_from(list(Verdict)),
)
def test_compiled_engine_agrees_with_event_trigger(start: Phase, trigger: Trigger, verdict: Verdict) -> None:
    """For any state, trigger and verdict, both engines reach the same state or both refuse."""
    outcomes: list[str] = []
    for engine in ("compiled", "transitions"):
        machine = StateMachine(engine)
        probe = Probe(verdict)
        machine.add(probe)
        try:
            probe.phase = str(start)
            try:
                outcomes.append(str(machine.fire(probe, trigger)))
            except (InvalidTransition, Exception) as exc:  # transitions raises MachineError
                outcomes.append(f"refused:{type(exc).__name__ != 'InvalidTransition'}")
        finally:
            machine.remove(probe)
    compiled, reference = outcomes
    if compiled.startswith("refused"):
        assert reference.startswith("refused")
    else:
        assert compiled == reference


def test_the_compiled_engine_covers_every_row_of_the_table() -> None:
    """Every (source, trigger) of the table is indexed, with its edges in table order."""
    machine = StateMachine()
    for (source, trigger), group in itertools.groupby(
        TRANSITIONS, key=lambda row: (row["source"], row["trigger"])
    ):
        probe = Probe()
        machine.add(probe)
        dests = []
        for verdict in Verdict:
            probe.phase = source
            probe.verdict = verdict
            try:
                dests.append(str(machine.fire(probe, Trigger(trigger))))
            except InvalidTransition:
                pass
        machine.remove(probe)
        assert set(dests) == {row["dest"] for row in group}
