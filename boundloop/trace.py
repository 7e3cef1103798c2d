"""The trace: one `TraceEvent` per transition, plus proposal, validation, tool and stop events.

Events are written as JSON lines (`write_trace`) and read back with `read_events`; the
`boundloop diagram --trace` overlay reads that file.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, cast, final

import pydantic

TraceKind = Literal[
    "transition", "proposal", "validation", "tool_call", "tool_result", "stop", "error", "resume"
]
"""What a trace event records."""

TRACE_KINDS: tuple[TraceKind, ...] = (
    "transition",
    "proposal",
    "validation",
    "tool_call",
    "tool_result",
    "stop",
    "error",
    "resume",
)


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TraceEvent:
    """One thing that happened in a run: a transition, a proposal, a decision, a tool outcome."""

    kind: TraceKind
    step: int
    at: float
    """Epoch seconds."""
    source: str | None = None
    dest: str | None = None
    trigger: str | None = None
    duration_s: float | None = None
    """For a transition: time spent in the source state."""
    data: dict[str, Any] = dataclasses.field(default_factory=dict[str, Any])
    """What happened, by kind: JSON values only (see docs/architecture.md, "The trace")."""

    def to_dict(self) -> dict[str, Any]:
        """The event as a JSON object (SDK objects and records in `data` as their JSON)."""
        return {
            "kind": self.kind,
            "step": self.step,
            "at": self.at,
            "source": self.source,
            "dest": self.dest,
            "trigger": self.trigger,
            "duration_s": self.duration_s,
            "data": {key: _plain(value) for key, value in self.data.items()},
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> TraceEvent:
        """Rebuild an event written by `to_dict`.

        Raises:
            ValueError: `raw` is not a trace event (unknown kind, missing step or time).
        """
        kind = raw.get("kind")
        if kind not in TRACE_KINDS:
            raise ValueError(f"not a trace event: kind {kind!r}")
        try:
            return cls(
                kind=kind,
                step=int(raw["step"]),
                at=float(raw["at"]),
                source=raw.get("source"),
                dest=raw.get("dest"),
                trigger=raw.get("trigger"),
                duration_s=raw.get("duration_s"),
                data=dict(raw.get("data") or {}),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a trace event: {exc}") from None


@final
class Deferred:
    """Event data made JSON only when the trace is written: what the model or a tool sent,
    kept by reference while the run goes on, redacted on the way out."""

    __slots__ = ("_redact", "_value")

    def __init__(self, value: object, redact: Callable[[str], str]) -> None:
        self._value = value
        self._redact = redact

    def json(self) -> object:
        """The value as JSON, every string redacted."""
        return redact_strings(_plain(self._value), self._redact)

    def __repr__(self) -> str:
        return f"Deferred({type(self._value).__name__})"


def redact_strings(value: object, redact: Callable[[str], str]) -> object:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_strings(item, redact) for item in cast(list[object], value)]
    if isinstance(value, dict):
        return {key: redact_strings(item, redact) for key, item in cast(dict[str, object], value).items()}
    return value


def _plain(value: object) -> object:
    """A value of event data as JSON: SDK objects, records and messages holding them converted."""
    if isinstance(value, Deferred):
        return value.json()
    if isinstance(value, pydantic.BaseModel):
        return json_default(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in cast(list[object], value)]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in cast(dict[object, object], value).items()}
    return value


def json_default(value: object) -> object:
    """`json.dumps(default=...)` for SDK objects: the fields the API sent, as it sent them."""
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json", exclude_unset=True)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def write_trace(events: Iterable[TraceEvent], path: str | Path) -> None:
    """Write trace events as JSON lines, one event per line (`read_trace` reads them)."""
    with Path(path).open("w", encoding="utf-8") as out:
        for event in events:
            out.write(json.dumps(event.to_dict(), default=json_default))
            out.write("\n")


def read_trace(path: str | Path) -> list[TraceEvent]:
    """Read a JSON-lines trace written by `LoopResult.write_trace` (or `--trace`).

    Raises:
        OSError: the file cannot be read.
        ValueError: a line is not a trace event; the message names the line.
    """
    events: list[TraceEvent] = []
    with Path(path).open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                raw: object = json.loads(line)
                if not isinstance(raw, dict):
                    raise TypeError("not a JSON object")
                events.append(TraceEvent.from_dict(cast(dict[str, Any], raw)))
            except (ValueError, TypeError) as exc:
                raise ValueError(f"{path}:{number}: not a trace event ({exc})") from exc
    return events
