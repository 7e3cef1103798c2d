"""The driver's machine: `transitions.Machine` built once from the table.

`transitions` is typed by stubs and injects methods onto models; it is confined to this
module. The machine never awaits: the driver awaits each state's work under anyio, stores
the outcome as the run's verdict and then fires the trigger, whose guards read the verdict.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, cast, final

from transitions import Event, Machine

from .guards import GUARDS, HasVerdict
from .table import FINAL, INITIAL, STATES, TRANSITIONS, Phase, Trigger

MODEL_ATTRIBUTE: Final = "phase"


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
    """The loop's table as a `transitions.Machine`; each run is a model added and removed."""

    __slots__ = ("_events", "_machine")

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
        # Guards receive the run as the trigger's argument.
        if not self._events[trigger].trigger(run, run):
            raise InvalidTransition(
                f"no transition for {trigger!r} from {getattr(run, MODEL_ATTRIBUTE)!r} "
                f"with verdict {run.verdict}"
            )
        return Phase(getattr(run, MODEL_ATTRIBUTE))

    @property
    def machine(self) -> Machine:
        """The underlying machine, for diagram rendering."""
        return self._machine
