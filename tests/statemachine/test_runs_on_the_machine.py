"""Runs on the loop's machine: each run is a model of the one `transitions.Machine` its loop
built, from its start to its end, however it ends; concurrent runs share it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest

from boundloop import AgentLoop, Budget, MemoryStore, Observers, StopReason, UnhandledStop, tool
from boundloop.events import Event, Transition
from boundloop.statemachine.machine import (  # the runtime machine's own classes, tested here
    RunModel,
    _PhaseEvent,  # pyright: ignore[reportPrivateUsage]
    _PhaseMachine,  # pyright: ignore[reportPrivateUsage]
    _PhaseState,  # pyright: ignore[reportPrivateUsage]
    _PhaseTransition,  # pyright: ignore[reportPrivateUsage]
    build,
)
from boundloop.statemachine.table import Phase, Trigger
from tests.helpers import scripted_loop, text, tool_use

pytestmark = pytest.mark.anyio

WAIT_S = 10.0


def counting(seen: list[int], loop_holder: list[AgentLoop]) -> Any:
    """An `on_event` hook noting how many runs the loop's machine holds at each transition."""

    def on_event(event: Event) -> None:
        if isinstance(event, Transition):
            seen.append(loop_holder[0].config.machine.runs)

    return on_event


async def test_the_loop_machine_is_built_once_and_each_run_leaves_it() -> None:
    """Two runs of one loop fire through the same machine, each a model of it while it runs only."""

    @tool
    async def lookup(order_id: str) -> str:
        """Look an order up."""
        return f"{order_id}: delivered"

    holder: list[AgentLoop] = []
    seen: list[int] = []
    script = [tool_use(("lookup", {"order_id": "O-1"})), text("done"), text("again")]
    loop = scripted_loop(script, [lookup], observers=Observers(metrics=None, on_event=counting(seen, holder)))
    holder.append(loop)
    machine = loop.config.machine
    first = await loop.run("Look O-1 up.")
    assert loop.config.machine is machine
    assert machine.runs == 0
    second = await loop.run("Once more.")
    assert (first.stop_reason, second.stop_reason) == (StopReason.COMPLETED, StopReason.COMPLETED)
    assert machine.runs == 0
    assert seen
    assert set(seen) == {1}


async def test_a_failed_a_raising_and_a_cancelled_run_leave_the_machine() -> None:
    """Whatever ends a run (a failing hook, an exception that leaves `run()`, the caller's
    cancellation), it is no longer a model of the loop's machine: a long-lived loop keeps none."""

    def failing(event: Event) -> None:
        if isinstance(event, Transition):
            raise RuntimeError("the hook failed")

    loop = scripted_loop([text("done")], [], observers=Observers(metrics=None, on_event=failing))
    failed = await loop.run("Go.")
    assert failed.stop_reason == StopReason.FAILED
    assert loop.config.machine.runs == 0

    loop = scripted_loop([text("?", stop_reason="no_such_stop")], [])
    with pytest.raises(UnhandledStop):
        await loop.run("Go.")
    assert loop.config.machine.runs == 0

    started = anyio.Event()

    @tool
    async def hang() -> str:
        """Wait forever."""
        started.set()
        await anyio.sleep_forever()
        return "never"

    loop = scripted_loop([tool_use(("hang", {}))], [hang])
    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as group:
            group.start_soon(loop.run, "Hang.")
            await started.wait()
            assert loop.config.machine.runs == 1
            group.cancel_scope.cancel()
    assert loop.config.machine.runs == 0


async def test_concurrent_runs_are_models_of_one_machine_at_once() -> None:
    """Fifty runs of one loop are all on its machine at once (each tool waits for the others to
    start); each moves alone, and all leave it."""
    runs = 50
    arrived = 0
    everyone = anyio.Event()
    on_machine: list[int] = []
    holder: list[AgentLoop] = []

    @tool
    async def gather(n: int) -> str:
        """Wait until every run's call has started."""
        nonlocal arrived
        arrived += 1
        if arrived == runs:
            on_machine.append(holder[0].config.machine.runs)
            everyone.set()
        await everyone.wait()
        return f"{n} gathered"

    script = [tool_use(("gather", {"n": n})) for n in range(runs)] + [text("done")] * runs
    loop = scripted_loop(script, [gather])
    holder.append(loop)
    results: list[StopReason] = []

    async def one(n: int) -> None:
        results.append((await loop.run(f"Run {n}.")).stop_reason)

    with anyio.fail_after(WAIT_S):
        async with anyio.create_task_group() as group:
            for n in range(runs):
                group.start_soon(one, n)
    assert on_machine == [runs]
    assert results == [StopReason.COMPLETED] * runs
    assert loop.config.machine.runs == 0


async def test_a_resumed_run_joins_the_machine_in_its_saved_phase() -> None:
    """A run stopped for a human's approval is resumed: it is added to the machine of the
    resuming loop where its state says it is, and its first transition leaves that phase."""

    @tool(requires_approval=True)
    async def refund(order_id: str) -> str:
        """Refund an order."""
        return f"refunded {order_id}"

    store = MemoryStore()
    script = [tool_use(("refund", {"order_id": "O-1"})), text("refunded")]
    loop = scripted_loop(script, [refund], store=store, budget=Budget(max_steps=3))
    waiting = await loop.run("Refund O-1.")
    assert waiting.stop_reason == StopReason.NEEDS_HUMAN
    call_id = waiting.state.pending_approvals[0].tool_use_id
    resumed = await loop.resume(waiting.state.task_id, approvals={call_id: True})
    assert resumed.stop_reason == StopReason.COMPLETED
    kinds = [event.kind for event in resumed.events]
    after_resume = resumed.events[kinds.index("resumed") :]
    first = next(event for event in after_resume if isinstance(event, Transition))
    assert first.source == Phase.VALIDATE  # where the resume put the saved run
    assert loop.config.machine.runs == 0


def test_a_phase_state_runs_the_callbacks_it_is_given() -> None:
    """The runtime's states skip entering and leaving only while they have no callbacks: a
    callback added through transitions' own API runs, on exit and on entry, in that order."""
    machine = build(_PhaseMachine)
    seen: list[str] = []
    assemble, propose = machine.get_state(str(Phase.ASSEMBLE)), machine.get_state(str(Phase.PROPOSE))
    assert isinstance(assemble, _PhaseState)

    def note(what: str) -> Callable[[RunModel], None]:
        return lambda run: seen.append(f"{what} {run.phase}")

    assemble.add_callback("exit", note("exit"))
    propose.add_callback("enter", note("enter"))
    run = RunModel(_Facts())
    machine.add_model(run, initial=str(Phase.ASSEMBLE))
    assert machine.events[str(Trigger.ASSEMBLED)].trigger(run, run)
    assert seen == ["exit assemble", "enter propose"]
    assert run.guard == "within_budget"  # the guarded edge's after callback ran too


@pytest.mark.parametrize("where", ["prepare", "before", "after", "machine_before", "machine_after"])
def test_a_phase_transition_runs_the_callbacks_it_is_given(where: str) -> None:
    """The runtime's edges skip transitions' callback walk only for the lists the table leaves
    empty: a callback added through transitions' own API runs where transitions runs it, and
    the edge still moves the run and names its guard."""
    machine = build(_PhaseMachine)
    seen: list[str] = []
    (edge, *_) = machine.events[str(Trigger.ASSEMBLED)].transitions[str(Phase.ASSEMBLE)]
    assert isinstance(edge, _PhaseTransition)

    def note(run: RunModel) -> None:
        seen.append(f"{where} in {run.phase}")

    if where.startswith("machine_"):
        getattr(machine, f"{where.removeprefix('machine_')}_state_change").append(note)
    else:
        edge.add_callback(where, note)
    run = RunModel(_Facts())
    machine.add_model(run, initial=str(Phase.ASSEMBLE))
    assert machine.events[str(Trigger.ASSEMBLED)].trigger(run, run)
    before = where in {"prepare", "before", "machine_before"}
    assert seen == [f"{where} in {Phase.ASSEMBLE if before else Phase.PROPOSE}"]
    assert (run.phase, run.guard) == (str(Phase.PROPOSE), "within_budget")


def test_a_phase_transition_calls_the_machines_on_final_callbacks() -> None:
    """Entering the final state runs the machine's `on_final` callbacks, as transitions does."""
    machine = build(_PhaseMachine)
    finals: list[str] = []

    def final(run: RunModel) -> None:
        finals.append(run.phase)

    machine.on_final.append(final)
    run = RunModel(_Facts())
    machine.add_model(run, initial=str(Phase.PROPOSE))
    assert machine.events[str(Trigger.HALT)].trigger(run, run)
    assert finals == [str(Phase.STOPPED)]


@pytest.mark.parametrize("where", ["prepare_event", "finalize_event"])
def test_a_phase_event_runs_the_machines_event_callbacks(where: str) -> None:
    """The runtime's triggers skip transitions' event callbacks only while the machine has none:
    one added runs (before the edge's conditions, or after the attempt), and the run moves."""
    machine = build(_PhaseMachine)
    assert isinstance(machine.events[str(Trigger.ASSEMBLED)], _PhaseEvent)
    seen: list[str] = []

    def note(run: RunModel) -> None:
        seen.append(f"{where} in {run.phase}")

    getattr(machine, where).append(note)
    run = RunModel(_Facts())
    machine.add_model(run, initial=str(Phase.ASSEMBLE))
    assert machine.events[str(Trigger.ASSEMBLED)].trigger(run, run)
    phase = Phase.ASSEMBLE if where == "prepare_event" else Phase.PROPOSE
    assert seen == [f"{where} in {phase}"]
    assert (run.phase, run.guard) == (str(Phase.PROPOSE), "within_budget")


def test_a_phase_event_hands_a_guards_error_to_the_machines_on_exception() -> None:
    """A machine given `on_exception` callbacks gets a raising guard's error, as transitions
    does; without them the error is raised from the trigger."""
    machine = build(_PhaseMachine)
    run = RunModel(_Raising())
    machine.add_model(run, initial=str(Phase.ASSEMBLE))
    with pytest.raises(ZeroDivisionError):
        machine.events[str(Trigger.ASSEMBLED)].trigger(run, run)
    caught: list[type[BaseException]] = []

    def on_exception(run: RunModel) -> None:
        caught.append(ZeroDivisionError)

    machine.on_exception.append(on_exception)
    assert not machine.events[str(Trigger.ASSEMBLED)].trigger(run, run)
    assert caught == [ZeroDivisionError]
    assert run.phase == str(Phase.ASSEMBLE)


class _Facts:
    """A fresh run's facts, as a `LoopState` holds them before its first model call."""

    phase = Phase.ASSEMBLE
    stop_reason = None
    exceeded = None
    final_call_due = False
    turn = None


class _Raising(_Facts):
    """Facts whose budget reading raises."""

    @property
    def exceeded(self) -> None:  # type: ignore[override]
        raise ZeroDivisionError
