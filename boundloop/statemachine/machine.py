"""The loop's machine: the table's rows as a `transitions.Machine`, the engine of every run.

`build` makes a machine of the table (`table.TRANSITIONS`, the guards of `guards.GUARDS` as
each row's `conditions`); the runtime builds one `LoopMachine` per `AgentLoop` from it (a
`_PhaseMachine`: transitions' `Machine` with its documented `state_cls`, `transition_cls` and
`event_cls` set, which skip the callback lists the table leaves empty), and the diagrams
(`diagram.py`) are drawn by the same builder with transitions' `GraphMachine`.

A run is a model of its loop's machine while it runs: `LoopMachine.start` adds it
(`add_model`, in the phase its state is in: a new run's `assemble`, or where a saved run
stopped), `LoopMachine.fire` fires a trigger through `Machine.events[trigger].trigger`, and
`LoopMachine.end` removes it (`remove_model`), whatever ended the run. The machine never
awaits: the driver awaits each state's work under anyio (asyncio or trio) and fires the
trigger the work returned, synchronously. Any number of runs share one machine.

The guards receive the run as the trigger's argument (the machine calls its callbacks with
the trigger's arguments), and each guarded row's `after` callback writes its guard names on the
run: which edge fired is the machine's answer, not a look-up of ours (an unguarded row has no
callback: `fire` clears the names before the trigger). The machine keeps the run's state in the
model's own `phase` attribute, a plain string; `fire` copies the state it moved to into the
run's `LoopState` once the trigger returns. This module is the only one
that imports `transitions` at run time.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any, Final, Protocol, TypeVar, final

from transitions import Event, EventData, Machine, MachineError, State, Transition

from .guards import GUARDS, StateFacts
from .table import FINAL, INITIAL, STATES, TRANSITIONS, Phase, TransitionRow, Trigger

__all__ = ["InvalidTransition", "LoopMachine", "RunModel", "RunState", "build"]

_Machine = TypeVar("_Machine", bound=Machine)

_MODEL_ATTRIBUTE: Final = "phase"
"""The model attribute the machine keeps a run's state in (`RunModel.phase`)."""

_PHASES: Final = {str(phase): phase for phase in Phase}
"""A state's name, as the machine sets it -> the `Phase`."""


class InvalidTransition(RuntimeError):
    """No edge of the table accepts the trigger in the run's state, or a saved run's phase is
    not a state of the table: a bug in boundloop, or a state that is not one of its runs'."""


class RunState(StateFacts, Protocol):
    """What a run's model needs of its `LoopState`: the facts the guards read, and the phase."""

    phase: Phase


class _Unkept:
    """A convenience method `add_model` gives a model (`trigger`, `may_<trigger>`, `<trigger>`,
    `is_phase_<state>`): read as absent (None, so transitions binds it), and let go when set."""

    __slots__ = ()

    def __get__(self, run: object, owner: type | None = None) -> None:
        return None

    def __set__(self, run: object, method: object) -> None:
        """Nothing kept: the runtime fires through `LoopMachine.fire`."""


@final
class RunModel:
    """One run as a model of the loop's machine: its phase, and the guards of the last edge taken.

    The machine reads and sets the run's state in `phase` (a plain slot: transitions reads it
    twice and sets it once a transition); `LoopMachine.fire` copies it into the run's
    `LoopState`. Its fields are slots, and it keeps nothing else: `add_model` sets a model's
    convenience methods on it (`trigger`, `may_<trigger>`, `<trigger>`, `is_phase_<state>`:
    about 5 KiB a run in flight, each a partial holding the run), which the runtime never calls
    (it fires through `LoopMachine.fire`); each of those names is an `_Unkept` of the class,
    which lets the method go as it is given, while the run's own fields are set as plain slots
    (no Python-level `__setattr__` on the machine's path, three times a transition).
    """

    __slots__ = ("guard", "phase", "state")

    def __init__(self, state: RunState) -> None:
        self.state = state
        """The run's state: what the guards read, and where `fire` keeps its phase."""
        self.phase = str(state.phase)
        """The run's state in the machine, as the machine names it (set by `add_model` and by
        every transition)."""
        self.guard: str | None = None
        """The guard names of the edge the last trigger took, set by the edge (None: unguarded)."""


_CONVENIENCE: Final = (
    "trigger",
    "may_trigger",
    *(name for trigger in Trigger for name in (str(trigger), f"may_{trigger}")),
    *(f"is_{_MODEL_ATTRIBUTE}_{state}" for state in STATES),
)
"""The names `add_model` binds its convenience methods to on a model of this table's machine."""
for _name in _CONVENIENCE:
    setattr(RunModel, _name, _Unkept())


class _PhaseState(State):
    """A state of the runtime's machine. The table gives its states no `on_enter` or `on_exit`
    callbacks, so entering or leaving one does nothing; transitions' `State` would still walk
    the empty lists and log twice, about a sixth of a transition's cost (five a turn). A state
    given callbacks (transitions' `add_callback`) runs them as `State` does."""

    def enter(self, event_data: Any) -> None:
        if self.on_enter:
            super().enter(event_data)

    def exit(self, event_data: Any) -> None:
        if self.on_exit:
            super().exit(event_data)


class _PhaseTransition(Transition):
    """An edge of the runtime's machine. transitions' `Transition.execute` walks three callback
    lists the table leaves empty (`prepare`, `before` and the machine's before/after state
    change), looks its states up by name twice and logs four times: about a third of a
    transition's cost. This `execute` does the same steps in the same order with what the edge
    has: its conditions (all must pass), leaving the source, the model's state attribute
    (`model_attribute`) set to the destination's value as `Machine.set_state` sets one model's,
    entering it, the machine's `on_final` at a final state, then its `after` callbacks (a guarded
    row's `_took`). An edge or machine given any of the other callbacks (transitions'
    `add_callback`, or a machine's `before_state_change`/`after_state_change`) or an internal
    edge (no `dest`) runs transitions' own `execute`."""

    def execute(self, event_data: Any) -> bool:
        machine = event_data.machine
        if (
            self.prepare
            or self.before
            or self.dest is None
            or machine.before_state_change
            or machine.after_state_change
        ):
            return bool(super().execute(event_data))
        for condition in self.conditions:
            if not condition.check(event_data):
                return False
        states = machine.states
        states[self.source].exit(event_data)
        dest = states[self.dest]
        setattr(event_data.model, machine.model_attribute, dest.value)
        event_data.state = dest  # what `event_data.update` looks up by name: the state in hand
        dest.enter(event_data)
        if dest.final:
            machine.callbacks(machine.on_final, event_data)
        if self.after:  # an unguarded row has none
            machine.callbacks(self.after, event_data)
        return True


class _PhaseEvent(Event):
    """A trigger of the runtime's machine. transitions' `Event.trigger` wraps the attempt in a
    partial handed to the machine's queue, walks the machine's `prepare_event`,
    `finalize_event` and `on_exception` lists (the table gives none) and logs twice: about a
    third of a trigger's cost. This `trigger` does the same for an unqueued machine with none
    of them: the model's state (its `model_attribute`, a state of `machine.states`), then its
    edges from that state in table order, the first whose `execute` succeeds taken. A machine
    given any of those callbacks, a queued machine, or a state the trigger has no edge from
    (transitions' error or warning) runs transitions' own `trigger`."""

    def trigger(self, model: Any, *args: Any, **kwargs: Any) -> bool:
        machine = self.machine
        if machine.has_queue or machine.prepare_event or machine.finalize_event or machine.on_exception:
            return bool(super().trigger(model, *args, **kwargs))
        name = getattr(model, machine.model_attribute)  # the model's state, as `set_state` keeps it
        edges = self.transitions.get(name)
        if edges is None:
            return bool(super().trigger(model, *args, **kwargs))
        event_data = EventData(machine.states[name], self, machine, model, args, kwargs)
        for edge in edges:
            event_data.transition = edge
            if edge.execute(event_data):
                event_data.result = True
                return True
        return False


class _PhaseMachine(Machine):
    """The runtime's machine: transitions' `Machine` whose states are `_PhaseState`s, whose
    edges are `_PhaseTransition`s and whose triggers are `_PhaseEvent`s (its documented
    `state_cls`, `transition_cls` and `event_cls`)."""

    state_cls = _PhaseState
    transition_cls = _PhaseTransition
    event_cls = _PhaseEvent


def _took(guard: str, run: RunModel) -> None:
    """A guarded row's `after` callback: the edge fired; its guard names go on the run."""
    run.guard = guard


def build(
    cls: type[_Machine],
    rows: Sequence[TransitionRow] = TRANSITIONS,
    *,
    labels: Sequence[str] | None = None,
    **options: Any,
) -> _Machine:
    """A machine of class `cls` built from the table's rows, holding no model.

    Every row is a transition whose `conditions` are its guards (from `GUARDS`, in order: all
    must pass) and, when it has guards, whose `after` callback records their names on the run it
    moved; rows
    sharing a trigger and a source are tried in table order. `stopped` is marked final.

    Args:
        cls: `transitions.Machine` for the runtime, a `GraphMachine` for the diagrams.
        rows: the transitions (the table's, unless a test gives others).
        labels: a label per row (the diagrams' edge labels).
        options: further keyword arguments of `cls` (a `GraphMachine`'s engine and title).
    """
    transitions: list[dict[str, Any]] = []
    for index, row in enumerate(rows):
        names = row["conditions"]
        transition: dict[str, Any] = {
            "trigger": row["trigger"],
            "source": row["source"],
            "dest": row["dest"],
            "conditions": [GUARDS[name] for name in names],
        }
        if names:  # an unguarded edge has no names to record: no callback to call
            transition["after"] = partial(_took, " & ".join(names))
        if labels is not None:
            transition["label"] = labels[index]
        transitions.append(transition)
    return cls(
        model=None,
        states=[{"name": str(state), "final": state is FINAL} for state in STATES],
        transitions=transitions,
        initial=str(INITIAL),
        auto_transitions=False,  # no `to_<state>` triggers: the table's edges only
        send_event=False,  # the callbacks get the trigger's argument: the run
        queued=False,
        model_attribute=_MODEL_ATTRIBUTE,
        **options,
    )


@final
class LoopMachine:
    """The table as one `transitions.Machine`, shared by every run of a loop; each run is its
    model from its start to its end."""

    __slots__ = ("_machine",)

    def __init__(self, rows: Sequence[TransitionRow] = TRANSITIONS) -> None:
        self._machine = build(_PhaseMachine, rows)

    @property
    def runs(self) -> int:
        """How many runs are models of the machine now (runs in flight)."""
        return len(self._machine.models)

    def start(self, state: RunState) -> RunModel:
        """Add a run to the machine in the phase its state is in; `end` must follow.

        Raises:
            InvalidTransition: the state's phase is not a state of the table.
        """
        run = RunModel(state)
        try:
            self._machine.add_model(run, initial=str(state.phase))
        except ValueError as exc:  # the machine knows no such state; the run was not added
            raise InvalidTransition(f"{state.phase!r} is not a state of the table") from exc
        return run

    def fire(self, run: RunModel, trigger: Trigger) -> str | None:
        """Fire `trigger` for `run`: the machine moves its phase along the edge whose guards pass.

        Returns:
            The guard names of the edge taken (None: unguarded).

        Raises:
            InvalidTransition: no edge accepts the trigger in the run's phase with its facts.
        """
        run.guard = None  # an unguarded edge leaves it so
        try:
            moved = self._machine.events[trigger].trigger(run, run)
        except MachineError as exc:  # no edge leaves this phase on this trigger
            raise InvalidTransition(f"no transition for {trigger!r} from {run.phase!r}") from exc
        if not moved:  # edges leave this phase on this trigger, but no guard passed
            raise InvalidTransition(
                f"no transition for {trigger!r} from {run.phase!r} with state {run.state!r}"
            )
        run.state.phase = _PHASES[run.phase]
        return run.guard

    def end(self, run: RunModel) -> None:
        """Remove a run from the machine (it ended: stopped, failed or cancelled)."""
        self._machine.remove_model(run)
