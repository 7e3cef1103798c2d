"""The runtime engine: the `transitions.Machine` built once from the table, fired by index.

`transitions` is typed by stubs and injects methods onto models; it is confined to this
module. The machine never awaits: the driver awaits each state's work under anyio, the work
records its facts in the run's `LoopState`, and then the driver fires the trigger, whose
guards read those facts.

Firing executes the machine's own parsed `Transition` objects, indexed once by (source,
trigger): their `Condition`s are checked in table order and the state attribute that
`transitions` maintains on the model is set. It skips what the loop never uses of
`Event.trigger` — callback lists (all empty; the build checks it), the event queue and
debug logging — which costs ~15-20 µs per transition against ~1 µs. `Event.trigger` stays
the oracle: tests/statemachine/test_table.py proves both agree on every state and fact.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, TypeAlias, cast, final

from transitions import Event, Machine

from ..statemachine.guards import GUARDS, Facts
from ..statemachine.table import FINAL, INITIAL, STATES, TRANSITIONS, Phase, Trigger

MODEL_ATTRIBUTE: Final = "phase"
_Edge: TypeAlias = tuple[tuple[tuple[Callable[[Facts], bool], bool], ...], Phase, str | None]
"""((guard, expected value), ...), dest, the guard's name for the trace."""


class InvalidTransition(RuntimeError):
    """No edge of the table accepts the trigger in the current state: a bug in boundloop."""


def _resolved_rows() -> list[dict[str, Any]]:
    return [
        {
            "trigger": row["trigger"],
            "source": row["source"],
            "dest": row["dest"],
            "conditions": [GUARDS[name] for name in row["conditions"]],
        }
        for row in TRANSITIONS
    ]


@final
class StateMachine:
    """The loop's table as a `transitions.Machine`, fired for any number of runs at once."""

    __slots__ = ("_compiled", "_events", "_machine")

    def __init__(self) -> None:
        self._machine = Machine(
            model=None,
            states=[{"name": str(state), "final": state is FINAL} for state in STATES],
            transitions=_resolved_rows(),
            initial=str(INITIAL),
            auto_transitions=False,
            send_event=False,
            queued=False,
            model_attribute=MODEL_ATTRIBUTE,
        )
        # The one cast: the stubs type `events` loosely.
        self._events = cast(Mapping[str, Event], self._machine.events)
        self._compiled = self._compile()

    def _compile(self) -> dict[tuple[str, str], tuple[_Edge, ...]]:
        """Index the machine's parsed transitions by (source, trigger), in table order."""
        machine = self._machine
        hooks: tuple[object, ...] = (
            machine.prepare_event,
            machine.before_state_change,
            machine.after_state_change,
            machine.finalize_event,
            machine.on_exception,
            *(machine.get_state(str(state)).on_enter for state in STATES),
            *(machine.get_state(str(state)).on_exit for state in STATES),
        )
        names = {guard: name for name, guard in GUARDS.items()}
        compiled: dict[tuple[str, str], tuple[_Edge, ...]] = {}
        for trigger, event in self._events.items():
            for source, transitions in event.transitions.items():
                edges: list[_Edge] = []
                for transition in transitions:
                    hooks += (transition.prepare, transition.before, transition.after)
                    conditions = tuple(
                        (cast(Callable[[Facts], bool], condition.func), bool(condition.target))
                        for condition in transition.conditions
                    )
                    label = " & ".join(names[func] for func, _ in conditions) or None
                    assert transition.dest is not None  # no internal transitions in the table
                    edges.append((conditions, Phase(transition.dest), label))
                compiled[(source, trigger)] = tuple(edges)
        if any(hooks):
            raise RuntimeError("the engine needs a machine without callbacks")
        return compiled

    def start(self, run: Facts, initial: Phase = INITIAL) -> None:
        """Put a run in `initial` (a new run's first state, or where a saved run was) for `fire`.

        The run is not registered with the machine: `fire` needs only its state attribute.
        `Machine.add_model` injects a dozen methods per run and `remove_model` searches a list
        of every run in flight: a third of a one-turn run, and quadratic in concurrent runs.

        Raises:
            InvalidTransition: `initial` is not a state of the table.
        """
        if initial not in STATES:
            raise InvalidTransition(f"{initial!r} is not a state of the table")
        setattr(run, MODEL_ATTRIBUTE, Phase(initial))

    def add(self, run: Facts, initial: Phase = INITIAL) -> None:
        """Register a run with the machine in `initial`, for `trigger` (the oracle)."""
        self._machine.add_model(run, initial=str(initial))

    def remove(self, run: Facts) -> None:
        """Unregister a run added with `add`."""
        self._machine.remove_model(run)

    def fire(self, run: Facts, trigger: Trigger) -> tuple[Phase, str | None]:
        """Fire `trigger` for `run`: the edge `step` finds, and the run's state attribute set to it.

        Returns:
            The state the run is in afterwards, and the guard that let it go (None: unguarded).

        Raises:
            InvalidTransition: no edge accepts the trigger with the run's facts.
        """
        dest, label = self.step(run, getattr(run, MODEL_ATTRIBUTE), trigger)
        setattr(run, MODEL_ATTRIBUTE, dest)
        return dest, label

    def step(self, run: Facts, source: str, trigger: Trigger) -> tuple[Phase, str | None]:
        """The edge `trigger` takes from `source` with `run`'s facts; the caller moves the run.

        Returns:
            The destination, and the guard that let it go (None: unguarded).

        Raises:
            InvalidTransition: no edge accepts the trigger with the run's facts.
        """
        for conditions, dest, label in self._compiled.get((source, trigger), ()):
            if all(guard(run) == target for guard, target in conditions):
                return dest, label
        raise InvalidTransition(f"no transition for {trigger!r} from {source!r} with state {run.state!r}")

    def trigger(self, run: Facts, trigger: Trigger) -> bool:
        """Fire through `Event.trigger` itself: the oracle the tests compare `fire` with."""
        # Guards receive the run as the trigger's argument.
        return bool(self._events[trigger].trigger(run, run))

    @property
    def machine(self) -> Machine:
        """The underlying machine, for diagram rendering."""
        return self._machine
