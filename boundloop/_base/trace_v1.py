"""The earlier trace format (schema_version 1), read as this release's event fields.

A line of that format (`TraceEvent.to_dict`: kind, step, at, source, dest, trigger,
duration_s and a `data` object) becomes the fields of the typed event it is now;
`boundloop.events.from_dict` renames its kind where it changed and validates it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def v1_fields(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of an earlier-format event, `kind` as that format named it.

    Its `seq` is its position as far as it is known: the line's `seq` when the caller
    numbered it, else 0.
    """
    kind = raw.get("kind")
    data = dict(raw.get("data") or {})
    fields: dict[str, Any]
    if kind == "transition":
        fields = {
            "source": raw.get("source"),
            "dest": raw.get("dest"),
            "trigger": raw.get("trigger"),
            "guard": data.get("guard"),
            "duration_s": raw.get("duration_s") or 0.0,
        }
    elif kind == "error":
        fields = {
            "error_kind": data.get("kind"),
            **{k: v for k, v in data.items() if k not in ("kind", "step")},
        }
    elif kind == "stop":
        fields = {k: v for k, v in data.items() if k not in ("task_id", "exceeded")}
        exceeded = data.get("exceeded")
        if isinstance(exceeded, dict):
            fields["limit"] = exceeded
    else:
        fields = data
    return {
        **fields,
        "seq": raw.get("seq", 0),
        "task_id": str(raw.get("task_id") or data.get("task_id") or ""),
        "at": raw.get("at"),
        "step": raw.get("step"),
        "kind": kind,
    }
