"""A worker process for the crash tests: one loop that checkpoints to SQLite, killed or resumed.

    python tests/crash_worker.py DB LEDGER MODE TASK_ID [APPROVALS_JSON]

DB is a SQLite file, or a PostgreSQL DSN (`postgresql://...`: the runs checkpoint there).

MODE is one of:

- `kill-in-tool`: the first `charge` applies its effect, prints `IN_FLIGHT` and blocks, so the
  parent can SIGKILL the process while the tool is in flight;
- `kill-before-model`: the batch runs; the next model call prints `MODEL_CALL` and blocks, so
  the process dies between the post-batch checkpoint and that call;
- `resume`: resume TASK_ID from DB with the rest of the script and print the result as JSON;
- `run-approval`: run the refund loop until it waits for a human and print the pending ids;
- `resume-approval`: resume it with `APPROVALS_JSON` (`{tool_use_id: true | false | reason}`);
- `kill-in-child-tool`: a lead delegates to a child (`as_tool`) whose first `charge` applies
  its effect, prints `IN_FLIGHT` and blocks, so the parent can SIGKILL the whole tree.

The LEDGER is a SQLite file: `effects` holds one row per idempotency key whose effect was
applied (`INSERT OR IGNORE`), `calls` one row per handler invocation (with the process id).
Importing this module has no side effects; the tests build the same loops in-process.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sqlite3
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final, cast

import anyio
import anyio.to_thread

from boundloop import AgentLoop, Budget, CheckpointStore, Observers, SQLiteStore, ToolContext, tool
from boundloop.checkpoint import PostgresStore
from boundloop.testing import Request, ScriptedClient, ScriptItem

JSON = dict[str, Any]

MODES: Final = (
    "kill-in-tool",
    "kill-before-model",
    "resume",
    "run-approval",
    "resume-approval",
    "kill-in-child-tool",
)
IN_FLIGHT: Final = "IN_FLIGHT"
"""Printed by `charge` in `kill-in-tool` mode once its effect is applied."""
MODEL_CALL: Final = "MODEL_CALL"
"""Printed by the model call after the batch in `kill-before-model` mode."""
HANG_S: Final = 120.0
"""How long a worker waiting to be killed waits before it gives up (no orphans if a test dies)."""

READ_ID: Final = "toolu_read"
CHARGE_ID: Final = "toolu_charge"
REFUND_IDS: Final = ("toolu_refund_1", "toolu_refund_2")
GOAL: Final = "Charge order O-1 once it is confirmed."
APPROVAL_GOAL: Final = "Refund orders O-1 and O-2."

SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS effects (key TEXT PRIMARY KEY, order_id TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS calls (seq INTEGER PRIMARY KEY AUTOINCREMENT, tool TEXT NOT NULL, "
    "key TEXT NOT NULL, pid INTEGER NOT NULL)",
)


def tool_use(*calls: tuple[str, JSON, str]) -> JSON:
    """A response asking for tools, one block per (name, input, id)."""
    content = [{"type": "tool_use", "id": i, "name": name, "input": args} for name, args, i in calls]
    return {"stop_reason": "tool_use", "content": content, "usage": {"input_tokens": 10, "output_tokens": 5}}


def text(answer: str) -> JSON:
    """A final response with one text block."""
    return {
        "stop_reason": "end_turn",
        "content": [{"type": "text", "text": answer}],
        "usage": {"input_tokens": 10, "output_tokens": 5},
    }


TURN_1: Final = tool_use(
    ("read_order", {"order_id": "O-1"}, READ_ID),
    ("charge", {"order_id": "O-1"}, CHARGE_ID),
)
"""One batch: a read and a side-effecting charge, run concurrently."""
SCRIPT: Final[list[ScriptItem]] = [TURN_1, text("charged")]
"""The crash script, as the resuming process serves it."""


def hang_in_model_call(request: Request) -> JSON:
    """The model call after the batch: say so on stdout and block until killed."""
    print(MODEL_CALL, flush=True)
    threading.Event().wait(HANG_S)  # blocks the event loop on purpose: the process is about to die
    raise RuntimeError(f"{MODEL_CALL}: not killed within {HANG_S} s")


def echo_tool_results(request: Request) -> JSON:
    """A model that answers with the tool results it was sent, as JSON: what it saw."""
    messages = cast("Sequence[Mapping[str, Any]]", request["messages"])
    blocks = cast("Sequence[Mapping[str, Any]]", messages[-1]["content"])
    seen = {
        str(block["tool_use_id"]): {"content": block["content"], "is_error": block.get("is_error", False)}
        for block in blocks
        if block["type"] == "tool_result"
    }
    return text(json.dumps(seen, sort_keys=True))


APPROVAL_SCRIPT: Final[list[ScriptItem]] = [
    tool_use(
        ("issue_refund", {"order_id": "O-1"}, REFUND_IDS[0]),
        ("issue_refund", {"order_id": "O-2"}, REFUND_IDS[1]),
    ),
    echo_tool_results,
]
"""Two refunds needing approval in one batch, then an answer echoing what came back."""


DELEGATE_ID: Final = "toolu_delegate"
LEAD_SCRIPT: Final[list[ScriptItem]] = [
    tool_use(("billing", {"task": "Charge order O-1 once it is confirmed."}, DELEGATE_ID)),
    text("the child charged it"),
]
"""The lead of `kill-in-child-tool`: one delegation to the billing child, then the answer."""


def db_of(argument: str) -> Path | str:
    """DB as given: a PostgreSQL DSN as it is, else a SQLite file's path."""
    return argument if argument.startswith("postgresql://") else Path(argument)


@functools.cache
def store_at(db: Path | str) -> CheckpointStore:
    """The store the runs checkpoint to: PostgreSQL for a DSN, else the SQLite file; one per
    process (a test closes it once, for all the loops on it)."""
    return PostgresStore(db) if isinstance(db, str) else SQLiteStore(db)


def build_tree(
    db: Path | str,
    ledger: Path,
    mode: str,
    lead_script: Sequence[ScriptItem],
    child_script: Sequence[ScriptItem],
) -> AgentLoop:
    """A lead whose `billing` tool runs `build_loop`'s charging loop as its child, both
    checkpointing to `db`."""
    child = build_loop(db, ledger, "kill-in-tool" if mode == "kill-in-child-tool" else "resume", child_script)
    return AgentLoop(
        ScriptedClient(lead_script),
        model="claude-sonnet-4-6",
        tools=[child.as_tool("billing", description="Charge orders.")],
        budget=Budget(max_steps=4, max_tool_calls=6, max_depth=1),
        observers=Observers(metrics=None),
        store=store_at(db),
        name="crash_lead",
    )


def script_for(mode: str) -> list[ScriptItem]:
    """The whole script a fresh run of `mode` is served."""
    if mode == "kill-before-model":
        return [TURN_1, hang_in_model_call]
    if mode in ("run-approval", "resume-approval"):
        return list(APPROVAL_SCRIPT)
    return list(SCRIPT)


def init_ledger(ledger: Path) -> None:
    """Create the ledger's tables (blocking: call it in a worker thread)."""
    with contextlib.closing(sqlite3.connect(ledger, timeout=30)) as db, db:
        for statement in SCHEMA:
            db.execute(statement)


def _record(ledger: Path, tool_name: str, key: str, order_id: str | None) -> None:
    """Record one invocation and, for an effect, apply it once per key (blocking)."""
    with contextlib.closing(sqlite3.connect(ledger, timeout=30)) as db, db:
        db.execute("INSERT INTO calls (tool, key, pid) VALUES (?, ?, ?)", (tool_name, key, os.getpid()))
        if order_id is not None:
            db.execute("INSERT OR IGNORE INTO effects (key, order_id) VALUES (?, ?)", (key, order_id))


def read_ledger(ledger: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str, int]]]:
    """The ledger's effects `(key, order_id)` and calls `(tool, key, pid)`, in order (blocking)."""
    with contextlib.closing(sqlite3.connect(ledger, timeout=30)) as db:
        effects = db.execute("SELECT key, order_id FROM effects ORDER BY key").fetchall()
        calls = db.execute("SELECT tool, key, pid FROM calls ORDER BY seq").fetchall()
    return [(str(k), str(o)) for k, o in effects], [(str(t), str(k), int(p)) for t, k, p in calls]


def build_loop(db: Path | str, ledger: Path, mode: str, script: Sequence[ScriptItem]) -> AgentLoop:
    """The loop of `mode`, checkpointing to `db`, its tools writing to `ledger`."""
    hang = mode == "kill-in-tool"
    hung: list[str] = []

    @tool
    async def read_order(order_id: str, ctx: ToolContext) -> str:
        """Read one order."""
        await anyio.to_thread.run_sync(_record, ledger, "read_order", ctx.idempotency_key, None)
        return f"{order_id}: confirmed, EUR 40"

    @tool(side_effect=True)
    async def charge(order_id: str, ctx: ToolContext) -> str:
        """Charge an order's card (once per idempotency key)."""
        await anyio.to_thread.run_sync(_record, ledger, "charge", ctx.idempotency_key, order_id)
        if hang and not hung:
            hung.append(ctx.idempotency_key)
            print(IN_FLIGHT, flush=True)
            with anyio.fail_after(HANG_S):
                await anyio.sleep_forever()
        return f"charged {order_id}"

    @tool(side_effect=True, requires_approval=True)
    async def issue_refund(order_id: str, ctx: ToolContext) -> str:
        """Refund an order (once per idempotency key); a human approves each refund."""
        await anyio.to_thread.run_sync(_record, ledger, "issue_refund", ctx.idempotency_key, order_id)
        return f"refunded {order_id}"

    approval = mode in ("run-approval", "resume-approval")
    return AgentLoop(
        ScriptedClient(script),
        model="claude-sonnet-4-6",
        tools=[issue_refund] if approval else [read_order, charge],
        budget=Budget(max_steps=4, max_tool_calls=6),
        observers=Observers(metrics=None),
        store=store_at(db),
        name="crash_worker",
    )


async def resume_loop(
    db: Path | str, ledger: Path, mode: str, task_id: str, approvals: Mapping[str, bool | str] | None = None
) -> str:
    """Resume `task_id` with the rest of the script; the result as JSON."""
    state = await store_at(db).load(task_id)
    assert state is not None, f"{task_id} is not in {db}"
    loop = build_loop(db, ledger, mode, script_for(mode)[len(state.responses) :])
    result = await loop.resume(task_id, approvals=approvals)
    return result.to_json()


async def main(
    db: Path | str, ledger: Path, mode: str, task_id: str, approvals: Mapping[str, bool | str]
) -> int:
    """Run or resume one loop as `mode` says; print what the parent reads."""
    await anyio.to_thread.run_sync(init_ledger, ledger)
    if mode in ("resume", "resume-approval"):
        print(await resume_loop(db, ledger, mode, task_id, approvals or None), flush=True)
        return 0
    if mode == "kill-in-child-tool":
        loop = build_tree(db, ledger, mode, LEAD_SCRIPT, SCRIPT)
    else:
        loop = build_loop(db, ledger, mode, script_for(mode))
    result = await loop.run(APPROVAL_GOAL if mode == "run-approval" else GOAL, task_id=task_id)
    pending = [p.tool_use_id for p in result.state.pending_approvals]
    print(json.dumps({"stop_reason": str(result.stop_reason), "pending": pending}), flush=True)
    return 0 if mode == "run-approval" else 1  # a crash mode that was not killed is a failure


def cli(argv: Sequence[str]) -> int:
    """Parse `DB LEDGER MODE TASK_ID [APPROVALS_JSON]` and run `main`."""
    if len(argv) not in (4, 5) or argv[2] not in MODES:
        print(__doc__, file=sys.stderr)
        return 2
    approvals: dict[str, bool | str] = json.loads(argv[4]) if len(argv) == 5 else {}
    return anyio.run(functools.partial(main, db_of(argv[0]), Path(argv[1]), argv[2], argv[3], approvals))


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
