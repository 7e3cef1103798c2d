"""`boundloop pending --store PATH`: the runs in a store waiting for a human."""

from __future__ import annotations

import argparse
import json
import shlex
from datetime import UTC, datetime
from typing import Any

import anyio

from .. import CheckpointCorrupt, CheckpointStore, LoopState, StoredRun
from ._errors import EXIT_OK
from ._store import closing, open_store, store_errors, store_failure


def pending_command(args: argparse.Namespace) -> int:
    """List the runs waiting for a human: calls to approve, or the model's question.

    Args:
        args: the parsed arguments of `boundloop pending`.

    Returns:
        0, with or without waiting runs.

    Raises:
        CommandError: the store is missing or unreadable.
    """
    path: str = args.store
    as_json: bool = args.json
    store = open_store(path)
    try:
        waiting = anyio.run(_waiting, store)
    except CheckpointCorrupt as exc:  # a store written by a newer boundloop
        raise store_failure(path, exc) from exc
    except store_errors(path) as exc:
        raise store_failure(path, exc) from exc
    if as_json:
        print(json.dumps([_record(row, state) for row, state in waiting], indent=2, default=str))
    elif not waiting:
        print(f"no run in {path} is waiting for a human")
    else:
        for row, state in waiting:
            print("\n".join(_describe(path, row, state)))
    return EXIT_OK


async def _waiting(
    store: CheckpointStore,
) -> list[tuple[StoredRun, LoopState | CheckpointCorrupt | None]]:
    """Each waiting row with its state; an unreadable state is reported, not fatal. The store is
    closed at the end."""
    found: list[tuple[StoredRun, LoopState | CheckpointCorrupt | None]] = []
    async with closing(store):
        for row in await store.list(status="waiting"):
            try:
                found.append((row, await store.load(row.task_id)))
            except CheckpointCorrupt as exc:
                found.append((row, exc))
    return found


def _record(row: StoredRun, state: LoopState | CheckpointCorrupt | None) -> dict[str, Any]:
    record: dict[str, Any] = {
        "task_id": row.task_id,
        "updated_at": when(row.updated_at),
        "step": row.step,
    }
    if not isinstance(state, LoopState):
        record["error"] = "deleted since it was listed" if state is None else str(state)
        return record
    record["goal"] = state.goal
    record["waiting_for"] = "reply" if state.escalation is not None else "approval"
    record["approvals"] = [
        {"tool_use_id": p.tool_use_id, "tool": p.tool, "input": p.input, "step": p.step}
        for p in state.pending_approvals
    ]
    escalation = state.escalation
    record["escalation"] = (
        None
        if escalation is None
        else {"tool_use_id": escalation.tool_use_id, "reason": escalation.reason, "step": escalation.step}
    )
    return record


def _describe(path: str, row: StoredRun, state: LoopState | CheckpointCorrupt | None) -> list[str]:
    head = f"{row.task_id}  step {row.step}  saved {when(row.updated_at)}"
    if not isinstance(state, LoopState):
        return [head, f"  cannot be read: {'deleted since it was listed' if state is None else state}", ""]
    lines = [head, f"  goal: {_one_line(state.goal)}"]
    flags: list[str] = []
    if state.escalation is not None:
        lines.append(
            f"  the model asks ({state.escalation.tool_use_id}): {_one_line(state.escalation.reason)}"
        )
        flags.append("--reply TEXT")
    if state.pending_approvals:
        lines.append("  calls waiting for approval:")
        for pending in state.pending_approvals:
            arguments = json.dumps(pending.input, ensure_ascii=False, default=str)
            lines.append(f"    {pending.tool_use_id}  {pending.tool}  {arguments}  (step {pending.step})")
            flags.append(f"--approve {shlex.quote(pending.tool_use_id)}")
    command = f"boundloop resume SPEC {shlex.quote(row.task_id)} --store {shlex.quote(path)}"
    lines.extend([f"  resume: {' '.join([command, *flags])}", ""])
    return lines


def when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _one_line(value: str) -> str:
    return " ".join(value.split())
