"""Crash and resume across processes: a SIGKILLed run continues from its SQLite checkpoint.

Each test starts `tests/crash_worker.py` as a real process, waits on its stdout until the run
is where it should die (coordination through the pipe, no sleeps), SIGKILLs it, and resumes
the run, in this process or in a fresh worker. A side-effecting tool writes its effect into a
SQLite ledger once per idempotency key, so "exactly once" is checked on disk.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.to_thread
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from boundloop import CheckpointStore, LoopState, SQLiteStore, StopReason
from boundloop.checkpoint import PostgresStore
from boundloop.events import Resumed
from tests import crash_worker
from tests.crash_worker import CHARGE_ID, READ_ID, REFUND_IDS
from tests.helpers import assert_valid_transcript

ROOT: Final = Path(__file__).resolve().parents[1]
WORKER: Final = "tests/crash_worker.py"
DEADLINE_S: Final = 30.0
"""The most one worker may take to reach its marker or to finish (a slow, shared CI machine)."""

Ledger = tuple[list[tuple[str, str]], list[tuple[str, str, int]]]


def command(db: Path | str, ledger: Path, mode: str, task_id: str, *extra: str) -> list[str]:
    """The worker's command line."""
    return [sys.executable, WORKER, str(db), str(ledger), mode, task_id, *extra]


async def read_until(process: Process, marker: str) -> None:
    """Read the worker's stdout line by line until it prints `marker`."""
    assert process.stdout is not None
    stdout = BufferedByteReceiveStream(process.stdout)
    lines: list[str] = []
    while True:
        try:
            line = (await stdout.receive_until(b"\n", 1 << 20)).decode()
        except (anyio.EndOfStream, anyio.IncompleteRead):
            code = await process.wait()
            raise AssertionError(f"the worker exited ({code}) before {marker}; stdout: {lines}") from None
        if line == marker:
            return
        lines.append(line)


async def kill_at(marker: str, db: Path | str, ledger: Path, mode: str, task_id: str) -> None:
    """Start a worker in `mode`, wait until it prints `marker`, then SIGKILL it."""
    # stderr is inherited: pytest shows a worker's traceback with the failing test.
    async with await anyio.open_process(command(db, ledger, mode, task_id), cwd=ROOT, stderr=None) as process:
        try:
            with anyio.fail_after(DEADLINE_S):
                await read_until(process, marker)
        finally:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with anyio.fail_after(DEADLINE_S, shield=True):
                await process.wait()
    assert process.returncode == -signal.SIGKILL


async def run_worker(db: Path, ledger: Path, mode: str, task_id: str, *extra: str) -> dict[str, Any]:
    """Run a worker to its end; its last stdout line, parsed as JSON."""
    with anyio.fail_after(DEADLINE_S):
        done = await anyio.run_process(command(db, ledger, mode, task_id, *extra), cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr.decode()
    report: dict[str, Any] = json.loads(done.stdout.decode().splitlines()[-1])
    return report


async def read_ledger(ledger: Path) -> Ledger:
    """The ledger's effects and calls, read in a worker thread."""
    return await anyio.to_thread.run_sync(crash_worker.read_ledger, ledger)


async def stored(db: Path, task_id: str) -> LoopState:
    """The task's last checkpoint."""
    state = await SQLiteStore(db).load(task_id)
    assert state is not None
    return state


async def test_a_run_killed_while_its_tool_is_in_flight_resumes_and_charges_once(tmp_path: Path) -> None:
    """SIGKILL while `charge` is in flight: the checkpoint holds the batch as intents, and resuming
    in this process runs it again under the same idempotency key, so the charge lands once."""
    db, ledger, task_id = tmp_path / "runs.db", tmp_path / "ledger.db", "crash-in-tool"
    key = f"{task_id}:1:{CHARGE_ID}"
    await kill_at(crash_worker.IN_FLIGHT, db, ledger, "kill-in-tool", task_id)

    before = await stored(db, task_id)
    assert str(before.phase) == "act"
    assert before.step == 1
    assert before.turn is not None
    ids = [call.id for call in before.turn.calls]
    assert ids == [READ_ID, CHARGE_ID]
    assert before.turn.answers == [None, None]  # both intents: no result was recorded
    assert before.observations == []
    effects, calls = await read_ledger(ledger)
    assert effects == [(key, "O-1")]  # the effect happened before the kill
    (killed_pid,) = {pid for _, _, pid in calls}

    loop = crash_worker.build_loop(db, ledger, "resume", crash_worker.SCRIPT[len(before.responses) :])
    with anyio.fail_after(DEADLINE_S):
        result = await loop.resume(task_id)

    assert result.stop_reason is StopReason.COMPLETED
    assert result.answer == "charged"
    assert result.state.task_id == task_id
    assert result.state.trace_id == before.trace_id
    resumed = result.events[0]
    assert isinstance(resumed, Resumed)
    assert resumed.from_phase == "act"
    assert resumed.interrupted is True
    assert result.state.step == 2
    assert_valid_transcript(result.messages)
    assert [(o.tool_use_id, o.outcome) for o in result.state.observations] == [
        (READ_ID, "ok"),
        (CHARGE_ID, "ok"),
    ]
    effects, calls = await read_ledger(ledger)
    assert effects == [(key, "O-1")]  # exactly one effect for the charge
    charges = [(k, pid) for tool, k, pid in calls if tool == "charge"]
    assert charges == [(key, killed_pid), (key, os.getpid())]  # run again, under the same key
    assert ("read_order", f"{task_id}:1:{READ_ID}", os.getpid()) in calls  # its intent ran again too
    after = await stored(db, task_id)
    assert str(after.phase) == "stopped"
    assert after.stop_reason is StopReason.COMPLETED


@pytest.fixture(params=["sqlite", "postgres"])
def tree_db(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Where the tree's runs checkpoint: a SQLite file, or a PostgreSQL database (its DSN)."""
    if request.param == "sqlite":
        return tmp_path / "runs.db"
    dsn: str = request.getfixturevalue("postgres_dsn")
    return dsn


async def released(db: Path | str, *task_ids: str) -> None:
    """On PostgreSQL, wait until the killed worker's leases are gone (its session ends a moment
    after the kill: waited for in the database, not slept)."""
    if isinstance(db, str):
        from tests.test_pg_workers import wait_for_release

        for task_id in task_ids:
            await anyio.to_thread.run_sync(wait_for_release, db, task_id)


@contextlib.asynccontextmanager
async def opened(db: Path | str) -> AsyncIterator[CheckpointStore]:
    """The tree's store (a PostgreSQL one closed at the end)."""
    store = crash_worker.store_at(db)
    try:
        yield store
    finally:
        if isinstance(store, PostgresStore):
            await store.aclose()


@pytest.mark.asyncio_only  # the work is in the worker: one event loop is enough
async def test_a_tree_killed_while_its_childs_tool_is_in_flight_resumes_that_same_child(
    tmp_path: Path, tree_db: Path | str
) -> None:
    """SIGKILL while the delegated child's `charge` is in flight: both runs are checkpointed,
    linked (the lead's checkpoint named the child as it started), on SQLite and on PostgreSQL.
    Resuming the lead runs its delegation again, which finds the child by the call's idempotency
    key and resumes it (never a fresh one): the charge runs again under the same key and lands
    once, and the delegation is still the lead's one tool call."""
    db, ledger, task_id = tree_db, tmp_path / "ledger.db", "crash-in-child"
    await kill_at(crash_worker.IN_FLIGHT, db, ledger, "kill-in-child-tool", task_id)

    async with opened(db) as store:
        lead = await store.load(task_id)
        assert lead is not None
        assert str(lead.phase) == "act"
        (child_id,) = [row.task_id for row in await store.list() if row.task_id != task_id]
        assert lead.children == [child_id]  # saved as the child started; the child names its parent
        assert lead.tool_calls == 1
        child = await store.load(child_id)
        assert child is not None
        assert child.parent_task_id == task_id
        assert str(child.phase) == "act"
        key = f"{child_id}:1:{CHARGE_ID}"
        effects, calls = await read_ledger(ledger)
        assert effects == [(key, "O-1")]
        (killed_pid,) = {pid for _, _, pid in calls}
        await released(db, task_id, child_id)

        tree = crash_worker.build_tree(
            db,
            ledger,
            "resume",
            crash_worker.LEAD_SCRIPT[len(lead.responses) :],
            crash_worker.SCRIPT[len(child.responses) :],
        )
        with anyio.fail_after(DEADLINE_S):
            result = await tree.resume(task_id)

        assert result.stop_reason is StopReason.COMPLETED
        assert result.answer == "the child charged it"
        assert result.state.children == [child_id]  # the same child: no fresh one started
        assert result.state.tool_calls == 1  # the delegation run again is the same call
        assert [(o.tool_use_id, o.content) for o in result.state.observations] == [
            (crash_worker.DELEGATE_ID, "charged")
        ]
        effects, calls = await read_ledger(ledger)
        assert effects == [(key, "O-1")]  # one effect
        charges = [(k, pid) for tool, k, pid in calls if tool == "charge"]
        assert charges == [(key, killed_pid), (key, os.getpid())]  # run again, under the same key
        after = await store.load(child_id)
        assert after is not None
        assert after.stop_reason is StopReason.COMPLETED
        assert sorted(row.task_id for row in await store.list()) == sorted([task_id, child_id])


@pytest.mark.asyncio_only  # the work is in the workers: one event loop is enough
async def test_a_run_killed_before_its_next_model_call_resumes_in_a_new_process(tmp_path: Path) -> None:
    """SIGKILL between the post-batch checkpoint and the next model call: a fresh worker resumes
    it, no tool runs again, and the run completes under its original ids."""
    db, ledger, task_id = tmp_path / "runs.db", tmp_path / "ledger.db", "crash-before-model"
    key = f"{task_id}:1:{CHARGE_ID}"
    await kill_at(crash_worker.MODEL_CALL, db, ledger, "kill-before-model", task_id)

    before = await stored(db, task_id)
    assert str(before.phase) == "observe"
    assert before.step == 1
    assert [(o.tool_use_id, o.outcome) for o in before.observations] == [(READ_ID, "ok"), (CHARGE_ID, "ok")]
    effects_before, calls_before = await read_ledger(ledger)
    assert effects_before == [(key, "O-1")]
    assert sorted(tool for tool, _, _ in calls_before) == ["charge", "read_order"]

    report = await run_worker(db, ledger, "resume", task_id)

    assert report["stop_reason"] == "completed"
    assert report["answer"] == "charged"
    state = LoopState.from_json(json.dumps(report["state"]))
    assert state.task_id == task_id
    assert state.trace_id == before.trace_id
    assert report["events"][0]["kind"] == "resumed"
    assert report["events"][0]["from_phase"] == "observe"
    assert report["events"][0]["interrupted"] is True
    assert state.step == 2
    assert_valid_transcript(state.messages)
    assert len(state.observations) == 2  # the recorded results were kept, not redone
    assert await read_ledger(ledger) == (effects_before, calls_before)  # no tool ran again


@pytest.mark.asyncio_only  # the work is in the workers: one event loop is enough
async def test_an_approval_round_trip_across_processes(tmp_path: Path) -> None:
    """One process stops for approval of two refunds; a new process resumes it approving one and
    denying one: the approved refund lands once, the denied never, and the model sees the reason."""
    db, ledger, task_id = tmp_path / "runs.db", tmp_path / "ledger.db", "refunds"
    first = await run_worker(db, ledger, "run-approval", task_id)
    assert first == {"stop_reason": "needs_human", "pending": list(REFUND_IDS)}
    assert await read_ledger(ledger) == ([], [])  # nothing ran: the batch waits as a whole
    [row] = await SQLiteStore(db).list()
    assert (row.task_id, row.status) == (task_id, "waiting")
    waiting = await stored(db, task_id)

    approved, denied = REFUND_IDS
    decisions = {approved: True, denied: "over the refund limit"}
    report = await run_worker(db, ledger, "resume-approval", task_id, json.dumps(decisions))

    assert report["stop_reason"] == "completed"
    state = LoopState.from_json(json.dumps(report["state"]))
    assert state.task_id == task_id
    assert state.trace_id == waiting.trace_id
    assert report["events"][0]["kind"] == "resumed"
    assert report["events"][0]["approvals"] == decisions
    assert state.step == 2
    assert_valid_transcript(state.messages)
    seen = json.loads(report["answer"])  # the scripted model answers with the tool results it was sent
    assert seen[approved] == {"content": "refunded O-1", "is_error": False}
    assert seen[denied]["is_error"] is True
    assert "denied by a human: over the refund limit" in seen[denied]["content"]
    key = f"{task_id}:1:{approved}"
    effects, calls = await read_ledger(ledger)
    assert effects == [(key, "O-1")]  # the approved refund, once; the denied one never
    assert [(tool, k) for tool, k, _ in calls] == [("issue_refund", key)]
