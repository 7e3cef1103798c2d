"""`boundloop pending --store PATH`: the runs in a SQLite store waiting for a human."""

from __future__ import annotations

import argparse
import json
import shlex
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from .. import CheckpointCorrupt, LoopState, SQLiteStore, StoredRun
from ._errors import EXIT_OK, CommandError


def open_store(path: str) -> SQLiteStore:
    """The SQLite store at `path`, which must exist: a command never creates an empty one.

    Args:
        path: the store's file, as given to `--store`.

    Returns:
        The store (nothing is read yet).

    Raises:
        CommandError: there is no such file, or it is a directory.
    """
    file = Path(path)
    if file.is_dir():
        raise CommandError(f"--store {path} is a directory, not a SQLite store")
    if not file.exists():
        raise CommandError(
            f"--store {path}: no such file (a store is made by a loop with store=SQLiteStore(...))"
        )
    return SQLiteStore(file)


def store_failure(path: str, exc: sqlite3.Error | OSError | CheckpointCorrupt) -> CommandError:
    """The one-line error for a store that cannot be read at all.

    Args:
        path: the store's file, as given to `--store`.
        exc: what reading it raised.

    Returns:
        The error to raise.
    """
    if isinstance(exc, CheckpointCorrupt):
        return CommandError(str(exc))
    return CommandError(f"cannot read the store {path}: {exc}")


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
    except (sqlite3.Error, OSError, CheckpointCorrupt) as exc:
        raise store_failure(path, exc) from exc
    if as_json:
        print(json.dumps([_record(row, state) for row, state in waiting], indent=2, default=str))
    elif not waiting:
        print(f"no run in {path} is waiting for a human")
    else:
        for row, state in waiting:
            print("\n".join(_describe(path, row, state)))
    return EXIT_OK


async def _waiting(store: SQLiteStore) -> list[tuple[StoredRun, LoopState | CheckpointCorrupt | None]]:
    """Each waiting row with its state; an unreadable state is reported, not fatal."""
    found: list[tuple[StoredRun, LoopState | CheckpointCorrupt | None]] = []
    for row in await store.list(status="waiting"):
        try:
            found.append((row, await store.load(row.task_id)))
        except CheckpointCorrupt as exc:
            found.append((row, exc))
    return found


def _record(row: StoredRun, state: LoopState | CheckpointCorrupt | None) -> dict[str, Any]:
    record: dict[str, Any] = {
        "task_id": row.task_id,
        "updated_at": _when(row.updated_at),
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
    head = f"{row.task_id}  step {row.step}  saved {_when(row.updated_at)}"
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


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _one_line(value: str) -> str:
    return " ".join(value.split())


async def load_state(store: SQLiteStore, path: str, task_id: str, *, hint: str = "") -> LoopState:
    """The stored state of `task_id`.

    Raises:
        CommandError: the task is not in the store, its row cannot be read, or the store fails.
    """
    try:
        state = await store.load(task_id)
    except CheckpointCorrupt as exc:
        raise CommandError(str(exc)) from exc
    except (sqlite3.Error, OSError) as exc:
        raise store_failure(path, exc) from exc
    if state is None:
        raise CommandError(f"task {task_id!r} is not in {path}{hint}")
    return state
