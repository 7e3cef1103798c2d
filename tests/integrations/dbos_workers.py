"""The kill tests' workers (`tests/dbos_worker.py` processes) and their session, shared by
tests/integrations/test_kill.py and test_kill_waiting.py.

Coordination goes through the workers' stdout and stdin (no sleeps): a worker prints `READY`
once it serves the queue, `IN_FLIGHT` when a hanging charge has applied its effect, and
`RECOVERED` (then the task ids) after a `recover EXECUTOR` line on its stdin.
"""

from __future__ import annotations

import contextlib
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Final

import anyio
import anyio.to_thread
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from dbos import DBOSClient

from boundloop.integrations.dbos import DurableRun, submit
from tests import dbos_worker

ROOT: Final = Path(__file__).resolve().parents[2]
WORKER: Final = "tests/dbos_worker.py"
DEADLINE_S: Final = 60.0
"""The most a worker may take to start, to reach its marker or to finish (a slow, shared CI machine)."""


class Worker:
    """One worker process: its stdout read line by line, its stdin written to."""

    def __init__(self, process: Process) -> None:
        assert process.stdout is not None
        self.process = process
        self.out = BufferedByteReceiveStream(process.stdout)

    @property
    def pid(self) -> int:
        return self.process.pid

    async def read_until(self, marker: str) -> list[str]:
        """Read stdout until the worker prints `marker`: the lines before it (the lines after
        are read by the next call)."""
        lines: list[str] = []
        while True:
            try:
                line = (await self.out.receive_until(b"\n", 1 << 20)).decode()
            except (anyio.EndOfStream, anyio.IncompleteRead):
                code = await self.process.wait()
                raise AssertionError(f"the worker exited ({code}) before {marker}; stdout: {lines}") from None
            if line == marker:
                return lines
            lines.append(line)

    async def kill(self) -> None:
        """SIGKILL, and its end seen."""
        self.process.kill()
        with anyio.fail_after(DEADLINE_S):
            await self.process.wait()
        assert self.process.returncode == -signal.SIGKILL

    async def recover(self, dead: str) -> str:
        """Hand it the runs of the dead worker `dead`: the task ids it printed (JSON)."""
        assert self.process.stdin is not None
        await self.process.stdin.send(f"recover {dead}\n".encode())
        await self.read_until(dbos_worker.RECOVERED)
        return (await self.out.receive_until(b"\n", 1 << 20)).decode()

    async def finish(self) -> None:
        """Close its stdin: it exits 0."""
        assert self.process.stdin is not None
        await self.process.stdin.aclose()
        with anyio.fail_after(DEADLINE_S):
            assert await self.process.wait() == 0


class Workers:
    """The tables and a `DBOSClient` on `dsn`, and the workers started: `start` one; at the end
    every worker still running is killed and the client destroyed."""

    def __init__(self, dsn: str, client: DBOSClient) -> None:
        self.dsn = dsn
        self.client = client
        self.started: list[Worker] = []

    async def start(self, executor: str, mode: str) -> Worker:
        """A worker `executor` in `mode` (`hang`, `serve`, `approve`), once it printed `READY`."""
        process = await anyio.open_process(
            [sys.executable, WORKER, self.dsn, executor, mode], cwd=ROOT, stderr=None
        )
        worker = Worker(process)
        self.started.append(worker)
        with anyio.fail_after(DEADLINE_S):
            await worker.read_until(dbos_worker.READY)
        return worker

    async def submit(self, task_id: str, *, lead: bool = False) -> DurableRun:
        """Enqueue a run of the workers' loop (`lead`: of the lead, which delegates the charge)."""
        with anyio.fail_after(DEADLINE_S):
            return await submit(
                self.client,
                workflow=dbos_worker.LEAD_WORKFLOW if lead else dbos_worker.WORKFLOW,
                queue=dbos_worker.QUEUE,
                goal="Charge O-1." if lead else dbos_worker.GOAL,
                task_id=task_id,
            )


@contextlib.asynccontextmanager
async def workers(dsn: str) -> AsyncIterator[Workers]:
    """The session of a kill test on `dsn`: see `Workers`."""
    await anyio.to_thread.run_sync(dbos_worker.init_tables, dsn)
    client = await anyio.to_thread.run_sync(lambda: DBOSClient(system_database_url=dsn))
    session = Workers(dsn, client)
    try:
        yield session
    finally:
        for worker in session.started:
            if worker.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.process.kill()
                with anyio.fail_after(DEADLINE_S, shield=True):
                    await worker.process.wait()
        await anyio.to_thread.run_sync(client.destroy)
