"""The driver's machine: `transitions.Machine` built once from the table.

`transitions` is typed by stubs and injects methods onto models; it is confined to this
module. The machine never awaits: the driver awaits each state's work under anyio, stores
the outcome as the run's verdict and then fires the trigger, whose guards read the verdict.

Two engines execute the machine's transitions:

- `"compiled"` (default): the machine's own parsed `Transition` objects, indexed once by
  (source, trigger); firing checks their `Condition`s in table order and sets the state
  attribute that `transitions` maintains on the model. It skips what the loop never uses of
  `Event.trigger`: callback lists (all empty; checked at build time), the event queue and
  debug logging, which cost ~17-20 µs per transition on the reference machine against ~1 µs.
- `"transitions"`: `Event.trigger` itself, every time.

Both are the same table and the same guard objects; tests/statemachine/test_table.py
proves they agree on every state, trigger and verdict, and the trajectory tests run on both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, TypeAlias, cast, final

from transitions import Event, Machine

from .guards import GUARDS, HasVerdict, Verdict
from .table import FINAL, INITIAL, STATES, TRANSITIONS, Phase, Trigger

MODEL_ATTRIBUTE: Final = "phase"
Engine: TypeAlias = Literal["compiled", "transitions"]
_Edge: TypeAlias = tuple[tuple[tuple[Any, bool], ...], Phase]
"""((condition predicate, expected value), ...), dest."""


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


def _guard_names() -> dict[tuple[str, str, Verdict], str | None]:
    """(source, trigger, verdict) -> the guard of the row that accepts it, for the trace."""
    names: dict[tuple[str, str, Verdict], str | None] = {}
    for row in TRANSITIONS:
        for verdict in Verdict:
            key = (row["source"], row["trigger"], verdict)
            probe = _Probe(verdict)
            if key not in names and all(GUARDS[name](probe) for name in row["conditions"]):
                names[key] = " & ".join(row["conditions"]) or None
    return names


@final
class _Probe:
    __slots__ = ("verdict",)

    def __init__(self, verdict: Verdict) -> None:
        self.verdict = verdict


@final
class StateMachine:
    """The loop's table as a `transitions.Machine`; each run is a model added and removed."""

    __slots__ = ("_compiled", "_events", "_guards", "_machine", "engine")

    def __init__(self, engine: Engine = "compiled") -> None:
        if engine not in ("compiled", "transitions"):
            raise ValueError(f"engine must be 'compiled' or 'transitions', got {engine!r}")
        self.engine: Engine = engine
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
        self._guards = _guard_names()

    def _compile(self) -> dict[tuple[str, str], tuple[_Edge, ...]]:
        """Index the machine's parsed transitions by (source, trigger), in table order."""
        machine = self._machine
        hooks = (
            machine.prepare_event,
            machine.before_state_change,
            machine.after_state_change,
            machine.finalize_event,
            machine.on_exception,
            *(machine.get_state(str(state)).on_enter for state in STATES),
            *(machine.get_state(str(state)).on_exit for state in STATES),
        )
        compiled: dict[tuple[str, str], tuple[_Edge, ...]] = {}
        for trigger, event in self._events.items():
            for source, transitions in event.transitions.items():
                edges: list[_Edge] = []
                for transition in transitions:
                    hooks += (transition.prepare, transition.before, transition.after)
                    conditions = tuple(
                        (condition.func, condition.target) for condition in transition.conditions
                    )
                    assert transition.dest is not None  # no internal transitions in the table
                    edges.append((conditions, Phase(transition.dest)))
                compiled[(source, trigger)] = tuple(edges)
        if any(hooks):
            raise RuntimeError("the compiled engine needs a machine without callbacks")
        return compiled

    def add(self, run: HasVerdict) -> None:
        """Start a run in the initial state."""
        self._machine.add_model(run, initial=str(INITIAL))

    def remove(self, run: HasVerdict) -> None:
        """Forget a run (always called in a `finally`)."""
        self._machine.remove_model(run)

    def fire(self, run: HasVerdict, trigger: Trigger) -> Phase:
        """Fire `trigger` for `run` and return the state it is in afterwards.

        Raises:
            InvalidTransition: no edge accepts the trigger with the run's verdict.
        """
        source: str = getattr(run, MODEL_ATTRIBUTE)
        if self.engine == "compiled":
            for conditions, dest in self._compiled.get((source, trigger), ()):
                if all(predicate(run) == target for predicate, target in conditions):
                    setattr(run, MODEL_ATTRIBUTE, str(dest))
                    return dest
        # Guards receive the run as the trigger's argument.
        elif self._events[trigger].trigger(run, run):
            return Phase(getattr(run, MODEL_ATTRIBUTE))
        raise InvalidTransition(f"no transition for {trigger!r} from {source!r} with verdict {run.verdict}")

    def guard(self, source: str, trigger: str, verdict: Verdict) -> str | None:
        """The guard that let `trigger` leave `source` under `verdict` (None: an unguarded edge)."""
        return self._guards.get((source, trigger, verdict))

    @property
    def machine(self) -> Machine:
        """The underlying machine, for diagram rendering."""
        return self._machine
