"""Workers sharing one PostgreSQL: a task runs in one worker at a time, and a run a killed
worker leaves behind is recovered by another with its side effect applied exactly once.

Each test starts `tests/pg_worker.py` processes and coordinates with them through their
stdin and stdout (a worker says where it is; the parent tells it to go on), never by sleeping.
The side-effecting tool writes its effect into a table of the same database under its
idempotency key, once (`ON CONFLICT DO NOTHING`), and a row per invocation, so "exactly once"
is checked in the database.
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.to_thread
import psycopg
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from boundloop import LoopState, StopReason
from boundloop.checkpoint import PostgresStore
from boundloop.checkpoint.postgres import lease_key
from tests import pg_worker
from tests.helpers import assert_valid_transcript
from tests.pg_worker import BUSY, CHARGE_ID, DONE, IN_FLIGHT, READY

ROOT: Final = Path(__file__).resolve().parents[1]
DEADLINE_S: Final = 30.0
"""The most a worker may take to reach its next line (a slow, shared CI machine)."""

pytestmark = pytest.mark.asyncio_only  # the work is in the workers


class Worker:
    """A running `tests/pg_worker.py`: its lines read one by one, lines written to its stdin."""

    def __init__(self, process: Process) -> None:
        assert process.stdout is not None
        self.process = process
        self.stdout = BufferedByteReceiveStream(process.stdout)
        self.lines: list[str] = []

    @property
    def pid(self) -> int:
        return self.process.pid

    async def line(self) -> str:
        """Its next line of stdout."""
        with anyio.fail_after(DEADLINE_S):
            try:
                line = (await self.stdout.receive_until(b"\n", 1 << 22)).decode()
            except (anyio.EndOfStream, anyio.IncompleteRead):
                code = await self.process.wait()
                raise AssertionError(f"worker {self.pid} exited ({code}); stdout: {self.lines}") from None
        self.lines.append(line)
        return line

    async def expect(self, prefix: str) -> str:
        """Read lines until one starts with `prefix`; that line."""
        while not (line := await self.line()).startswith(prefix):
            pass
        return line

    async def tell(self, line: str = "go on") -> None:
        """Write one line to its stdin."""
        assert self.process.stdin is not None
        await self.process.stdin.send(f"{line}\n".encode())

    async def kill(self) -> None:
        """SIGKILL it and wait until it is gone."""
        self.process.kill()
        with anyio.fail_after(DEADLINE_S):
            assert await self.process.wait() == -signal.SIGKILL


@contextlib.asynccontextmanager
async def worker(dsn: str, *argv: str) -> AsyncIterator[Worker]:
    """Start a worker; killed at the end if it is still running (no orphans on a failure)."""
    command = [sys.executable, "tests/pg_worker.py", dsn, *argv]
    # stderr is inherited: pytest shows a worker's traceback with the failing test.
    async with await anyio.open_process(command, cwd=ROOT, stderr=None) as process:
        try:
            yield Worker(process)
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
            with anyio.fail_after(DEADLINE_S, shield=True):
                await process.wait()


def done(line: str) -> dict[str, Any]:
    """The result a worker printed as `DONE {json}`."""
    assert line.startswith(f"{DONE} "), line
    result: dict[str, Any] = json.loads(line.removeprefix(f"{DONE} "))
    return result


async def ledger(dsn: str) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, int]]]:
    return await anyio.to_thread.run_sync(pg_worker.read_ledger, dsn)


def wait_for_release(dsn: str, task_id: str) -> None:
    """Block until nobody holds `task_id`'s lease: take its advisory lock, waiting, then let go.

    A killed worker's session ends when the server sees its socket close, a moment after the
    kill: this waits for exactly that, in the database, instead of sleeping.
    """
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '30s'")
        conn.execute("SELECT pg_advisory_lock(%s)", (lease_key(task_id),))
        conn.execute("SELECT pg_advisory_unlock(%s)", (lease_key(task_id),))


async def crash_in_flight(dsn: str, task_id: str) -> int:
    """A worker runs `task_id` until `charge` has applied its effect, and is SIGKILLed there;
    its pid."""
    async with worker(dsn, "run", task_id, "--hold") as first:
        await first.expect(IN_FLIGHT)
        await first.kill()
    await anyio.to_thread.run_sync(wait_for_release, dsn, task_id)
    return first.pid


async def test_two_workers_resuming_one_task_at_once_run_it_once(postgres_dsn: str) -> None:
    """Two workers resume the same interrupted run at the same moment: one runs it, the other
    gets TaskBusy at once; the charge lands once, run again only by the winner."""
    task_id = "race"
    key = f"{task_id}:1:{CHARGE_ID}"
    await anyio.to_thread.run_sync(pg_worker.init_ledger, postgres_dsn)
    killed = await crash_in_flight(postgres_dsn, task_id)

    async with (
        worker(postgres_dsn, "resume", task_id, "--hold") as one,
        worker(postgres_dsn, "resume", task_id, "--hold") as two,
    ):
        await one.expect(READY)
        await two.expect(READY)  # both loaded the run and wait at the barrier
        await one.tell()
        await two.tell()
        first: dict[int, str] = {}

        async def outcome(each: Worker) -> None:
            first[each.pid] = await each.line()

        async with anyio.create_task_group() as group:
            group.start_soon(outcome, one)
            group.start_soon(outcome, two)
        assert sorted(first.values()) == [f"{BUSY} {task_id}", IN_FLIGHT], first
        winner, loser = (one, two) if first[one.pid] == IN_FLIGHT else (two, one)
        # The winner holds the run (its charge is in flight) while the loser was refused.
        await winner.tell()
        result = done(await winner.line())
        assert await loser.process.wait() == 0
        assert await winner.process.wait() == 0

    assert result["stop_reason"] == "completed"
    assert result["answer"] == "charged"
    effects, calls = await ledger(postgres_dsn)
    assert effects == [(key, "O-1", killed)]
    assert calls == [("charge", key, killed), ("charge", key, winner.pid)]


async def test_a_killed_workers_run_is_recovered_by_another_with_its_effect_once(postgres_dsn: str) -> None:
    """Worker 1 is SIGKILLed while its side-effecting tool is in flight; worker 2, polling the
    running runs (on trio), could not take the run while worker 1 lived, and recovers it after:
    the run completes under its ids, the effect applied once, the tool called twice, one key."""
    task_id = "orphan"
    key = f"{task_id}:1:{CHARGE_ID}"
    await anyio.to_thread.run_sync(pg_worker.init_ledger, postgres_dsn)

    async with worker(postgres_dsn, "run", task_id, "--hold") as first:
        await first.expect(IN_FLIGHT)
        async with worker(postgres_dsn, "recover", "--backend", "trio") as second:
            await second.expect(READY)
            # Worker 1 is alive and holds the run: worker 2 sees it running and is refused.
            assert await second.line() == f"{BUSY} {task_id}"
            async with PostgresStore(postgres_dsn) as store:
                before = await store.load(task_id)
            assert before is not None
            assert (str(before.phase), before.turn is not None) == ("act", True)
            assert before.turn is not None
            assert before.turn.answers == [None]  # the charge is an intent: no result recorded
            await first.kill()
            result = done(await second.line())
            assert await second.process.wait() == 0

    assert result["stop_reason"] == "completed"
    assert result["answer"] == "charged"
    state = LoopState.from_json(json.dumps(result["state"]))
    assert (state.task_id, state.trace_id) == (task_id, before.trace_id)
    assert result["events"][0]["kind"] == "resumed"
    assert result["events"][0]["interrupted"] is True
    assert_valid_transcript(state.messages)
    assert [(o.tool_use_id, o.outcome) for o in state.observations] == [(CHARGE_ID, "ok")]
    effects, calls = await ledger(postgres_dsn)
    assert effects == [(key, "O-1", first.pid)]  # applied once, by the worker that was killed
    assert calls == [("charge", key, first.pid), ("charge", key, second.pid)]  # called again, same key
    async with PostgresStore(postgres_dsn) as store:
        assert await store.list(status="running") == []
        [row] = await store.list()
    assert (row.task_id, row.status, row.stop_reason) == (task_id, "stopped", StopReason.COMPLETED)
