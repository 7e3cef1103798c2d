"""A step's exception as DBOS records it: portable, and replayed as the same failure.

DBOS pickles what a step raises and unpickles it when the step is replayed. Many exceptions do
not survive that: `anthropic.APIStatusError` and `httpx.HTTPStatusError` take keyword-only
arguments their unpickling does not pass, and a response object inside one may not pickle at
all. So a step never lets its exception reach DBOS as it is: it raises a `StepFailure` holding
the exception's class (by reference), its `args`, the attributes that pickle and its text.

Where the step was called, `StepFailure.rebuilt()` gives back the exception to raise: the
original object on the first execution, and on a replay the same class rebuilt without calling
its `__init__` (`args` and the picklable attributes restored), so `type(exc).__name__`,
`str(exc)` and `isinstance` checks are what they were. A class that cannot be rebuilt (a local
class, a constructor that refuses) replays as a `ReplayedError` subclass of the same name and
text: what the model is told about the failure is the same either way.
"""

from __future__ import annotations

import pickle
from typing import Any, Final, final

_STAND_INS: Final[dict[str, type[ReplayedError]]] = {}


class ReplayedError(Exception):
    """A recorded step exception whose own class could not be rebuilt on replay.

    Its subclass carries the original class's name and its message is the original text, so
    the loop reports it to the model as it reported the original.
    """


class WorkflowInterrupted(BaseException):
    """DBOS itself stopped a step (the workflow was cancelled, another execution owns it, the
    system database failed): not a tool or model failure, so the loop must not report it as one.

    A `BaseException`, so it passes the loop's tool and model boundaries; the workflow unwraps
    it and raises `error`, the DBOS exception, for DBOS to handle.
    """

    def __init__(self, error: Exception) -> None:
        super().__init__(f"{type(error).__name__}: {error}")
        self.error = error


def _picklable(value: object) -> bool:
    try:
        pickle.dumps(value)
    except Exception:
        return False
    return True


def stand_in(name: str) -> type[ReplayedError]:
    """The `ReplayedError` subclass named `name` (one class per name)."""
    cls = _STAND_INS.get(name)
    if cls is None:
        cls = type(name, (ReplayedError,), {"__module__": __name__, "__qualname__": name})
        _STAND_INS[name] = cls
    return cls


def _restore(payload: dict[str, Any]) -> StepFailure:
    return StepFailure(payload)


@final
class StepFailure(Exception):
    """What a step raised, in a form DBOS can record and replay (see the module's docstring)."""

    def __init__(self, payload: dict[str, Any], original: Exception | None = None) -> None:
        super().__init__(f"{payload['name']}: {payload['text']}")
        self.payload = payload
        self._original = original

    @classmethod
    def of(cls, exc: Exception) -> StepFailure:
        """The record of `exc`, holding `exc` itself for the execution that raised it."""
        kind = type(exc)
        args = exc.args if _picklable(exc.args) else (str(exc),)
        state = {key: value for key, value in vars(exc).items() if _picklable(value)}
        payload: dict[str, Any] = {
            "cls": kind if _picklable(kind) else None,
            "name": kind.__name__,
            "args": args,
            "state": state,
            "text": str(exc),
        }
        return cls(payload, exc)

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        return _restore, (self.payload,)

    def rebuilt(self) -> Exception:
        """The exception to raise where the step was called."""
        if self._original is not None:
            return self._original
        payload = self.payload
        kind: type[Exception] | None = payload["cls"]
        if kind is not None:
            try:
                exc = kind.__new__(kind, *payload["args"])
                exc.args = payload["args"]
                vars(exc).update(payload["state"])
                if str(exc) == payload["text"]:
                    return exc
            except Exception:  # a class that will not be rebuilt this way: the stand-in below
                pass
        return stand_in(str(payload["name"]))(payload["text"])
