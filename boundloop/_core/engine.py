"""The runtime engine: the transition table indexed by (source, trigger), fired by look-up.

The engine is built from the rows of `statemachine/table.py` and the guards of
`statemachine/guards.py`, our own data; it never awaits. The driver awaits each state's work
under anyio, the work records its facts in the run's `LoopState`, and then the driver asks the
engine for the edge its trigger takes: the first row of that (source, trigger) whose guards all
pass, in table order.

`transitions.Machine`, built from the same rows, is the oracle: tests/statemachine/test_table.py
proves the engine and `Event.trigger` agree on every state, trigger and fact, and the diagrams
(`statemachine/diagram.py`) are drawn by it. The runtime does not import `transitions`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias, final

from ..statemachine.guards import GUARDS, Facts, Guard
from ..statemachine.table import STATES, TRANSITIONS, Phase, TransitionRow, Trigger

_Edge: TypeAlias = tuple[tuple[Guard, ...], Phase, str | None]
"""(the guards that must all pass, dest, the guards' names for the trace)."""


class InvalidTransition(RuntimeError):
    """No edge of the table accepts the trigger in the current state: a bug in boundloop."""


def _index(rows: Sequence[TransitionRow]) -> dict[tuple[Phase, Trigger], tuple[_Edge, ...]]:
    """The rows by (source, trigger), each group in table order."""
    index: dict[tuple[Phase, Trigger], list[_Edge]] = {}
    for row in rows:
        names = row["conditions"]
        edge: _Edge = (tuple(GUARDS[name] for name in names), Phase(row["dest"]), " & ".join(names) or None)
        index.setdefault((Phase(row["source"]), Trigger(row["trigger"])), []).append(edge)
    return {key: tuple(edges) for key, edges in index.items()}


@final
class StateMachine:
    """The loop's table as an index, fired for any number of runs at once; holds no run."""

    __slots__ = ("_index",)

    def __init__(self, rows: Sequence[TransitionRow] = TRANSITIONS) -> None:
        self._index = _index(rows)

    @staticmethod
    def check(phase: str) -> Phase:
        """`phase` as a state of the table (a new run's first state, or where a saved run was).

        Raises:
            InvalidTransition: `phase` is not a state of the table.
        """
        if phase not in STATES:
            raise InvalidTransition(f"{phase!r} is not a state of the table")
        return Phase(phase)

    def edge(self, run: Facts, source: Phase, trigger: Trigger) -> tuple[Phase, str | None]:
        """The edge `trigger` takes from `source` with `run`'s facts; the caller moves the run.

        Returns:
            The destination, and the guard(s) that let it go (None: unguarded).

        Raises:
            InvalidTransition: no edge accepts the trigger with the run's facts.
        """
        for guards, dest, label in self._index.get((source, trigger), ()):
            for guard in guards:
                if not guard(run):
                    break
            else:  # every guard holds (or there is none)
                return dest, label
        raise InvalidTransition(f"no transition for {trigger!r} from {source!r} with state {run.state!r}")
