"""The run's state: stop reasons, usage, typed records, `LoopState` and `LoopResult`.

`LoopState` is the run. The driver keeps nothing of its own between two states' work:
phase, counters, the current turn and its answers, the repeat history, the breaker count
and the continuation text all live here, so a state read back from JSON continues exactly
where it was saved. JSON goes through one pydantic `TypeAdapter`, with a `schema_version`.

Importing this module loads neither pydantic nor the Anthropic SDK: the adapter is built on
first use, and the transcript's and responses' fields carry their own validator and serialiser
(`boundloop._base.transcript_json`), so pydantic never builds a schema of the SDK's types.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Generic, Literal, cast, final

from typing_extensions import TypeVar

from . import errors, records
from ._base.finite import NonFinite as NonFinite
from ._base.finite import first_non_finite, strict_loads
from ._base.recorded import json_default
from ._base.transcript_json import Messages, Responses
from .records import call_digest, empty_dict, empty_list
from .statemachine.table import INITIAL, Phase

if TYPE_CHECKING:
    import pydantic
    from anthropic.types import MessageParam

    from .events import Event

__all__ = [
    "BUDGET_COUNTS",
    "CEILINGS",
    "Budget",
    "LoopResult",
    "LoopState",
    "NonFinite",
    "OutputT",
    "SCHEMA_VERSION",
    "ZERO",
    "at_ceiling",
    "non_finite",
]

SCHEMA_VERSION: Final = 1
"""The version of `LoopState`'s JSON; `LoopState.from_json` refuses any other."""


ZERO: Final = {"zero": True}
"""Field metadata of a `Budget` or `Policy` limit that may be 0 (the others must be > 0); the
contract schema reads it too (`boundloop._base.field_schema.field_schema`)."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Hard limits of one run. `max_steps` is required: there is no unbounded loop."""

    max_steps: int
    """Model calls allowed in the run (pause_turn and continuations count)."""
    max_tool_calls: int | None = dataclasses.field(default=None, metadata=ZERO)
    """Tool executions allowed in the run; each retry attempt counts."""
    max_server_tool_uses: int | None = None
    """Server tool uses (web searches, web fetches, ...: `usage.server_tool_use`) allowed in the
    run. The API runs them inside a response, so the run stops (`max_tool_calls`) before the next
    model call once they reach it; one response can go past it (the definition's `max_uses` caps
    that)."""
    timeout_s: float | None = None
    """Wall clock for the whole run, enforced with an anyio cancel scope."""
    max_total_tokens: int | None = None
    """Input + output + cache tokens over all model calls, from the API's `usage`."""
    max_cost_usd: float | None = None
    """Cost from `usage` and the price table; needs a known price for the model."""
    max_consecutive_tool_errors: int = 2
    """Failing tool results in a row that open the circuit breaker (`needs_human`)."""
    max_repeated_calls: int = dataclasses.field(default=2, metadata=ZERO)
    """Repeats of an earlier successful call tolerated; one more stops the run (`needs_human`)."""
    max_tool_retries: int = dataclasses.field(default=0, metadata=ZERO)
    """Retries of a handler that raised `RetryableToolError`."""
    max_corrections: int = dataclasses.field(default=1, metadata=ZERO)
    """Corrective turns a run gets for a blank final answer, or one that does not match
    `output_type`; the next such answer stops the run `invalid_output` (0: the first does)."""
    tool_timeout_s: float | None = None
    """Default per-tool timeout when the tool sets none."""
    retry_backoff_s: float = dataclasses.field(default=0.1, metadata=ZERO)
    """First retry delay; doubles on each further attempt."""
    on_exhausted: Literal["stop", "final_answer"] = "stop"
    """`final_answer`: when `max_steps` or `max_tool_calls` is spent, one last model call
    without tools (`tool_choice: none`) for the best answer; the stop reason stays the budget's.
    Time, tokens and cost are hard ceilings: no call is made after them."""
    max_tool_output_chars: int = 100_000
    """A longer tool result is cut to this many characters, with a visible marker, before the
    model reads it."""
    max_parallel_tools: int | None = None
    """At most this many client tool calls of one response run at once; the others wait for a
    place (a call keeps its place through its retries). None: all at once."""
    max_depth: int | None = dataclasses.field(default=None, metadata=ZERO)
    """How deep a delegation tree may grow below this run (`AgentLoop.as_tool`): the root is
    depth 0, so 2 allows a child and a grandchild; a deeper delegation is denied before it
    starts, as an error result the model reads. None: no limit but the budgets."""
    max_children: int | None = dataclasses.field(default=None, metadata=ZERO)
    """Delegated runs this run may start over its whole run; one more is denied before it
    starts, as an error result the model reads. None: no limit but the budgets."""
    count_tokens: bool = False
    """With a token or cost budget, count each request's input with the API's
    `messages.count_tokens` before the call (one more request per model call): the check that
    the next call fits the budget then reads the exact input instead of an estimate."""

    def __post_init__(self) -> None:
        def positive(name: str, value: object, *, allow_zero: bool = False) -> None:
            if value is None:
                return
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise errors.ConfigurationError(f"Budget.{name} must be a number, got {value!r}")
            if name in BUDGET_COUNTS and not isinstance(value, int):
                raise errors.ConfigurationError(f"Budget.{name} counts: it must be an int, got {value!r}")
            if math.isnan(value) or value < 0 or (value == 0 and not allow_zero):
                raise errors.ConfigurationError(f"Budget.{name} must be > 0, got {value!r}")

        if not isinstance(cast(object, self.max_steps), int) or isinstance(self.max_steps, bool):
            raise errors.ConfigurationError(f"Budget.max_steps must be an int, got {self.max_steps!r}")
        for field in dataclasses.fields(self):
            if field.name not in ("on_exhausted", "count_tokens"):
                positive(field.name, getattr(self, field.name), allow_zero=bool(field.metadata.get("zero")))
        if self.on_exhausted not in ("stop", "final_answer"):
            raise errors.ConfigurationError(
                f"Budget.on_exhausted must be 'stop' or 'final_answer', got {self.on_exhausted!r}"
            )
        if not isinstance(cast(object, self.count_tokens), bool):
            raise errors.ConfigurationError(
                f"Budget.count_tokens must be True or False, got {self.count_tokens!r}"
            )


BUDGET_COUNTS: Final = frozenset(
    field.name for field in dataclasses.fields(Budget) if field.type in ("int", "int | None")
)
"""Budget fields that count something, annotated `int`: ints only (a 1.5 retry limit is a mistake)."""


@final
@dataclasses.dataclass(slots=True, kw_only=True)
class LoopState:
    """Everything a run knows, outside the model: JSON-serialisable, enough to continue it."""

    task_id: str
    trace_id: str
    goal: str
    started_at: float
    """Epoch seconds."""
    schema_version: int = SCHEMA_VERSION
    metadata: dict[str, Any] = dataclasses.field(default_factory=empty_dict)
    """The caller's own JSON values, kept with the run."""
    provenance: records.Provenance | None = None
    """What the run was made with: the model and hashes of the system prompt, tools and policy."""
    model_settings: dict[str, Any] = dataclasses.field(default_factory=empty_dict)
    """The run's request settings (`ModelSettings` as JSON: the loop's, merged with
    `run(settings=...)`); a resumed run sends these, whatever the resuming loop has."""
    phase: Phase = INITIAL
    """The state of the machine the run is in (maintained by the driver)."""
    step: int = 0
    """Model calls made."""
    tool_calls: int = 0
    """Tool executions made (retry attempts included)."""
    elapsed_s: float = 0.0
    """Wall-clock seconds spent in earlier sessions of this run (before a resume)."""
    usage: records.Usage = dataclasses.field(default_factory=records.Usage)
    messages: Messages = dataclasses.field(default_factory=empty_list)
    """The transcript, as Messages API params in plain JSON; assistant turns exactly as received."""
    opening: int = 1
    """How many messages the run started from (the goal, or the caller's history)."""
    responses: Responses = dataclasses.field(default_factory=empty_list)
    """Every model response, for replay: what the API sent, as JSON (`records.ModelResponse`;
    its content is the transcript's assistant turn, not a copy). `content` and `usage` read as
    the SDK's objects, `message()` builds the SDK `Message`."""
    turn: records.Turn | None = None
    """The latest response's tool calls and their answers (decided in validate, filled in act)."""
    observations: list[records.Observation] = dataclasses.field(default_factory=empty_list)
    """One record per answered tool_use, in order."""
    succeeded: dict[str, int] = dataclasses.field(default_factory=empty_dict)
    """Repeat history: a call's digest (of its tool and canonical input) -> the index of its
    successful observation. A digest, not the input: a checkpoint keeps no copy of it."""
    errors: list[records.ErrorRecord] = dataclasses.field(default_factory=empty_list)
    """Model API failures, invalid actions and tool errors, in order."""
    pending_approvals: list[records.PendingApproval] = dataclasses.field(default_factory=empty_list)
    """Tool calls waiting for a human decision (`needs_human`); `resume(approvals=...)` decides."""
    escalation: records.Escalation | None = None
    """The model asked for a human (`Policy.escalation_tool`); `resume(reply=...)` answers."""
    consecutive_tool_errors: int = 0
    """Failing tool results in a row: the circuit breaker's count."""
    repeated_calls: int = 0
    """Calls answered from the repeat history."""
    continuations: int = 0
    """max_tokens continuations and evidence nudges used."""
    corrections: int = 0
    """Corrective turns sent for a blank final answer or one that does not match the output
    type (at most one: the next such answer stops the run with `invalid_output`)."""
    earlier_text: str = ""
    """Text of the current assistant turn before a pause_turn / max_tokens continuation."""
    exceeded: records.Exceeded | None = None
    """The limit found spent (a budget, or the breaker's counts): why the run stops or concludes."""
    final_call_due: bool = False
    """`on_exhausted="final_answer"`: one last model call without tools is still to be made."""
    stop_reason: records.StopReason | None = None
    stop_detail: str | None = None
    """Why, in one line: the limit hit, the blocked tool, the API error."""
    answer: str | None = None
    next_seq: int = 0
    """The `seq` of the run's next event: the event stream goes on across resumes."""
    parent_task_id: str | None = None
    """The run that started this one as a delegation (`AgentLoop.as_tool`); None for a root."""
    children: list[str] = dataclasses.field(default_factory=empty_list)
    """The task ids of the runs this run started as delegations, in the order they started."""
    waiting_on: dict[str, str] = dataclasses.field(default_factory=empty_dict)
    """The calls of `pending_approvals` that are not this run's but a delegated run's below it
    (the tree waits for them): tool_use_id -> the task id of the run whose call it is."""
    below: dict[str, records.Usage] = dataclasses.field(default_factory=empty_dict)
    """What each run this run delegated to spent, with the runs below it, as it last answered
    (its task id -> that usage): the tree's spend across sessions, from which a resumed run's
    tree ledger starts."""
    pools: list[str] = dataclasses.field(default_factory=empty_list)
    """The names of the budget pools the run has reserved from (the loop's, the run's, its
    tree's), sorted: a resume not given each of them again is refused (a tree's are its root's)."""
    signature: str | None = None
    """HMAC-SHA256 of the rest of the state, in a `SignedStore`
    (which verifies it on load); a loop without a key ignores it."""

    def to_dict(self) -> dict[str, Any]:
        """The state as a JSON object."""
        return _adapter().dump_python(self, mode="json")  # type: ignore[no-any-return]

    def to_json(self) -> str:
        """The state as a JSON string (`from_json` reads it back).

        Raises:
            ValueError: a number JSON cannot hold (NaN, an infinity): never written, as the
                row could not be read back.
        """
        found = non_finite(self)
        if found is not None:
            raise ValueError(f"LoopState.{found[0]}: {found[1]}; JSON cannot hold it")
        return _adapter().dump_json(self).decode()

    @classmethod
    def from_json(cls, text: str | bytes) -> LoopState:
        """Rebuild a state written by `to_json`.

        Raises:
            ValueError: not a state, or one written with another `schema_version`.
            boundloop._base.finite.NonFinite: a `ValueError`: NaN or Infinity in it (JSON has no
                such number); `.field` says where.
        """
        try:
            raw = strict_loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"LoopState JSON does not parse: {exc}") from None
        if not isinstance(raw, dict):
            raise ValueError("LoopState JSON must be an object")
        version = raw.get("schema_version")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        if version != SCHEMA_VERSION:
            raise ValueError(f"LoopState schema_version {version!r} is not {SCHEMA_VERSION}")
        import pydantic

        try:
            state = _adapter().validate_python(raw)
        except pydantic.ValidationError as exc:
            raise ValueError(f"not a LoopState: {exc}") from None
        _digest_old_keys(state)
        return state


def _digest_old_keys(state: LoopState) -> None:
    """Repeat-history keys saved as `tool NUL input JSON` (before they were digests) as the
    digests a run compares now, so a resumed run still knows the calls made before."""
    if any("\x00" in key for key in state.succeeded):
        state.succeeded = {
            call_digest(key) if "\x00" in key else key: index for key, index in state.succeeded.items()
        }
    if state.turn is not None:
        state.turn.keys = [call_digest(key) if "\x00" in key else key for key in state.turn.keys]


CEILINGS: Final = frozenset(
    {records.StopReason.COST_BUDGET, records.StopReason.TOKEN_BUDGET, records.StopReason.MAX_STEPS}
)
"""The stops at a ceiling (the run's own budget, its tree's, a budget pool's) that `resume` goes
on from once the ceiling is raised."""


def at_ceiling(state: LoopState) -> bool:
    """The run stopped at a ceiling before a model call, its transcript ending with a user turn
    (the goal, or tool results): `resume` can go on from there once the ceiling is raised, and
    nothing that ran runs again. A run that made its final answer at the limit cannot."""
    messages = state.messages
    return (
        state.stop_reason in CEILINGS
        and state.phase is Phase.STOPPED
        and bool(messages)
        and messages[-1]["role"] == "user"
        and not state.pending_approvals
        and (state.turn is None or not state.turn.open)
    )


def non_finite(state: LoopState) -> tuple[str, str] | None:
    """The first float of the state JSON cannot hold (NaN, an infinity), as (field, problem)."""
    floats: list[tuple[str, float | None]] = [
        ("started_at", state.started_at),
        ("elapsed_s", state.elapsed_s),
        ("usage.cost_usd", state.usage.cost_usd),
        ("usage.cache_savings_usd", state.usage.cache_savings_usd),
    ]
    if state.exceeded is not None:
        floats += [("exceeded.value", state.exceeded.value), ("exceeded.used", state.exceeded.used)]
    for task_id, usage in state.below.items():
        floats += [(f"below[{task_id!r}].cost_usd", usage.cost_usd)]
    if state.turn is not None:
        answers = enumerate(state.turn.answers)
        floats += [(f"turn.answers[{i}].duration_s", a.duration_s) for i, a in answers if a is not None]
    return first_non_finite(floats)


@functools.cache
def _adapter() -> pydantic.TypeAdapter[LoopState]:
    """Built on first use: building it costs milliseconds (and pydantic's import) that an import
    of boundloop should not pay."""
    import pydantic

    return pydantic.TypeAdapter(LoopState)


OutputT = TypeVar("OutputT", default=str)
"""The type of `LoopResult.output`: `AgentLoop(output_type=...)`'s type; `str` without one."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LoopResult(Generic[OutputT]):
    """The outcome of `AgentLoop.run`: a typed stop reason, the answer, the state and the events.

    `LoopResult[T]`: with `AgentLoop(output_type=T)`, `output` is the answer validated as a `T`.
    """

    stop_reason: records.StopReason
    answer: str | None
    state: LoopState
    events: Sequence[Event]
    """What happened in this session, in order (`boundloop.events`). A run that nothing heard as
    it ran (no hook, tracing, stream or store) builds some events when they are first read, from
    its record: its tool results from `state.observations` (read them before you edit those)."""
    output: OutputT | None = None
    """The answer validated against the loop's `output_type` (a pydantic model instance, a
    TypedDict's dict, a JSON schema's JSON value); without one, the answer's text. None when
    the answer is blank or does not validate (a `completed` run always has one)."""
    tree_usage: records.Usage | None = None
    """The run's usage plus that of every run it delegated to, down the tree (`usage`); None
    when it delegated to none."""

    @property
    def messages(self) -> list[MessageParam]:
        """The full transcript as Messages API params."""
        return self.state.messages

    @property
    def usage(self) -> records.Usage:
        """Tokens and cost of the run and of the runs it delegated to, down the tree (the run's
        own: `state.usage`)."""
        return self.state.usage if self.tree_usage is None else self.tree_usage

    @property
    def ok(self) -> bool:
        """True when the run completed."""
        return self.stop_reason is records.StopReason.COMPLETED

    @property
    def resumable(self) -> bool:
        """`resume(task_id, ...)` can go on with this run: it waits for a human, a person
        cancelled it, or it stopped at a ceiling (its budget's, its tree's, a pool's) before a
        model call, and goes on once the ceiling is raised (`resume(task_id, budget=...)`). The
        loop must keep its runs in a store to resume one."""
        state = self.state
        if self.stop_reason is records.StopReason.NEEDS_HUMAN:
            return state.turn is not None and state.turn.awaiting_human
        if self.stop_reason is records.StopReason.CANCELLED:
            return (
                not state.pending_approvals
                and state.escalation is None
                and (state.turn is None or not state.turn.open)
            )
        return at_ceiling(state)

    def unwrap(self) -> str:
        """Return the answer of a completed run.

        Returns:
            The final answer text.

        Raises:
            BudgetExceeded: the run stopped at a budget.
            RunFailed, Refused, NeedsHuman, RunCancelled, PolicyBlocked, EvidenceMissing,
                Truncated, ContextExceeded: the run stopped for that reason.
        """
        if self.stop_reason is records.StopReason.COMPLETED:
            return self.answer or ""
        limit = records.Limit.stopping(self.stop_reason)
        if limit is not None:
            raise errors.BudgetExceeded(self, limit.field)
        raise errors.error_for(self)

    def write_events(self, path: str | Path) -> None:
        """Write the events as JSON lines, one event per line (`boundloop.events.read_events`)."""
        from .events import write_events

        write_events(self.events, path)

    def to_dict(self) -> dict[str, Any]:
        """The result as a JSON object (`boundloop demo --json`)."""
        from .events import to_dict

        return {
            "stop_reason": str(self.stop_reason),
            "answer": self.answer,
            "output": _json_output(self.output),
            "usage": self.usage.to_dict(),
            "state": self.state.to_dict(),
            "events": [to_dict(event) for event in self.events],
        }

    def to_json(self, *, indent: int | None = None) -> str:
        """The result as a JSON string."""
        return json.dumps(self.to_dict(), default=json_default, indent=indent)


def _json_output(output: object) -> object:
    """`LoopResult.output` as JSON: a pydantic model as its JSON object."""
    dump = getattr(output, "model_dump", None)
    return dump(mode="json") if callable(dump) else output
