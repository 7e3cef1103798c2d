"""`python -m benchmarks.follow [--quick] [--dsn DSN]`: a run followed from a second process.

A worker runs loops on a `PostgresStore` (a `ScriptedClient`: one tool call that takes
10 ms, then an answer); a second process follows each run through `loop.events` (woken
by `LISTEN/NOTIFY`). The delay of an event is from the moment the run's writer calls
`append` for it (its batch: the INSERTs and the commit included) to the moment the follower's
`async for` yields it, both read on this machine's clock. Reported: median, p95 and max.

Without `--dsn`, a throwaway server is started (`initdb`/`pg_ctl`, durable commits), as
`benchmarks.scaling` does.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Final

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream

from benchmarks.scaling import respond, throwaway_databases
from boundloop import AgentLoop, Budget, LoopState, Observers, StoredRun, tool
from boundloop.checkpoint import PostgresStore, Status
from boundloop.events import Event
from boundloop.testing import ScriptedClient, ScriptItem

TOOL_S: Final = 0.01


class Timed:
    """A `PostgresStore` that notes when each event's append was called (the run's writer)."""

    def __init__(self, inner: PostgresStore) -> None:
        self.inner = inner
        self.appended: dict[tuple[str, int], float] = {}

    @property
    def log_deltas(self) -> bool:
        return self.inner.log_deltas

    async def append(self, events: Sequence[Event]) -> None:
        now = time.time()
        for event in events:
            self.appended[(event.task_id, event.seq)] = now
        await self.inner.append(events)

    async def read(self, task_id: str, *, after: int = -1, limit: int = 500) -> list[Event]:
        return await self.inner.read(task_id, after=after, limit=limit)

    async def last_seq(self, task_id: str) -> int:
        return await self.inner.last_seq(task_id)

    async def wait(self, task_id: str, *, after: int, timeout_s: float) -> bool:
        return await self.inner.wait(task_id, after=after, timeout_s=timeout_s)

    async def save(self, state: LoopState) -> None:
        await self.inner.save(state)

    async def load(self, task_id: str) -> LoopState | None:
        return await self.inner.load(task_id)

    async def list(self, *, status: Status | None = None, stop_reason: str | None = None) -> list[StoredRun]:
        return await self.inner.list(status=status, stop_reason=stop_reason)

    async def delete(self, task_id: str) -> bool:
        return await self.inner.delete(task_id)

    def lease(self, task_id: str) -> AbstractAsyncContextManager[None]:
        return self.inner.lease(task_id)


def build_loop(store: Any) -> AgentLoop:
    """One tool call (10 ms), then an answer: 16 events, appended in 5 batches."""

    @tool
    async def lookup(key: str) -> str:
        """Look a key up (10 ms)."""
        await anyio.sleep(TOOL_S)
        return key

    script: list[ScriptItem] = [respond, respond]
    return AgentLoop(
        ScriptedClient(script),
        model="claude-sonnet-4-6",
        tools=[lookup],
        budget=Budget(max_steps=4),
        observers=Observers(metrics=None),
        store=store,
    )


async def follower(dsn: str, task_ids: Sequence[str]) -> None:
    """Follow each task to its stop; print `task seq arrival` per event."""
    async with PostgresStore(dsn) as store:
        loop = AgentLoop(
            ScriptedClient([]), model="claude-sonnet-4-6", budget=Budget(max_steps=1), store=store
        )
        print("READY", flush=True)
        for task_id in task_ids:
            async for event in loop.events(task_id):
                print(f"{task_id} {event.seq} {time.time():.6f}", flush=True)
        print("DONE", flush=True)


async def measure(dsn: str | None, quick: bool) -> list[float]:
    runs = 3 if quick else 50
    task_ids = [f"follow-{index}" for index in range(runs)]
    async with throwaway_databases(dsn) as fresh:
        database = await fresh()
        command = [sys.executable, "-m", "benchmarks.follow", "follower", database, *task_ids]
        async with await anyio.open_process(command, stderr=None) as process:
            assert process.stdout is not None
            lines = BufferedByteReceiveStream(process.stdout)
            assert (await lines.receive_until(b"\n", 1 << 16)) == b"READY"
            arrivals: dict[tuple[str, int], float] = {}

            async def read_all() -> None:
                while (line := (await lines.receive_until(b"\n", 1 << 16)).decode()) != "DONE":
                    task_id, seq, at = line.split()
                    arrivals[(task_id, int(seq))] = float(at)

            async with PostgresStore(database) as inner:
                store = Timed(inner)
                async with anyio.create_task_group() as group:
                    group.start_soon(read_all)
                    for task_id in task_ids:
                        await build_loop(store).run("Look k up.", task_id=task_id)
            await process.wait()
    missing = set(store.appended) ^ set(arrivals)
    assert not missing, f"appended and followed differ: {sorted(missing)[:5]}"
    return [arrivals[key] - store.appended[key] for key in arrivals]


def main(argv: Sequence[str]) -> None:
    if argv and argv[0] == "follower":
        anyio.run(follower, argv[1], argv[2:])
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--dsn")
    args = parser.parse_args(argv)
    delays = sorted(anyio.run(measure, args.dsn, args.quick))
    p95 = delays[min(len(delays) - 1, int(0.95 * len(delays)))]
    print(f"Following runs from a second process on PostgreSQL (LISTEN/NOTIFY): {len(delays)} events")
    print(
        f"  append -> arrival: median {statistics.median(delays) * 1000:.2f} ms, "
        f"p95 {p95 * 1000:.2f} ms, max {delays[-1] * 1000:.2f} ms"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
