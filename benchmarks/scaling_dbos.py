"""`python -m benchmarks.scaling_dbos [--quick] [--dsn DSN]`: DurableLoop workers fed by a DBOS queue.

Measures, on this machine, with the same scripted loop as `benchmarks.scaling` (one tool call,
then an answer) run as a DBOS workflow (`boundloop.integrations.dbos.DurableLoop`), its
checkpoints in a `PostgresStore` on the same database:

- runs per second with 1 and 2 worker processes serving one queue (16 runs at a time each),
  the runs submitted by this process through a `DBOSClient`, from the first submission to the
  last result;
- recovery time after a SIGKILL: from the kill of a worker whose tool is in flight to the
  run's result, when a live worker is told at once to take the dead worker's runs
  (`DurableLoop.recover`). Noticing that a worker died is the deployment's job (or DBOS
  Conductor's) and is not included.

Without `--dsn`, a throwaway server is started (`initdb`/`pg_ctl`, as the tests do).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import sys
import time
from collections.abc import AsyncIterator, Sequence
from typing import Final

import anyio
import anyio.to_thread
from anyio.abc import Process

from benchmarks.scaling import Worker, build_loop, throwaway_databases

QUEUE: Final = "bench"
WORKFLOW: Final = "boundloop.bench"
CONCURRENCY: Final = 16
POLL_S: Final = 0.02


# -- the workers -----------------------------------------------------------------------------


async def worker_main(dsn: str, name: str, mode: str) -> None:
    """Launch DBOS as executor `name` and serve the queue; `hold`: the first tool call blocks.

    Prints READY; then each stdin line `recover EXECUTOR` hands that worker's runs to the live
    workers and prints RECOVERED. Ends with stdin.
    """
    from dbos import DBOS

    from boundloop.checkpoint import PostgresStore
    from boundloop.integrations.dbos import DurableLoop

    async with PostgresStore(dsn) as store:
        durable = DurableLoop(build_loop(store, 1 << 20, hold=mode == "hold"), name=WORKFLOW)
        DBOS(
            config={
                "name": "boundloop-bench",
                "system_database_url": dsn,
                "executor_id": name,
                "application_version": "bench",
                "log_level": "WARNING",
            }
        )
        DBOS.launch()
        try:
            await DBOS.register_queue_async(
                QUEUE, worker_concurrency=CONCURRENCY, polling_interval_sec=POLL_S
            )
            print("READY", flush=True)
            while line := await anyio.to_thread.run_sync(sys.stdin.readline):
                command, _, executor = line.strip().partition(" ")
                if command == "recover":
                    await durable.recover(executor, queue=QUEUE)
                    print("RECOVERED", flush=True)
        finally:
            DBOS.destroy()


# -- the parent ------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def worker(dsn: str, name: str, mode: str = "serve") -> AsyncIterator[Worker]:
    command = [sys.executable, "-m", "benchmarks.scaling_dbos", "worker", dsn, name, mode]
    async with await anyio.open_process(command, stderr=None) as process:
        try:
            yield Worker(process)
        finally:
            await _stop(process)


async def _stop(process: Process) -> None:
    if process.stdin is not None:
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
    with anyio.move_on_after(30, shield=True):
        await process.wait()
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        with anyio.CancelScope(shield=True):
            await process.wait()


@contextlib.asynccontextmanager
async def dbos_client(dsn: str) -> AsyncIterator[object]:
    from dbos import DBOSClient

    client = await anyio.to_thread.run_sync(lambda: DBOSClient(system_database_url=dsn))
    try:
        yield client
    finally:
        await anyio.to_thread.run_sync(client.destroy)


async def runs_per_second(dsn: str, workers: int, runs: int) -> float:
    """Submit `runs` runs to `workers` worker processes: runs over the wall time."""
    from dbos import DBOSClient

    from boundloop.integrations.dbos import submit

    async with contextlib.AsyncExitStack() as stack:
        started = [await stack.enter_async_context(worker(dsn, f"w{index}")) for index in range(workers)]
        for each in started:
            await each.expect("READY")
        client = await stack.enter_async_context(dbos_client(dsn))
        assert isinstance(client, DBOSClient)
        began = time.perf_counter()
        handles = [
            await submit(client, workflow=WORKFLOW, queue=QUEUE, goal="Look k up.", task_id=f"r-{index}")
            for index in range(runs)
        ]
        for handle in handles:
            await handle.result(poll_s=POLL_S)
        return runs / (time.perf_counter() - began)


async def recovery_seconds(dsn: str, task_id: str) -> float:
    """SIGKILL a worker with a tool in flight; seconds until the run's result, recovered by another."""
    from dbos import DBOSClient

    from boundloop.integrations.dbos import submit

    async with dbos_client(dsn) as client, contextlib.AsyncExitStack() as stack:
        assert isinstance(client, DBOSClient)
        # The doomed worker is alone on the queue when the run is submitted, so it takes it; the
        # live worker starts once the tool is in flight, and is ready before the kill.
        doomed = await stack.enter_async_context(worker(dsn, f"dead-{task_id}", "hold"))
        await doomed.expect("READY")
        handle = await submit(client, workflow=WORKFLOW, queue=QUEUE, goal="Look k up.", task_id=task_id)
        await doomed.expect("IN_FLIGHT")
        live = await stack.enter_async_context(worker(dsn, f"live-{task_id}"))
        await live.expect("READY")
        killed = time.perf_counter()
        doomed.process.kill()
        await doomed.process.wait()
        assert live.process.stdin is not None
        await live.process.stdin.send(f"recover dead-{task_id}\n".encode())
        await handle.result(poll_s=POLL_S)
        return time.perf_counter() - killed


async def measure(dsn: str | None, quick: bool) -> None:
    runs, kills = (100, 3) if quick else (400, 10)
    async with throwaway_databases(dsn) as database:
        print(f"DBOS, {runs} runs, {CONCURRENCY} at a time per worker, {kills} kills")
        for workers in (1, 2):
            rate = await runs_per_second(await database(), workers, runs)
            print(f"  {workers} worker process{'es' if workers > 1 else ''}: {rate:,.0f} runs/s")
        times = [await recovery_seconds(await database(), f"kill-{index}") for index in range(kills)]
        print(
            f"  recovery after SIGKILL: median {statistics.median(times) * 1000:.0f} ms, "
            f"max {max(times) * 1000:.0f} ms (recover() called at once; result polled every "
            f"{POLL_S * 1000:.0f} ms)"
        )


def main(argv: Sequence[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["worker"]:
        anyio.run(worker_main, args[1], args[2], args[3])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="fewer runs and kills")
    parser.add_argument("--dsn", help="an existing, empty database (default: a throwaway server)")
    options = parser.parse_args(args)
    anyio.run(functools.partial(measure, options.dsn, options.quick))


if __name__ == "__main__":
    main()
