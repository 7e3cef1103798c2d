"""The run's events: one typed class per kind, the one stream every observer reads.
`LoopResult.events`, the `on_event` hooks, the OTel spans, the CLI's live view, the `--trace`
writer, replay and the diagram's overlay all read this stream by typed fields. Each event is a
plain slotted dataclass with a `kind` and `seq` (its number in the task's stream, from 0,
across resumes), `task_id`, `at` (epoch seconds) and `step` (model calls so far). They are built
unvalidated (a run records ~11 per turn; docs/performance.md has what pydantic models and frozen
dataclasses cost). An event is a record of what happened: observers read it, none changes it. Pydantic
is the boundary: one `TypeAdapter` (`EVENT_ADAPTER`) validates what is read (unknown fields
refused) and serialises what is written: JSON lines with `"schema_version": 2` (lines without
it are the earlier format, converted on reading). Payloads the model or a tool sent are held in
a `Deferred` and written as redacted JSON; free text is redacted when the event is built.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, Literal, TypeAlias, cast, get_args

import pydantic
from pydantic import ConfigDict, Field, PlainSerializer, PlainValidator, TypeAdapter, ValidationError

from ._base.recorded import Deferred as Deferred
from ._base.recorded import json_default
from ._base.recorded import redact_strings as redact_strings
from ._base.trace_v1 import v1_fields
from .records import Decision, Outcome, Provenance

__all__ = [
    "ApprovalRequested",
    "BaseEvent",
    "CallDecision",
    "Compacted",
    "Deferred",
    "EVENT_ADAPTER",
    "EVENT_KINDS",
    "Error",
    "Event",
    "EventKind",
    "LimitHit",
    "ModelRequest",
    "PendingCall",
    "Proposal",
    "RENAMED_KINDS",
    "Recorded",
    "Resumed",
    "RunStarted",
    "SCHEMA_VERSION",
    "Stop",
    "TextDelta",
    "ThinkingDelta",
    "ToolInputDelta",
    "ToolResult",
    "ToolStarted",
    "Transition",
    "Validation",
    "from_dict",
    "read_events",
    "redact_strings",
    "to_dict",
    "to_json_line",
    "write_events",
]

SCHEMA_VERSION: Final = 2
"""The version of the events' JSON lines; lines without one are the earlier format (1)."""


def _to_deferred(value: object) -> Deferred:
    """A field's value: a `Deferred` as it is; JSON read back from a file, as a plain one."""
    return value if isinstance(value, Deferred) else Deferred(value)


Recorded: TypeAlias = Annotated[
    Deferred,
    PlainValidator(_to_deferred),
    PlainSerializer(lambda value: value.json(), return_type=object, when_used="always"),
    pydantic.WithJsonSchema({}),
]
"""A recorded payload: a `Deferred` in memory, its redacted JSON on the way out."""


@dataclasses.dataclass(slots=True)
class BaseEvent:
    """The fields every event has (positionally too: the events a turn records are built so)."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")  # unknown fields refused on read

    seq: int
    """The event's number in its task's stream: from 0, one more per event, across resumes."""
    task_id: str
    at: float
    """Epoch seconds."""
    step: int
    """Model calls made so far."""

    def to_dict(self) -> dict[str, Any]:
        """The event as a JSON object, with its `schema_version` (recorded payloads redacted)."""
        return to_dict(self)


@dataclasses.dataclass(slots=True, kw_only=True)
class RunStarted(BaseEvent):
    """A new run starts (a resumed run starts with `Resumed` instead)."""

    kind: Literal["run_started"] = "run_started"
    trace_id: str
    model: str
    version: str | None = None
    parent_task_id: str | None = None
    """The run that started this one as a delegation (its events reach the parent's stream and
    hooks with this run's `task_id`); None for a root."""
    platform: str = "anthropic"
    """Where the loop's client runs (`boundloop.platforms.Platform`; `Provenance.platform`)."""


@dataclasses.dataclass(slots=True)
class Transition(BaseEvent):
    """The machine moved from `source` to `dest` on `trigger` (`kind`, `guard`: keyword only)."""

    kind: Literal["transition"] = dataclasses.field(default="transition", kw_only=True)
    source: str
    dest: str
    trigger: str
    guard: str | None = dataclasses.field(default=None, kw_only=True)
    """The guard that chose the edge; None on an unguarded edge."""
    duration_s: float
    """Time spent in `source`."""

    @classmethod
    def of(
        cls,
        *,
        seq: int,
        task_id: str,
        at: float,
        step: int,
        source: str,
        dest: str,
        trigger: str,
        guard: str | None,
        duration_s: float,
    ) -> Transition:
        """The run's one way to build a `Transition`: every field named here, passed by position
        (one a transition; `tests/test_factories.py` pins the order). A keyword-only field is set
        after: a class called with a keyword gets a dict built for the call."""
        event = cls(seq, task_id, at, step, source, dest, trigger, duration_s)
        event.guard = guard
        return event


@dataclasses.dataclass(slots=True, kw_only=True)
class ModelRequest(BaseEvent):
    """A request about to go to the model: the model it names (a refusal's retry: its fallback),
    the messages it holds and its `max_tokens` (as clamped by the budgets)."""

    kind: Literal["model_request"] = "model_request"
    model: str
    messages: int  # in the request
    max_tokens: int


@dataclasses.dataclass(slots=True)
class Proposal(BaseEvent):
    """The model's response (`server_tool_uses`: its server tool uses by kind, `web_search`, ...;
    `kind`, `stop_sequence`: keyword only)."""

    kind: Literal["proposal"] = dataclasses.field(default="proposal", kw_only=True)
    stop_reason: str | None
    stop_sequence: str | None = dataclasses.field(default=None, kw_only=True)
    tools: list[str]
    """The tools the response calls, in order."""
    duration_s: float
    input_tokens: int
    output_tokens: int
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    server_tool_uses: dict[str, int] = dataclasses.field(default_factory=dict[str, int])
    final_answer: bool = False
    """The final-answer call made at a spent budget."""
    response: Recorded | None = None
    """The `Message` as the API sent it (replay reads it)."""

    @classmethod
    def of(
        cls,
        *,
        seq: int,
        task_id: str,
        at: float,
        step: int,
        stop_reason: str | None,
        stop_sequence: str | None,
        tools: list[str],
        duration_s: float,
        input_tokens: int,
        output_tokens: int,
        cache_read_input_tokens: int,
        cache_creation_input_tokens: int,
        server_tool_uses: dict[str, int],
        final_answer: bool,
        response: Deferred | None,
    ) -> Proposal:
        """The run's one way to build a `Proposal`: every field named here, passed by position
        (one a turn; `tests/test_factories.py` pins the order; `stop_sequence`, keyword-only, set
        after)."""
        event = cls(
            seq,
            task_id,
            at,
            step,
            stop_reason,
            tools,
            duration_s,
            input_tokens,
            output_tokens,
            cache_read_input_tokens,
            cache_creation_input_tokens,
            server_tool_uses,
            final_answer,
            response,
        )
        event.stop_sequence = stop_sequence
        return event


@dataclasses.dataclass(slots=True)
class CallDecision:
    """What validation decided for one call."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")
    tool: str
    tool_use_id: str
    decision: Decision
    reason: str | None = None
    """Why the call is answered without running (None when it runs)."""

    @classmethod
    def of(
        cls, *, tool: str, tool_use_id: str, decision: Decision, reason: str | None = None
    ) -> CallDecision:
        """The run's one way to build a `CallDecision` (one a call), by position."""
        return cls(tool, tool_use_id, decision, reason)


@dataclasses.dataclass(slots=True)
class Validation(BaseEvent):
    """How the response was routed, and the decision for each call (`kind`: keyword only)."""

    kind: Literal["validation"] = dataclasses.field(default="validation", kw_only=True)
    decision: Literal["execute", "resume", "final", "stop", "final_answer"]
    stop_reason: str | None = None
    reason: str | None = None
    calls: list[CallDecision] = dataclasses.field(default_factory=list[CallDecision])

    @classmethod
    def of(
        cls,
        *,
        seq: int,
        task_id: str,
        at: float,
        step: int,
        decision: Literal["execute", "resume", "final", "stop", "final_answer"],
        stop_reason: str | None,
        reason: str | None,
        calls: list[CallDecision],
    ) -> Validation:
        """The run's one way to build a `Validation` (one a turn), by position."""
        return cls(seq, task_id, at, step, decision, stop_reason, reason, calls)


@dataclasses.dataclass(slots=True)
class ToolStarted(BaseEvent):
    """The calls of a batch about to run (the same `CallDecision`s as in `Validation`; `kind`:
    keyword only)."""

    kind: Literal["tool_started"] = dataclasses.field(default="tool_started", kw_only=True)
    calls: list[CallDecision]

    @classmethod
    def of(cls, *, seq: int, task_id: str, at: float, step: int, calls: list[CallDecision]) -> ToolStarted:
        """The run's one way to build a `ToolStarted` (one a batch), by position."""
        return cls(seq, task_id, at, step, calls)


@dataclasses.dataclass(slots=True)
class ToolResult(BaseEvent):
    """One answered tool_use: run, refused, repeated, or decided by a human (`kind`: keyword only)."""

    kind: Literal["tool_result"] = dataclasses.field(default="tool_result", kw_only=True)
    tool: str
    tool_use_id: str
    outcome: Outcome
    is_error: bool
    by_human: bool = False
    """A human decided this answer on resume (a denial is then the human's, not the loop's)."""
    reason: str | None = None
    """A human's denial: the reason they gave (None: denied without one, or not a denial)."""
    attempts: int = 0
    duration_s: float = 0.0
    input: Recorded | None = None
    content: Recorded | None = None

    @classmethod
    def of(
        cls,
        *,
        seq: int,
        task_id: str,
        at: float,
        step: int,
        tool: str,
        tool_use_id: str,
        outcome: Outcome,
        is_error: bool,
        by_human: bool,
        reason: str | None,
        attempts: int,
        duration_s: float,
        input: Deferred | None,
        content: Deferred | None,
    ) -> ToolResult:
        """The run's one way to build a `ToolResult`: every field named here, passed by position
        (one a call; `tests/test_factories.py` pins the order, so `is_error` and `by_human` cannot
        trade places unseen)."""
        return cls(
            seq,
            task_id,
            at,
            step,
            tool,
            tool_use_id,
            outcome,
            is_error,
            by_human,
            reason,
            attempts,
            duration_s,
            input,
            content,
        )


@dataclasses.dataclass(slots=True, kw_only=True)
class PendingCall:
    """A call waiting for a human's approval."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")
    tool: str
    tool_use_id: str


@dataclasses.dataclass(slots=True, kw_only=True)
class ApprovalRequested(BaseEvent):
    """The run stops to wait for a human's decision on these calls."""

    kind: Literal["approval_requested"] = "approval_requested"
    calls: list[PendingCall]


@dataclasses.dataclass(slots=True, kw_only=True)
class Resumed(BaseEvent):
    """The first event of a resumed session."""

    kind: Literal["resumed"] = "resumed"
    from_phase: str
    interrupted: bool = False
    """Continued after a crash (no decision was made)."""
    from_stop: str | None = None
    """The stop it continued from: `needs_human` (a human's decisions) or `cancelled`; None: a crash."""
    approvals: dict[str, bool | str] = dataclasses.field(default_factory=dict[str, bool | str])
    """The human's decisions, by tool_use id: True, False or a denial reason."""
    escalation: str | None = None
    """The tool_use id of the model's question a human replied to."""


@dataclasses.dataclass(slots=True, kw_only=True)
class LimitHit:
    """The budget limit that stopped a run: the `Budget` field, its value and what was used."""

    __pydantic_config__: ClassVar[ConfigDict] = ConfigDict(extra="forbid")
    limit: str
    value: float
    used: float
    pool: str | None = None
    """The budget pool whose ceiling it was (None: the run's own budget or its tree's)."""


@dataclasses.dataclass(slots=True, kw_only=True)
class Stop(BaseEvent):
    """The session stopped (once per session)."""

    kind: Literal["stop"] = "stop"
    stop_reason: str
    detail: str | None = None
    limit: LimitHit | None = None
    steps: int
    tool_calls: int
    duration_s: float
    trace_id: str
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cost_usd: float | None = None
    opening: Recorded | None = None
    """The messages the run started from (replay starts there)."""
    provenance: Provenance | None = None
    metadata: dict[str, Any] | None = None


@dataclasses.dataclass(slots=True, kw_only=True)
class Error(BaseEvent):
    """An exception the run recorded (its message redacted)."""

    kind: Literal["error"] = "error"
    error_kind: str
    """Where: `model_api`, `model_response`, `invalid_request`, `count_tokens`, `unpriced_model`,
    `budget_pool`, `tools_list_changed`, `exception`, `checkpoint`, `event_log`."""
    type: str
    message: str
    status_code: int | None = None
    request_id: str | None = None


@dataclasses.dataclass(slots=True, kw_only=True)
class TextDelta(BaseEvent):
    """A piece of the model's text as it streams (`AgentLoop.stream`; `index`: its content block)."""

    kind: Literal["text_delta"] = "text_delta"
    index: int
    text: str


@dataclasses.dataclass(slots=True, kw_only=True)
class ThinkingDelta(BaseEvent):
    """A piece of the model's thinking as it streams (`AgentLoop.stream`)."""

    kind: Literal["thinking_delta"] = "thinking_delta"
    index: int
    thinking: str


@dataclasses.dataclass(slots=True, kw_only=True)
class ToolInputDelta(BaseEvent):
    """A piece of a tool input's JSON as it streams (`AgentLoop.stream`).

    The first one of each tool call comes when the call's block starts, before any of its input,
    with an empty `partial_json`: a front end can name the call (`tool_use_id`, `name`) while the
    model is still writing its input. Every later piece carries the same id and name.
    """

    kind: Literal["tool_input_delta"] = "tool_input_delta"
    index: int
    partial_json: str
    tool_use_id: str
    """The `id` of the `tool_use` (or `server_tool_use`, `mcp_tool_use`) block being written."""
    name: str
    """The tool the model is calling."""


@dataclasses.dataclass(slots=True, kw_only=True)
class Compacted(BaseEvent):
    """The API compacted the context (docs/cost.md): the input before, the summary after."""

    kind: Literal["compaction"] = "compaction"
    tokens_before: int
    tokens_after: int


Event: TypeAlias = Annotated[
    RunStarted
    | Transition
    | ModelRequest
    | Proposal
    | Validation
    | ToolStarted
    | ToolResult
    | ApprovalRequested
    | Resumed
    | Stop
    | Error
    | TextDelta
    | ThinkingDelta
    | ToolInputDelta
    | Compacted,
    Field(discriminator="kind"),
]
"""Any event, told apart by its `kind`."""

EventKind: TypeAlias = Literal[
    "run_started",
    "transition",
    "model_request",
    "proposal",
    "validation",
    "tool_started",
    "tool_result",
    "approval_requested",
    "resumed",
    "stop",
    "error",
    "text_delta",
    "thinking_delta",
    "tool_input_delta",
    "compaction",
]

EVENT_KINDS: Final[tuple[EventKind, ...]] = get_args(EventKind)
"""Every event kind, in the order of the `Event` union."""

RENAMED_KINDS: Final[Mapping[str, EventKind]] = {"tool_call": "tool_started", "resume": "resumed"}
"""The earlier format's kinds that have a new name (the others kept theirs)."""

EVENT_ADAPTER: Final[TypeAdapter[Event]] = TypeAdapter(Event)
"""Validates and serialises any event."""


def to_dict(event: BaseEvent) -> dict[str, Any]:
    """The event as a JSON object, with its `schema_version` (recorded payloads redacted)."""
    plain = cast(dict[str, Any], EVENT_ADAPTER.dump_python(cast(Event, event), mode="json"))
    plain["schema_version"] = SCHEMA_VERSION
    return plain


def to_json_line(event: BaseEvent) -> str:
    """The event as one JSON line (no newline)."""
    return json.dumps(to_dict(event), default=json_default)


def write_events(events: Iterable[BaseEvent], path: str | Path) -> None:
    """Write events as JSON lines, one event per line (`read_events` reads them)."""
    with Path(path).open("w", encoding="utf-8") as out:
        for event in events:
            out.write(to_json_line(event) + "\n")


def from_dict(raw: Mapping[str, Any]) -> Event:
    """An event from its JSON object: this format, or the earlier one (converted).

    Raises:
        ValueError: not an event, or a `schema_version` this release does not read.
    """
    version = raw.get("schema_version", 1)
    if version == 1:
        fields = v1_fields(raw)
        fields["kind"] = RENAMED_KINDS.get(str(fields["kind"]), fields["kind"])
    elif version == SCHEMA_VERSION:
        fields = {key: value for key, value in raw.items() if key != "schema_version"}
    else:
        raise ValueError(f"unknown event schema_version {version!r} (this release reads 1 and 2)")
    try:
        return EVENT_ADAPTER.validate_python(fields)
    except ValidationError as exc:  # one line a person reads, not pydantic's report
        problems = (f"{'.'.join(map(str, e['loc'])) or 'kind'}: {e['msg']}" for e in exc.errors())
        raise ValueError("; ".join(problems)) from None


def read_events(path: str | Path) -> list[Event]:
    """Read a JSON-lines file of events (`write_events`, `--trace`; the earlier format too).

    Raises:
        OSError: the file cannot be read.
        ValueError: a line is not an event; the message names the line.
    """
    events: list[Event] = []
    with Path(path).open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                raw: object = json.loads(line)
                if not isinstance(raw, dict):
                    raise TypeError("not a JSON object")
                events.append(from_dict(cast(dict[str, Any], raw)))
            except (ValueError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: not an event ({exc})") from exc
    return events
