"""A store with runs in it for the inspector's tests, and the application loop (`--loop
tests.inspector_runs:build_loop`) that resumes the waiting refund."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import anyio

from boundloop import (
    AgentLoop,
    Budget,
    CheckpointStore,
    Observers,
    Policy,
    ScriptedClient,
    SQLiteStore,
    ToolContext,
    tool,
)
from tests.helpers import text, tool_use

REFUNDS: list[str] = []
"""The idempotency keys the refund tool ran with (in this process)."""
REFUND_HOLDS: list[anyio.Event] = []
"""Events the refund waits for before it refunds (a test holding a resumed run in its tool)."""

HOSTILE_GOAL: Final = "<script>document.title='owned'</script> Check order O-13"
SECRET: Final = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz"
"""A key in a goal: the default patterns redact it wherever a run records it."""


@tool(side_effect=True)
async def refund(order_id: str, amount: float, context: ToolContext) -> str:
    """Refund an order (a side effect: it needs a human's approval)."""
    for hold in REFUND_HOLDS:
        await hold.wait()
    REFUNDS.append(context.idempotency_key)
    return f"refunded {amount} on {order_id}"


@tool
async def read_order(order_id: str) -> str:
    """Read an order."""
    return f"{order_id}: delivered damaged"


def _loop(script: list[dict[str, Any]], store: CheckpointStore | None) -> AgentLoop:
    return AgentLoop(
        ScriptedClient(script),
        model="claude-sonnet-4-6",
        tools=[read_order, refund],
        policy=Policy(requires_approval={"refund"}),
        budget=Budget(max_steps=5),
        observers=Observers(metrics=None),
        store=store,
    )


def build_loop() -> AgentLoop:
    """The application's loop, as `--loop` names it: what the model says after the refund ran."""
    return _loop([text("Refunded O-104: 25 EUR.")], None)


async def fill(store: CheckpointStore) -> None:
    """Four runs: completed, waiting for the refund's approval, a hostile goal, cancelled-like."""
    done = _loop([tool_use(("read_order", {"order_id": "O-7"})), text("O-7 is fine.")], store)
    await done.run("Look at order O-7", task_id="run-completed")
    waiting = _loop(
        [tool_use(("read_order", {"order_id": "O-104"}), ("refund", {"order_id": "O-104", "amount": 25}))],
        store,
    )
    await waiting.run(f"Refund order O-104 if it arrived damaged (key {SECRET})", task_id="run-refund")
    hostile = _loop([text("<b>bold</b> answer")], store)
    await hostile.run(HOSTILE_GOAL, task_id="run-<hostile>")
    steps = AgentLoop(
        ScriptedClient([tool_use(("read_order", {"order_id": "O-9"}))]),
        model="claude-sonnet-4-6",
        tools=[read_order],
        budget=Budget(max_steps=1),
        observers=Observers(metrics=None),
        store=store,
    )
    await steps.run("Read order O-9 again and again", task_id="run-max-steps")


def make_store(path: Path) -> SQLiteStore:
    """A SQLite store at `path` holding the four runs."""
    store = SQLiteStore(path)
    anyio.run(fill, store)
    return store
