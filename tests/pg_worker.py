"""A worker process for the PostgreSQL tests: runs, resumes or recovers loops on a PostgresStore.

    python tests/pg_worker.py DSN MODE [TASK_ID] [--hold] [--backend asyncio|trio]

MODE is one of:

- `run TASK_ID`: run the charge loop as TASK_ID from the start;
- `resume TASK_ID`: load TASK_ID, print `READY`, wait for a line on stdin (the parent's
  barrier), then resume it; print `BUSY TASK_ID` if another worker holds it;
- `recover`: print `READY`, then do what a worker recovering orphaned runs does: list the
  runs in status `running` and resume each, printing `BUSY TASK_ID` the first time one is
  held by another worker; exit once it has resumed one.

A finished run is printed as `DONE {result JSON}`. With `--hold`, the side-effecting `charge`
tool applies its effect, prints `IN_FLIGHT` and waits for a line on stdin before it returns,
so the parent can SIGKILL the worker, or let it go on, while the call is in flight.

The ledger is two tables in the same database (`init_ledger`): `effects` holds one row per
idempotency key whose effect was applied (`ON CONFLICT DO NOTHING`), `calls` one row per
invocation of the handler, with the worker's process id.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Sequence
from typing import Any, Final

import anyio
import anyio.to_thread
import psycopg

from boundloop import AgentLoop, Budget, Observers, ToolContext, tool
from boundloop.checkpoint import PostgresStore
from boundloop.errors import TaskBusy
from boundloop.testing import ScriptedClient, ScriptItem

IN_FLIGHT: Final = "IN_FLIGHT"
READY: Final = "READY"
BUSY: Final = "BUSY"
DONE: Final = "DONE"
POLL_S: Final = 0.02
"""How often `recover` lists the running runs again."""
CHARGE_ID: Final = "toolu_charge"
GOAL: Final = "Charge order O-1."
SCRIPT: Final[list[ScriptItem]] = [
    {
        "stop_reason": "tool_use",
        "content": [{"type": "tool_use", "id": CHARGE_ID, "name": "charge", "input": {"order_id": "O-1"}}],
        "usage": {"input_tokens": 10, "output_tokens": 5},
    },
    {
        "stop_reason": "end_turn",
        "content": [{"type": "text", "text": "charged"}],
        "usage": {"input_tokens": 10, "output_tokens": 5},
    },
]
LEDGER: Final = (
    "CREATE TABLE effects (key text PRIMARY KEY, order_id text NOT NULL, pid integer NOT NULL)",
    "CREATE TABLE calls (seq bigserial PRIMARY KEY, tool text NOT NULL, key text NOT NULL, "
    "pid integer NOT NULL)",
)


def init_ledger(dsn: str) -> None:
    """Create the ledger's tables (blocking)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in LEDGER:
            conn.execute(statement)


def read_ledger(dsn: str) -> tuple[list[tuple[str, str, int]], list[tuple[str, str, int]]]:
    """The effects `(key, order_id, pid)` and calls `(tool, key, pid)`, in order (blocking)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        effects = conn.execute("SELECT key, order_id, pid FROM effects ORDER BY key").fetchall()
        calls = conn.execute("SELECT tool, key, pid FROM calls ORDER BY seq").fetchall()
    return [(str(k), str(o), int(p)) for k, o, p in effects], [(str(t), str(k), int(p)) for t, k, p in calls]


def _record(dsn: str, key: str, order_id: str) -> None:
    """One invocation of `charge`: a call row, and the effect once per key (blocking)."""
    with psycopg.connect(dsn) as conn, conn.transaction():
        conn.execute("INSERT INTO calls (tool, key, pid) VALUES ('charge', %s, %s)", (key, os.getpid()))
        conn.execute(
            "INSERT INTO effects (key, order_id, pid) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING",
            (key, order_id, os.getpid()),
        )


def say(line: str) -> None:
    """One line to the parent."""
    print(line, flush=True)


async def wait_for_parent() -> None:
    """Block until the parent writes a line (or closes stdin)."""
    await anyio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)


def build_loop(dsn: str, store: PostgresStore, script: Sequence[ScriptItem], *, hold: bool) -> AgentLoop:
    """The charge loop on `store`, its tool writing to the ledger in `dsn`."""

    @tool(side_effect=True)
    async def charge(order_id: str, ctx: ToolContext) -> str:
        """Charge an order's card (once per idempotency key)."""
        await anyio.to_thread.run_sync(_record, dsn, ctx.idempotency_key, order_id)
        if hold:
            say(IN_FLIGHT)
            await wait_for_parent()
        return f"charged {order_id}"

    return AgentLoop(
        ScriptedClient(script),
        model="claude-sonnet-4-6",
        tools=[charge],
        budget=Budget(max_steps=4, max_tool_calls=4),
        observers=Observers(metrics=None),
        store=store,
        name="pg_worker",
    )


async def resume(dsn: str, store: PostgresStore, task_id: str, *, hold: bool) -> str:
    """Resume `task_id` with the rest of the script: its result, or BUSY."""
    state = await store.load(task_id)
    assert state is not None, f"{task_id} is not stored"
    loop = build_loop(dsn, store, SCRIPT[len(state.responses) :], hold=hold)
    try:
        result = await loop.resume(task_id)
    except TaskBusy:
        return f"{BUSY} {task_id}"
    return f"{DONE} {result.to_json()}"


async def recover(dsn: str, store: PostgresStore) -> None:
    """Resume interrupted runs as they are found, skipping those another worker holds."""
    busy: set[str] = set()
    while True:
        for run in await store.list(status="running"):
            outcome = await resume(dsn, store, run.task_id, hold=False)
            if outcome.startswith(DONE):
                say(outcome)
                return
            if run.task_id not in busy:
                busy.add(run.task_id)
                say(outcome)
        await anyio.sleep(POLL_S)


async def main(dsn: str, mode: str, task_id: str | None, hold: bool) -> None:
    """Do what `mode` says, on one store closed at the end."""
    async with PostgresStore(dsn) as store:
        if mode == "recover":
            say(READY)
            await recover(dsn, store)
        elif mode == "resume":
            assert task_id is not None
            say(READY)
            await wait_for_parent()
            say(await resume(dsn, store, task_id, hold=hold))
        else:
            assert task_id is not None
            result = await build_loop(dsn, store, SCRIPT, hold=hold).run(GOAL, task_id=task_id)
            say(f"{DONE} {result.to_json()}")


def cli(argv: Sequence[str]) -> int:
    """Parse the command line and run `main` on the chosen backend."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dsn")
    parser.add_argument("mode", choices=("run", "resume", "recover"))
    parser.add_argument("task_id", nargs="?")
    parser.add_argument("--hold", action="store_true")
    parser.add_argument("--backend", choices=("asyncio", "trio"), default="asyncio")
    args: Any = parser.parse_args(argv)
    anyio.run(functools.partial(main, args.dsn, args.mode, args.task_id, args.hold), backend=args.backend)
    return 0


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
