"""The exception hierarchy.

```
LoopError
├── ConfigurationError (ValueError)    misuse, raised at construction (SetupError: at a model call)
│   ├── ContractError                  a loop contract breaks its schema or the loop's rules
│   ├── InvalidTaskId                  a task id is empty, too long, or holds a control character
│   └── SetupError                     a model call found the setup wrong: no API key, a refused key, no model
├── FixtureError (ValueError)          an eval fixture is invalid (every problem, field named)
├── GraphvizMissing (RuntimeError)     a diagram format needs graphviz and it is not installed
├── EventLoopRunning (RuntimeError)    run_sync() called where an event loop runs: await run() there
├── ScriptExhausted                    ScriptedClient asked for more responses than scripted
├── UnhandledStop                      the API sent a stop_reason no signal handler is declared for
├── TaskExists                         run(task_id=...) names a task already in the store
├── TaskBusy                           run() or resume() of a task another holder runs right now
├── TaskNotFound (KeyError)            resume() or replay names a task the store does not hold
├── NotResumable                       resume() of a run whose stop is final (completed, a budget, ...)
├── ApprovalMissing                    resume() without a decision for every call waiting on a human
├── CheckpointCorrupt (ValueError)     a stored state does not parse, is inconsistent or fails its signature
├── EventExists                        an event log already holds an event of this task with this seq
└── RunError                           a run ended other than completed (raised by unwrap())
    ├── BudgetExceeded                 max_steps, max_tool_calls, timeout, token or cost budget
    ├── RunFailed                      the model API failed or sent an unusable response
    ├── Refused                        the model refused (stop_reason refusal)
    ├── NeedsHuman                     approval needed, circuit breaker open, repeats
    ├── RunCancelled                   the caller's cancel event was set
    ├── PolicyBlocked                  the model proposed a forbidden tool
    ├── EvidenceMissing                a final answer came before the required evidence
    ├── Truncated                      the model hit max_tokens
    ├── ToolFailed                     a tool failed after its retries, with on_tool_error="stop"
    └── ContextExceeded                the model's context window was exceeded
```

Developer misuse (`ConfigurationError`) and run outcomes (`RunError`) are separate families.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .state import LoopResult

__all__ = [
    "ApprovalMissing",
    "BudgetExceeded",
    "CheckpointCorrupt",
    "ConfigurationError",
    "ContextExceeded",
    "ContractError",
    "EventExists",
    "EventLoopRunning",
    "EvidenceMissing",
    "FixtureError",
    "GraphvizMissing",
    "InvalidOutput",
    "InvalidRequest",
    "InvalidTaskId",
    "LoopError",
    "NeedsHuman",
    "NotResumable",
    "PolicyBlocked",
    "Refused",
    "RunCancelled",
    "RunError",
    "RunFailed",
    "ScriptExhausted",
    "SetupError",
    "TaskBusy",
    "TaskExists",
    "TaskNotFound",
    "ToolFailed",
    "Truncated",
    "UnhandledStop",
    "error_for",
]


class LoopError(Exception):
    """Root of every boundloop exception."""


class ConfigurationError(LoopError, ValueError):
    """Raised at construction for a configuration the loop cannot run safely."""


class ContractError(ConfigurationError):
    """A loop contract breaks its schema or the loop's rules; `problems` lists each one
    (`boundloop.contract.Problem`: its rule, field and message)."""

    def __init__(self, source: str, problems: Sequence[object]) -> None:
        self.problems = list(problems)
        super().__init__(f"{source}: " + "; ".join(str(problem) for problem in self.problems))


class SetupError(ConfigurationError):
    """A model call failed because the loop is set up wrong: no API key, a key the API
    refuses, a model that does not exist. The one exception of its family raised mid-run
    (by `run()` or `resume()`, at the call that found it): the run is recorded `failed`
    first, and `result` is its `LoopResult`."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.result: LoopResult | None = None


class InvalidTaskId(ConfigurationError):
    """Raised by `run()`, `resume()` and every store for a task id no store can take: not a
    string, empty or only whitespace, longer than 200 characters, or holding a control character
    (NUL, a newline, ...) or a lone surrogate; `problem` says which."""

    def __init__(self, task_id: object, problem: str) -> None:
        self.task_id = task_id
        self.problem = problem
        shown = repr(task_id)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        super().__init__(f"task id {shown} is invalid: {problem}")


class FixtureError(LoopError, ValueError):
    """One or more eval fixtures are invalid; `problems` has one line per fault, field named.

    `unreadable` holds the problems that are files which cannot be read or are not JSON (also
    in `problems`): the command reports those as a setup error, as it does for any input file.
    """

    def __init__(self, problems: Sequence[str], *, unreadable: Sequence[str] = ()) -> None:
        self.problems = list(problems)
        self.unreadable = list(unreadable)
        super().__init__("\n".join(self.problems))


class GraphvizMissing(LoopError, RuntimeError):
    """Raised when a diagram needs graphviz (the `dot` binary or the `graphviz` package) and it is absent."""

    def __init__(self, missing: str, fix: str) -> None:
        self.missing = missing
        self.fix = fix
        super().__init__(f"{missing} not found: {fix}")


class EventLoopRunning(LoopError, RuntimeError):
    """Raised by `AgentLoop.run_sync` called in a thread whose event loop is running (async
    code, a notebook's cell run as a task): there, `await loop.run(...)`."""

    def __init__(self, library: str) -> None:
        self.library = library
        super().__init__(
            f"run_sync() cannot run inside the running {library} event loop: use `await loop.run(...)`"
        )


class ScriptExhausted(LoopError):
    """Raised by `ScriptedClient` when a request arrives after the last scripted response."""

    def __init__(self, served: int) -> None:
        self.served = served
        super().__init__(
            f"ScriptedClient ran out of responses after {served}; script one more or lower the budget"
        )


class UnhandledStop(LoopError):
    """Raised from `run()` when the API returns a stop_reason with no declared signal handler."""

    def __init__(self, stop_reason: str | None) -> None:
        self.stop_reason = stop_reason
        self.result: LoopResult[Any] | None = None
        """The partial result, with the run recorded as failed."""
        super().__init__(
            f"no handler for stop_reason {stop_reason!r}; pass signal_handlers={{...}} to route it"
        )


class TaskExists(LoopError):
    """Raised by `run()` when `task_id` is already in the store: a run is never overwritten."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(
            f"task {task_id!r} is already in the store: resume it with loop.resume({task_id!r}) "
            "or start a new run with another task_id"
        )


class TaskBusy(LoopError):
    """Raised by `run()`, `resume()` and a store's `lease()` when another holder (a worker, or a
    run in this process) holds the task's lease: it runs the task right now, so this one does not."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(
            f"task {task_id!r} is being run by another worker (it holds the task's lease): "
            "try again once that run stops, or after its worker dies"
        )


class TaskNotFound(LoopError, KeyError):
    """Raised by `resume()` and `replay` for a task the store does not hold."""

    def __init__(self, task_id: str) -> None:
        self.task_id = task_id
        super().__init__(f"task {task_id!r} is not in the store")

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class NotResumable(LoopError):
    """Raised by `resume()` for a run whose stop is final: completed, a spent budget, a block."""

    def __init__(self, task_id: str, stop_reason: str, detail: str | None = None) -> None:
        self.task_id = task_id
        self.stop_reason = stop_reason
        super().__init__(
            f"task {task_id!r} stopped with {stop_reason}"
            + (f" ({detail})" if detail else "")
            + ": only a run waiting for a human, cancelled, or interrupted mid-run can be resumed"
        )


class ApprovalMissing(LoopError):
    """Raised by `resume()` when a call waiting on a human has no decision; the run keeps waiting."""

    def __init__(self, task_id: str, problem: str) -> None:
        self.task_id = task_id
        super().__init__(f"task {task_id!r} keeps waiting: {problem}")


class CheckpointCorrupt(LoopError, ValueError):
    """Raised by a store when a saved state does not parse, has a schema version it cannot read,
    is inconsistent (a counter below what the state records, a negative or non-finite number,
    a turn whose lists do not match its calls), or fails its signature (`SignedStore`).

    `field` names the field at fault (`tool_calls`, `turn.answers`, `signature`, ...), or is
    None when the row does not parse at all."""

    def __init__(self, task_id: str, problem: str, *, field: str | None = None) -> None:
        self.task_id = task_id
        self.field = field
        detail = problem if field is None else f"{field}: {problem}"
        super().__init__(f"the checkpoint of task {task_id!r} cannot be read: {detail}")


class EventExists(LoopError):
    """Raised by an event log's `append` for an event whose `(task_id, seq)` it holds already:
    nothing of that append is kept (a log never holds a `seq` twice)."""

    def __init__(self, task_id: str, seq: int) -> None:
        self.task_id = task_id
        self.seq = seq
        super().__init__(f"the event log of task {task_id!r} already holds seq {seq}")


class RunError(LoopError):
    """Base of the outcomes `LoopResult.unwrap()` raises; `.result` is the partial result."""

    def __init__(self, result: LoopResult[Any]) -> None:
        self.result = result
        detail = result.state.stop_detail
        super().__init__(f"run stopped: {result.stop_reason}" + (f" ({detail})" if detail else ""))


class BudgetExceeded(RunError):
    """A budget was spent: `.limit` names it (its `Budget` field), `.value` is the configured number,
    `.used` the use, `.pool` the budget pool whose ceiling it was (None: the run's own budget or
    its tree's). `limit` names the field when the state records no `exceeded`."""

    def __init__(self, result: LoopResult[Any], limit: str | None = None) -> None:
        exceeded = result.state.exceeded
        self.limit: str = (limit or str(result.stop_reason)) if exceeded is None else exceeded.limit
        self.value: float | None = None if exceeded is None else exceeded.value
        self.used: float | None = None if exceeded is None else exceeded.used
        self.pool: str | None = None if exceeded is None else exceeded.pool
        super().__init__(result)


class RunFailed(RunError):
    """The model API failed, or sent a response the loop cannot use."""


class Refused(RunError):
    """The model refused to continue (`stop_reason: refusal`)."""


class NeedsHuman(RunError):
    """A human must decide: a call needs approval, or the circuit breaker opened."""


class RunCancelled(RunError):
    """The run was cancelled cooperatively through its cancel event."""


class PolicyBlocked(RunError):
    """The model proposed a forbidden tool and the policy stops the run."""


class EvidenceMissing(RunError):
    """The model answered before the evidence the policy requires existed."""


class Truncated(RunError):
    """The model ran out of output tokens (`stop_reason: max_tokens`)."""


class ToolFailed(RunError):
    """A tool failed after its retries and `Policy(on_tool_error="stop")` ends the run."""


class ContextExceeded(RunError):
    """The model's context window was exceeded."""


class InvalidOutput(RunError):
    """The final answer was blank, or did not match `output_type`, after one corrective turn."""


_BY_REASON: dict[str, type[RunError]] = {
    "failed": RunFailed,
    "refused": Refused,
    "needs_human": NeedsHuman,
    "cancelled": RunCancelled,
    "policy_blocked": PolicyBlocked,
    "evidence_missing": EvidenceMissing,
    "truncated": Truncated,
    "context_exceeded": ContextExceeded,
    "tool_failure": ToolFailed,
    "invalid_output": InvalidOutput,
}
"""The exception of each stop reason but a budget's (`LoopResult.unwrap` raises `BudgetExceeded`
for those, with the `Limit` behind it)."""


def error_for(result: LoopResult[Any]) -> RunError:
    """The typed exception for a result that did not complete, at no budget."""
    return _BY_REASON[result.stop_reason](result)


class InvalidRequest(LoopError):
    """A request the loop built breaks a rule of the Messages API (`_core/invariant.py`).

    A boundloop bug, never the model's or the user's: the request is not sent and the run
    stops `failed` with `problem` in its detail.
    """

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(f"boundloop built a request the API would reject (not sent): {problem}")
