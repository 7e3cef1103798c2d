"""A DBOS worker process for the kill test: a `DurableLoop` serving the queue `agents`.

    python tests/dbos_worker.py DSN EXECUTOR_ID MODE

It launches DBOS on DSN (the system database, shared by every worker) as executor EXECUTOR_ID,
serves the queue `agents`, checkpoints the loop to DSN too (`PostgresStore`), and prints `READY`.
MODE is one of:

- `hang`: the first `charge` in this process applies its effect, prints `IN_FLIGHT` and blocks,
  so the parent can SIGKILL the process while the tool is in flight;
- `serve`: runs what it dequeues; each line `recover EXECUTOR` on stdin hands that dead worker's
  runs to the live workers (`DurableLoop.recover`) and prints `RECOVERED` and the task ids as
  JSON; it exits at the end of stdin;
- `approve`: as `serve`, but `charge` requires a human's approval (the run waits for it inside
  its workflow: `DurableLoop.decide`).

Every worker also serves the workflow `LEAD_WORKFLOW`: a lead whose one tool, `charges`, runs
the charges loop as a delegated child (`as_tool`, checkpointed to DSN); the delegation is one of
the lead's steps. In `hang` mode, the child's first `charge` hangs as above.

The tools and the model write to DSN's tables: `effects` holds one row per idempotency key whose
effect was applied (`ON CONFLICT DO NOTHING`), `calls` one row per tool invocation, and
`model_calls` one row per request that reached the model (with the process and the turn).
Importing this module has no side effects.
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final

import anyio
import psycopg
from anthropic.types import Message
from dbos import DBOS

from boundloop import AgentLoop, Budget, Observers, ToolContext, tool
from boundloop.checkpoint import PostgresStore
from boundloop.integrations.dbos import DurableLoop
from boundloop.testing import parse_message

MODES: Final = ("hang", "serve", "approve")
QUEUE: Final = "agents"
WORKFLOW: Final = "boundloop.charges"
READY: Final = "READY"
LEAD_WORKFLOW: Final = "boundloop.lead"
DELEGATE_ID: Final = "toolu_delegate"
IN_FLIGHT: Final = "IN_FLIGHT"
RECOVERED: Final = "RECOVERED"
HANG_S: Final = 120.0
"""How long a worker waiting to be killed waits before it gives up (no orphans if a test dies)."""
GOAL: Final = "Charge order O-1 once it is confirmed."

SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS effects (key TEXT PRIMARY KEY, order_id TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS calls (seq SERIAL PRIMARY KEY, tool TEXT NOT NULL, key TEXT NOT NULL, "
    "pid INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS model_calls (seq SERIAL PRIMARY KEY, executor TEXT NOT NULL, "
    "turn INTEGER NOT NULL)",
)

JSON = dict[str, Any]


def init_tables(dsn: str) -> None:
    """Create the tables the tools and the model write to (blocking)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for statement in SCHEMA:
            conn.execute(statement)


def read_tables(dsn: str) -> tuple[list[tuple[str, str]], list[tuple[str, str, int]], list[tuple[str, int]]]:
    """`effects` (key, order_id), `calls` (tool, key, pid) and `model_calls` (executor, turn), in order."""
    with psycopg.connect(dsn) as conn:
        effects = conn.execute("SELECT key, order_id FROM effects ORDER BY key").fetchall()
        calls = conn.execute("SELECT tool, key, pid FROM calls ORDER BY seq").fetchall()
        models = conn.execute("SELECT executor, turn FROM model_calls ORDER BY seq").fetchall()
    return (
        [(str(k), str(o)) for k, o in effects],
        [(str(t), str(k), int(p)) for t, k, p in calls],
        [(str(e), int(t)) for e, t in models],
    )


async def execute(dsn: str, statement: str, *params: object) -> None:
    """One statement on its own connection."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        await conn.execute(statement, params)


def response(turn: int) -> JSON:
    """The model's answer at `turn`: read the order, then charge it, then say so."""
    usage = {"input_tokens": 10, "output_tokens": 5}
    if turn == 1:
        block = {"type": "tool_use", "id": "toolu_read", "name": "read_order", "input": {"order_id": "O-1"}}
    elif turn == 2:
        block = {"type": "tool_use", "id": "toolu_charge", "name": "charge", "input": {"order_id": "O-1"}}
    else:
        return {"stop_reason": "end_turn", "content": [{"type": "text", "text": "charged"}], "usage": usage}
    return {"stop_reason": "tool_use", "content": [block], "usage": usage}


class _Messages:
    def __init__(self, dsn: str, executor: str) -> None:
        self._dsn = dsn
        self._executor = executor

    async def create(self, **request: Any) -> Message:
        messages: Sequence[Mapping[str, Any]] = request["messages"]
        turn = 1 + sum(1 for message in messages if message["role"] == "assistant")
        await execute(
            self._dsn, "INSERT INTO model_calls (executor, turn) VALUES (%s, %s)", self._executor, turn
        )
        return parse_message(response(turn), model=str(request["model"]))


class CountingModel:
    """A deterministic model that answers by turn and records each request it gets in `model_calls`."""

    def __init__(self, dsn: str, executor: str) -> None:
        self.messages = _Messages(dsn, executor)


def build_loop(dsn: str, executor: str, mode: str) -> AgentLoop:
    """The charges loop: read the order, then charge it (a side effect, once per key)."""
    hang = mode == "hang"

    @tool
    async def read_order(order_id: str, ctx: ToolContext) -> str:
        """Read one order."""
        await execute(
            dsn,
            "INSERT INTO calls (tool, key, pid) VALUES (%s, %s, %s)",
            "read_order",
            ctx.idempotency_key,
            os.getpid(),
        )
        return f"{order_id}: confirmed, EUR 40"

    @tool(side_effect=True, requires_approval=mode == "approve")
    async def charge(order_id: str, ctx: ToolContext) -> str:
        """Charge an order's card (once per idempotency key)."""
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            await conn.execute(
                "INSERT INTO calls (tool, key, pid) VALUES (%s, %s, %s)",
                ("charge", ctx.idempotency_key, os.getpid()),
            )
            await conn.execute(
                "INSERT INTO effects (key, order_id) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
                (ctx.idempotency_key, order_id),
            )
        if hang:
            print(IN_FLIGHT, flush=True)
            with anyio.fail_after(HANG_S):
                await anyio.sleep_forever()
        return f"charged {order_id}"

    return AgentLoop(
        CountingModel(dsn, executor),
        model="claude-sonnet-4-6",
        tools=[read_order, charge],
        budget=Budget(max_steps=4),
        observers=Observers(metrics=None),
        store=PostgresStore(dsn),
        name="charges",
    )


class _LeadMessages:
    async def create(self, **request: Any) -> Message:
        messages: Sequence[Mapping[str, Any]] = request["messages"]
        usage = {"input_tokens": 10, "output_tokens": 5}
        if len(messages) == 1:
            block = {"type": "tool_use", "id": DELEGATE_ID, "name": "charges", "input": {"task": GOAL}}
            answer: JSON = {"stop_reason": "tool_use", "content": [block], "usage": usage}
        else:
            answer = {
                "stop_reason": "end_turn",
                "content": [{"type": "text", "text": "delegated"}],
                "usage": usage,
            }
        return parse_message(answer, model=str(request["model"]))


class LeadModel:
    """The lead's model: delegate the charge, then say so."""

    def __init__(self) -> None:
        self.messages = _LeadMessages()


def build_lead(dsn: str, executor: str, mode: str) -> AgentLoop:
    """A lead that delegates to the charges loop (`build_loop`), both checkpointed to DSN."""
    child = build_loop(dsn, executor, mode)
    return AgentLoop(
        LeadModel(),
        model="claude-sonnet-4-6",
        tools=[child.as_tool("charges", description="Charge orders.")],
        budget=Budget(max_steps=3, max_tool_calls=1),
        observers=Observers(metrics=None),
        store=PostgresStore(dsn),
        name="lead",
    )


async def serve_commands(*durables: DurableLoop) -> None:
    """Read `recover EXECUTOR` lines from stdin until it ends."""
    while True:
        line = await anyio.to_thread.run_sync(sys.stdin.readline)
        if not line:
            return
        command, _, executor = line.strip().partition(" ")
        if command == "recover":
            task_ids = [
                task_id for durable in durables for task_id in await durable.recover(executor, queue=QUEUE)
            ]
            print(RECOVERED, flush=True)
            print(json.dumps(task_ids), flush=True)


async def main(dsn: str, executor: str, mode: str) -> int:
    """Launch DBOS as `executor`, serve the queue, and wait (killed, or until stdin ends)."""
    durable = DurableLoop(build_loop(dsn, executor, mode), name=WORKFLOW)
    lead = DurableLoop(build_lead(dsn, executor, mode), name=LEAD_WORKFLOW)
    DBOS(
        config={
            "name": "boundloop-workers",
            "system_database_url": dsn,
            "executor_id": executor,
            "application_version": "boundloop-workers",
            "log_level": "WARNING",
        }
    )
    DBOS.launch()
    await DBOS.register_queue_async(QUEUE, polling_interval_sec=0.05)
    print(READY, flush=True)
    try:
        if mode == "hang":
            await anyio.sleep(HANG_S)
            return 1  # not killed in time
        await serve_commands(durable, lead)
        return 0
    finally:
        DBOS.destroy()


def cli(argv: Sequence[str]) -> int:
    """Parse `DSN EXECUTOR_ID MODE` and run `main`."""
    if len(argv) != 3 or argv[2] not in MODES:
        print(__doc__, file=sys.stderr)
        return 2
    return anyio.run(functools.partial(main, argv[0], argv[1], argv[2]))


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
