"""`python -m benchmarks.scaling [--quick] [--dsn DSN]`: one process on SQLite, workers on PostgreSQL.

Measures, on this machine:

- one process on a `SQLiteStore`: runs per second, and recovery time after a SIGKILL when a
  restarted process resumes the run (process start-up included);

- runs per second with 1 and 2 worker processes sharing one PostgreSQL, each worker running
  many runs concurrently on one `PostgresStore` (a `ScriptedClient`: one tool call, then an
  answer; every run checkpoints at its start, around its tool batch and at its stop, and
  holds its task's lease);
- recovery time after a SIGKILL: from the kill of a worker whose tool is in flight to the
  moment another worker, polling `store.list(status="running")` every 20 ms, has resumed the
  run to its end.

Without `--dsn`, a throwaway server is started (`initdb`/`pg_ctl`, as the tests do). Workers
are this module run as `python -m benchmarks.scaling worker ...`; the parent talks to them
through their stdin and stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import anyio
import anyio.to_thread
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from boundloop import AgentLoop, Budget, CheckpointStore, Observers, SQLiteStore, ToolContext, tool
from boundloop.checkpoint import PostgresStore
from boundloop.errors import NotResumable, TaskBusy
from boundloop.testing import Request, ScriptedClient, ScriptItem

USAGE: Final = {"input_tokens": 10, "output_tokens": 5}
POLL_S: Final = 0.02


def respond(request: Request) -> dict[str, Any]:
    """A model that asks for one lookup, then answers once it has the result."""
    messages: Sequence[Mapping[str, Any]] = request["messages"]  # type: ignore[assignment]
    content = messages[-1]["content"]
    if isinstance(content, list) and any(block.get("type") == "tool_result" for block in content):
        return {"stop_reason": "end_turn", "content": [{"type": "text", "text": "done"}], "usage": USAGE}
    call = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"key": "k"}}
    return {"stop_reason": "tool_use", "content": [call], "usage": USAGE}


def build_loop(store: CheckpointStore, requests: int, *, hold: bool = False) -> AgentLoop:
    """The benchmark loop; with `hold`, its tool says IN_FLIGHT and blocks (to be killed)."""

    @tool(side_effect=True)
    async def lookup(key: str, ctx: ToolContext) -> str:
        """Look a key up."""
        if hold:
            print("IN_FLIGHT", flush=True)
            await anyio.sleep_forever()
        return f"{key}: {ctx.idempotency_key}"

    script: list[ScriptItem] = [respond] * requests
    return AgentLoop(
        ScriptedClient(script),
        model="claude-sonnet-4-6",
        tools=[lookup],
        budget=Budget(max_steps=4),
        observers=Observers(metrics=None),
        store=store,
    )


async def read_line(stdin: BufferedByteReceiveStream) -> str:
    return (await stdin.receive_until(b"\n", 1 << 16)).decode()


# -- the workers -----------------------------------------------------------------------------


async def throughput_worker(dsn: str, runs: int, concurrency: int) -> None:
    """Print READY, wait for a line, run `runs` runs `concurrency` at a time, print DONE."""
    async with PostgresStore(dsn, max_size=concurrency) as store:
        await store.list()  # connect and migrate before the clock starts
        loop = build_loop(store, 2 * runs)
        limiter = anyio.CapacityLimiter(concurrency)
        print("READY", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)

        async def one() -> None:
            async with limiter:
                await loop.run("Look k up.")

        async with anyio.create_task_group() as group:
            for _ in range(runs):
                group.start_soon(one)
        print("DONE", flush=True)


async def hold_worker(dsn: str, task_id: str) -> None:
    """Run `task_id` until its tool is in flight, and block there."""
    async with PostgresStore(dsn) as store:
        await build_loop(store, 2, hold=True).run("Look k up.", task_id=task_id)


async def hold_sqlite_worker(path: str, task_id: str) -> None:
    """Run `task_id` on the SQLite file `path` until its tool is in flight, and block there."""
    await build_loop(SQLiteStore(path), 2, hold=True).run("Look k up.", task_id=task_id)


async def resume_sqlite_worker(path: str, task_id: str) -> None:
    """Resume `task_id` from the SQLite file `path` to its end; print RECOVERED."""
    await build_loop(SQLiteStore(path), 2).resume(task_id)
    print("RECOVERED", flush=True)


async def recover_worker(dsn: str) -> None:
    """Print READY, then resume every interrupted run it finds, printing RECOVERED for each."""
    async with PostgresStore(dsn) as store:
        await store.list()
        print("READY", flush=True)
        while True:
            for run in await store.list(status="running"):
                with contextlib.suppress(TaskBusy, NotResumable):
                    await build_loop(store, 2).resume(run.task_id)
                    print("RECOVERED", flush=True)
            await anyio.sleep(POLL_S)


# -- the parent ------------------------------------------------------------------------------


class Worker:
    def __init__(self, process: Process) -> None:
        assert process.stdout is not None
        self.process = process
        self.stdout = BufferedByteReceiveStream(process.stdout)

    async def expect(self, line: str) -> None:
        with anyio.fail_after(120):
            while (got := await read_line(self.stdout)) != line:
                print(f"worker {self.process.pid}: {got}", file=sys.stderr)

    async def tell(self) -> None:
        assert self.process.stdin is not None
        await self.process.stdin.send(b"go\n")


@contextlib.asynccontextmanager
async def worker(*argv: str) -> AsyncIterator[Worker]:
    command = [sys.executable, "-m", "benchmarks.scaling", "worker", *argv]
    async with await anyio.open_process(command, stderr=None) as process:
        try:
            yield Worker(process)
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()


async def runs_per_second(dsn: str, workers: int, runs: int, concurrency: int) -> float:
    """`workers` processes each doing `runs` runs: total runs over the wall time."""
    async with contextlib.AsyncExitStack() as stack:
        started = [
            await stack.enter_async_context(worker("throughput", dsn, str(runs), str(concurrency)))
            for _ in range(workers)
        ]
        for each in started:
            await each.expect("READY")
        began = time.perf_counter()
        for each in started:
            await each.tell()
        for each in started:
            await each.expect("DONE")
        elapsed = time.perf_counter() - began
    return workers * runs / elapsed


async def recovery_seconds(dsn: str, task_id: str) -> float:
    """SIGKILL a worker with a tool in flight: seconds until another worker resumed the run."""
    async with worker("recover", dsn) as recoverer, worker("hold", dsn, task_id) as holder:
        await recoverer.expect("READY")
        await holder.expect("IN_FLIGHT")
        killed = time.perf_counter()
        holder.process.kill()
        await recoverer.expect("RECOVERED")
        return time.perf_counter() - killed


@contextlib.asynccontextmanager
async def throwaway_databases(dsn: str | None) -> AsyncIterator[Callable[[], Awaitable[str]]]:
    """A maker of empty databases: `dsn` every time when given, else new ones on a throwaway server."""
    from tests.postgres import PostgresServer, find_bin_dir

    if dsn is not None:

        async def given() -> str:
            return dsn

        yield given
        return
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit("PostgreSQL not found (initdb, pg_ctl): install it, or pass --dsn")
    server = PostgresServer(bin_dir, fsync=True)  # durable commits, as SQLite's
    await anyio.to_thread.run_sync(server.start)

    async def fresh() -> str:
        return await anyio.to_thread.run_sync(server.create_database, "bench")

    try:
        yield fresh
    finally:
        await anyio.to_thread.run_sync(server.stop)


async def sqlite_runs_per_second(runs: int, concurrency: int) -> float:
    """One process, one `SQLiteStore`: `runs` runs `concurrency` at a time, runs over the wall time."""
    with tempfile.TemporaryDirectory() as directory:
        loop = build_loop(SQLiteStore(Path(directory) / "runs.db"), 2 * runs + 2)
        await loop.run("Look k up.")  # the file and its schema exist before the clock starts
        limiter = anyio.CapacityLimiter(concurrency)

        async def one() -> None:
            async with limiter:
                await loop.run("Look k up.")

        began = time.perf_counter()
        async with anyio.create_task_group() as group:
            for _ in range(runs):
                group.start_soon(one)
        return runs / (time.perf_counter() - began)


async def sqlite_recovery_seconds(task_id: str) -> float:
    """One process with a SQLite file: SIGKILL it with a tool in flight, start a new process that
    resumes the run; seconds from the kill to the end of the resumed run (a restart included)."""
    with tempfile.TemporaryDirectory() as directory:
        db = str(Path(directory) / "runs.db")
        async with worker("hold-sqlite", db, task_id) as holder:
            await holder.expect("IN_FLIGHT")
            killed = time.perf_counter()
            holder.process.kill()
        async with worker("resume-sqlite", db, task_id) as resumer:
            await resumer.expect("RECOVERED")
            return time.perf_counter() - killed


async def measure(dsn: str | None, quick: bool) -> None:
    runs, concurrency, kills = (100, 8, 3) if quick else (500, 16, 10)
    print(f"One process, SQLiteStore, {runs} runs, {concurrency} at a time")
    print(f"  {await sqlite_runs_per_second(runs, concurrency):,.0f} runs/s")
    times = [await sqlite_recovery_seconds(f"kill-{index}") for index in range(kills)]
    print(
        f"  recovery after SIGKILL, by a restarted process: median {statistics.median(times) * 1000:.0f} ms, "
        f"max {max(times) * 1000:.0f} ms"
    )
    async with throwaway_databases(dsn) as database:
        print(f"PostgreSQL, {runs} runs per worker, {concurrency} at a time per worker, {kills} kills")
        for workers in (1, 2):
            rate = await runs_per_second(await database(), workers, runs, concurrency)
            print(f"  {workers} worker process{'es' if workers > 1 else ''}: {rate:,.0f} runs/s")
        target = await database()
        times = [await recovery_seconds(target, f"kill-{time.time_ns()}-{index}") for index in range(kills)]
        print(
            f"  recovery after SIGKILL: median {statistics.median(times) * 1000:.0f} ms, "
            f"max {max(times) * 1000:.0f} ms (polling every {POLL_S * 1000:.0f} ms)"
        )


def main(argv: Sequence[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["worker"]:
        kind, dsn, *rest = args[1:]
        if kind == "throughput":
            anyio.run(throughput_worker, dsn, int(rest[0]), int(rest[1]))
        elif kind == "hold-sqlite":
            anyio.run(hold_sqlite_worker, dsn, rest[0])
        elif kind == "resume-sqlite":
            anyio.run(resume_sqlite_worker, dsn, rest[0])
        elif kind == "hold":
            anyio.run(hold_worker, dsn, rest[0])
        else:
            anyio.run(recover_worker, dsn)
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer runs and kills")
    parser.add_argument("--dsn", help="an existing database (default: a throwaway server)")
    options = parser.parse_args(args)
    anyio.run(functools.partial(measure, options.dsn, options.quick))


if __name__ == "__main__":
    main()
