"""A run's events as the rows of its timeline: what happened, in words (read from the event log,
whose payloads are redacted already)."""

from __future__ import annotations

import json
from typing import Any, Final

from .._core import event_log_of
from ..checkpoint.eventlog import PAGE
from ..checkpoint.store import CheckpointStore
from ..events import Event

HIDDEN: Final = frozenset({"transition", "model_request", "text_delta", "thinking_delta", "tool_input_delta"})
"""Kinds the timeline leaves out: the path is on the diagram, deltas end up in the transcript."""

Row = dict[str, Any]


async def read_events(store: CheckpointStore, task_id: str, *, after: int = -1) -> list[Event]:
    """Every logged event of `task_id` above `after` (none when the store keeps no log)."""
    log = event_log_of(store)
    if log is None:
        return []
    found: list[Event] = []
    while True:
        batch = await log.read(task_id, after=after, limit=PAGE)
        found.extend(batch)
        if len(batch) < PAGE:
            return found
        after = batch[-1].seq


def _short(value: object, limit: int = 300) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _calls(calls: list[dict[str, Any]]) -> str:
    parts: list[str] = []
    for call in calls:
        reason = f" ({call['reason']})" if call.get("reason") else ""
        parts.append(f"{call['tool']} [{call['tool_use_id']}]: {call.get('decision', 'waits')}{reason}")
    return "; ".join(parts)


def _stop(data: dict[str, Any]) -> str:
    detail = f": {data['detail']}" if data.get("detail") else ""
    cost = data.get("cost_usd")
    money = "" if cost is None else f", ${cost:.4f}"
    return f"{data['stop_reason']}{detail} — {data['steps']} steps, {data['tool_calls']} tool calls{money}"


def _tool_result(data: dict[str, Any]) -> str:
    who = " by a human" if data.get("by_human") else ""
    why = f" ({data['reason']})" if data.get("reason") else ""
    content = "" if data.get("content") is None else f" -> {_short(data['content'], 200)}"
    return (
        f"{data['tool']} [{data['tool_use_id']}]: {data['outcome']}{who}{why} in {data['duration_s']:.3f}s"
        f", {data['attempts']} attempt(s){content}"
    )


def describe(data: dict[str, Any]) -> str:
    """One event (as `Event.to_dict` gives it) in words."""
    kind = data["kind"]
    if kind == "run_started":
        return f"model {data['model']}"
    if kind == "proposal":
        tools = ", ".join(data["tools"]) or "no tool"
        return (
            f"{data['stop_reason']}: {tools} — {data['input_tokens']} in / {data['output_tokens']} out "
            f"tokens, {data['duration_s']:.3f}s"
        )
    if kind == "validation":
        reason = f" ({data['reason']})" if data.get("reason") else ""
        calls = _calls(data.get("calls", []))
        return f"{data['decision']}{reason}" + (f" — {calls}" if calls else "")
    if kind == "tool_started":
        return "running " + ", ".join(f"{c['tool']} [{c['tool_use_id']}]" for c in data["calls"])
    if kind == "tool_result":
        return _tool_result(data)
    if kind == "approval_requested":
        return "waits for a human on " + ", ".join(f"{c['tool']} [{c['tool_use_id']}]" for c in data["calls"])
    if kind == "resumed":
        decided = ", ".join(
            f"{key}: {'approved' if value is True else 'denied' if value is False else f'denied ({value})'}"
            for key, value in data.get("approvals", {}).items()
        )
        origin = data.get("from_stop") or data["from_phase"]
        return f"resumed from {origin}" + (f" — {decided}" if decided else "")
    if kind == "stop":
        return _stop(data)
    if kind == "error":
        return f"{data['error_kind']}: {data['type']}: {_short(data['message'])}"
    if kind == "compaction":
        return _short({k: v for k, v in data.items() if k not in ("seq", "task_id", "at", "step", "kind")})
    return _short(data)


def rows(events: list[Event], started_at: float | None = None) -> list[Row]:
    """The timeline rows of `events`: seq, seconds since the run started, step, kind, summary."""
    found: list[Row] = []
    for event in events:
        if event.kind in HIDDEN:
            continue
        data = event.to_dict()
        origin = started_at if started_at is not None else event.at
        found.append(
            {
                "seq": event.seq,
                "t": f"+{max(0.0, event.at - origin):.3f}s",
                "step": event.step,
                "kind": event.kind,
                "summary": describe(data),
            }
        )
    return found


def call_reasons(events: list[Event]) -> dict[str, str]:
    """Why each call waits for a human: the last validation's reason for it, by tool_use id."""
    reasons: dict[str, str] = {}
    for event in events:
        if event.kind == "validation":
            for call in event.calls:
                if call.reason:
                    reasons[call.tool_use_id] = call.reason
    return reasons
