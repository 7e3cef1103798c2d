"""The trace: one `TraceEvent` per transition, plus proposal, validation, tool and stop events.

Events are written as JSON lines (`write_trace`) and read back with `read_trace`; the
`boundloop diagram --trace` overlay reads that file.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, NoReturn, TypeGuard, cast, final

if TYPE_CHECKING:
    from pydantic import BaseModel

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
class _SharedData(dict[str, Any]):
    """Event data held by many events (none at all, or a transition's guard): read-only, since
    a change would show in every event holding it. Otherwise a dict: it compares, prints,
    serialises, copies and pickles as one (a copy is a plain dict)."""

    __slots__ = ()

    def _refuse(self) -> NoReturn:
        raise TypeError("a trace event's data is read-only: events are immutable")

    def __setitem__(self, key: str, value: Any) -> NoReturn:
        self._refuse()

    def __delitem__(self, key: str) -> NoReturn:
        self._refuse()

    def __ior__(self, other: Any) -> NoReturn:  # type: ignore[misc]  # it refuses, unlike __or__
        self._refuse()

    def clear(self) -> NoReturn:
        self._refuse()

    def pop(self, *args: Any) -> NoReturn:
        self._refuse()

    def popitem(self) -> NoReturn:
        self._refuse()

    def setdefault(self, *args: Any) -> NoReturn:
        self._refuse()

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._refuse()

    def __reduce__(self) -> tuple[type[dict[str, Any]], tuple[dict[str, Any]]]:
        return dict, (dict(self),)


_NO_DATA: Final = _SharedData()
"""The data of every event built by `TraceEvent.transition`/`.of` without data."""

_GUARD_DATA: dict[str, _SharedData] = {}
"""`{"guard": label}`, one per guard label: the machine's table has a handful."""

_MAX_GUARDS: Final = 1_024
"""Beyond this many distinct labels (not a machine's table), each event gets its own dict."""


def _empty() -> dict[str, Any]:
    """`data`'s default: a new dict (`dict[str, Any]` as a factory is an alias, 10x slower)."""
    return {}


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TraceEvent:
    """One thing that happened in a run: a transition, a proposal, a decision, a tool outcome.

    Immutable. The loop builds its events with `TraceEvent.transition` and `TraceEvent.of`,
    which are several times cheaper than the frozen dataclass's `__init__` (one
    `object.__setattr__` per field); events without data, and transitions through the same
    guard, share one read-only `data` dict.
    """

    kind: TraceKind
    step: int
    at: float
    """Epoch seconds."""
    source: str | None = None
    dest: str | None = None
    trigger: str | None = None
    duration_s: float | None = None
    """For a transition: time spent in the source state."""
    data: dict[str, Any] = dataclasses.field(default_factory=_empty)
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
            return _build(
                kind,
                int(raw["step"]),
                float(raw["at"]),
                raw.get("source"),
                raw.get("dest"),
                raw.get("trigger"),
                raw.get("duration_s"),
                dict(raw.get("data") or {}) or _NO_DATA,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a trace event: {exc}") from None

    @classmethod
    def transition(
        cls,
        step: int,
        at: float,
        source: str,
        dest: str,
        trigger: str,
        duration_s: float,
        guard: str | None = None,
    ) -> TraceEvent:
        """A `transition` event: `data` is `{"guard": guard}`, or empty on an unguarded edge.

        Equal to `TraceEvent(kind="transition", ..., data={"guard": guard})`, at a fraction of
        its cost; its `data` is shared with every transition through the same guard.
        """
        data: dict[str, Any] = _NO_DATA if guard is None else _GUARD_DATA.get(guard) or _guard_data(guard)
        return _build("transition", step, at, source, dest, trigger, duration_s, data)

    @classmethod
    def of(cls, kind: TraceKind, step: int, at: float, data: dict[str, Any]) -> TraceEvent:
        """An event with no source, dest, trigger or duration (every kind but `transition`).

        Equal to `TraceEvent(kind=kind, step=step, at=at, data=data)`, at a fraction of its
        cost. The event keeps `data` itself: the caller must not change it afterwards.
        """
        return _build(kind, step, at, None, None, None, None, data or _NO_DATA)


@final
class _Blank:
    """`TraceEvent`'s slots without its frozen `__setattr__`: filled by plain attribute
    stores, then turned into a `TraceEvent` (`__class__` assignment: same slots, same layout)."""

    __slots__ = TraceEvent.__slots__  # pyright: ignore[reportUnknownMemberType]


_new = object.__new__


def _build(
    kind: TraceKind,
    step: int,
    at: float,
    source: str | None,
    dest: str | None,
    trigger: str | None,
    duration_s: float | None,
    data: dict[str, Any],
) -> TraceEvent:
    """A `TraceEvent`, built at the cost of a plain slotted object's construction."""
    event: Any = _new(_Blank)
    event.kind = kind
    event.step = step
    event.at = at
    event.source = source
    event.dest = dest
    event.trigger = trigger
    event.duration_s = duration_s
    event.data = data
    event.__class__ = TraceEvent
    return cast(TraceEvent, event)


def _guard_data(guard: str) -> dict[str, Any]:
    if len(_GUARD_DATA) >= _MAX_GUARDS:
        return {"guard": guard}
    shared = _GUARD_DATA[guard] = _SharedData(guard=guard)
    return shared


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


def redact_strings(value: object, redact: Callable[[str], str], *, all_keys: bool = True) -> object:
    """`value` (plain JSON) with every string redacted: values, and the keys of objects too.

    With `all_keys=False` only the keys inside an `input` or `metadata` (a tool_use's input,
    where the model picks the keys; the caller's metadata) are redacted: the others are field
    names that must read back (a pattern of yours matching `input_tokens` must not drop the
    usage of a checkpoint). Two keys that redact to the same text stay apart: the later one
    gets a `#2`, `#3` suffix.
    """
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, list):
        return [redact_strings(item, redact, all_keys=all_keys) for item in cast(list[object], value)]
    if isinstance(value, dict):
        redacted: dict[object, object] = {}
        for key, item in cast(dict[object, object], value).items():
            inside = all_keys or key in _DATA_KEYS
            if all_keys and isinstance(key, str):
                key = _free_key(redacted, redact(key))
            redacted[key] = redact_strings(item, redact, all_keys=inside)
        return redacted
    return value


_DATA_KEYS: Final = frozenset({"input", "metadata"})
"""Fields whose objects' keys are data, not field names (see `redact_strings`)."""


def _free_key(taken: dict[object, object], key: str) -> str:
    """`key`, or `key#2`, `key#3`, ...: the first not in `taken`."""
    candidate, count = key, 1
    while candidate in taken:
        count += 1
        candidate = f"{key}#{count}"
    return candidate


def _plain(value: object) -> object:
    """A value of event data as JSON: SDK objects, records and messages holding them converted."""
    if isinstance(value, Deferred):
        return value.json()
    if is_sdk_object(value):
        return json_default(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in cast(list[object], value)]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in cast(dict[object, object], value).items()}
    return value


def is_sdk_object(value: object) -> TypeGuard[BaseModel]:
    """Whether `value` is an SDK object (a pydantic model): never while pydantic is not loaded,
    so this module does not load it (and a trace is read and drawn without it)."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(value, pydantic.BaseModel)


def json_default(value: object) -> object:
    """`json.dumps(default=...)` for SDK objects: the fields the API sent, as it sent them."""
    if is_sdk_object(value):
        # No serializer warnings: a block type the SDK does not model sits in its union as
        # another model, and is dumped right (its fields kept as extras), but pydantic warns.
        return value.model_dump(mode="json", exclude_unset=True, warnings=False)
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
