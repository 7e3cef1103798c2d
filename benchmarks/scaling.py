"""`python -m benchmarks.scaling [--quick] [--dsn DSN]`: PostgresStore across worker processes.

Measures, on this machine:

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
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Final

import anyio
import anyio.to_thread
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from boundloop import AgentLoop, Budget, ToolContext, tool
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


def build_loop(store: PostgresStore, requests: int, *, hold: bool = False) -> AgentLoop:
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
        metrics=None,
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


async def measure(dsn: str | None, quick: bool) -> None:
    from tests.postgres import PostgresServer, find_bin_dir

    server: PostgresServer | None = None
    if dsn is None:
        bin_dir = find_bin_dir()
        if bin_dir is None:
            raise SystemExit("PostgreSQL not found (initdb, pg_ctl): install it, or pass --dsn")
        server = PostgresServer(bin_dir)
        await anyio.to_thread.run_sync(server.start)

    async def database() -> str:
        """The given database, or a new one on the throwaway server."""
        if server is None:
            assert dsn is not None
            return dsn
        return await anyio.to_thread.run_sync(server.create_database, "bench")

    try:
        runs, concurrency, kills = (100, 8, 3) if quick else (500, 16, 10)
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
    finally:
        if server is not None:
            await anyio.to_thread.run_sync(server.stop)


def main(argv: Sequence[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["worker"]:
        kind, dsn, *rest = args[1:]
        if kind == "throughput":
            anyio.run(throughput_worker, dsn, int(rest[0]), int(rest[1]))
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
