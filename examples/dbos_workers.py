"""A fleet of two DBOS workers running refund investigations, fed through a DBOS queue.

The script starts two worker processes (`--worker NAME`), each a DBOS executor that serves the
queue `refunds` one run at a time, then submits four runs through a `DBOSClient` — as an API
process would, without running any loop itself — and prints which worker ran each. Each run is
an `AgentLoop` run as a DBOS workflow (`DurableLoop`): its model calls and tool calls are DBOS
steps, so a worker killed mid-run leaves it to another (see docs/dbos.md). The model is a
deterministic stand-in: no API key is needed, but a PostgreSQL server is.

    python examples/dbos_workers.py --dsn postgresql://postgres@127.0.0.1:5432/agents

(or set BOUNDLOOP_DBOS_DSN). The database is DBOS's system database; it must exist.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, Final

import anyio
import anyio.abc
import anyio.to_thread
from anthropic.types import Message

from boundloop import AgentLoop, Budget, Observers, ToolContext, tool
from boundloop.testing import parse_message

QUEUE: Final = "refunds"
WORKFLOW: Final = "boundloop.refunds"
WORKERS: Final = ("worker-1", "worker-2")
ORDERS: Final = ("O-101", "O-102", "O-103", "O-104")
READY: Final = "READY"
DEADLINE_S: Final = 90.0


@tool
async def read_order(order_id: str, ctx: ToolContext) -> dict[str, object]:
    """Read one order: its amount and whether it was delivered."""
    await anyio.sleep(0.3)  # a slow backend: the other worker picks up the next run meanwhile
    return {"order_id": order_id, "amount_eur": 40, "delivered": order_id != "O-103"}


class DemoMessages:
    """A deterministic model: read the order named in the goal, then decide from what it read."""

    async def create(self, **request: Any) -> Message:
        messages: list[dict[str, Any]] = request["messages"]
        goal = str(messages[0]["content"])
        order_id = re.findall(r"O-\d+", goal)[0]
        usage = {"input_tokens": 50, "output_tokens": 20}
        if len(messages) == 1:
            block = {
                "type": "tool_use",
                "id": "toolu_read",
                "name": "read_order",
                "input": {"order_id": order_id},
            }
            return parse_message({"stop_reason": "tool_use", "content": [block], "usage": usage})
        # Every tool result of the last message (this model asks for one call a turn, but reads
        # each answer as a model would).
        results = [
            json.loads(block["content"])
            for block in messages[-1]["content"]
            if block["type"] == "tool_result"
        ]
        delivered = all(result["delivered"] for result in results)
        verdict = "no refund: the order was delivered" if delivered else "refund"
        answer = {"type": "text", "text": f"{order_id}: {verdict}"}
        return parse_message({"stop_reason": "end_turn", "content": [answer], "usage": usage})


class DemoModel:
    """Anything with `messages.create` is a model for `AgentLoop`."""

    def __init__(self) -> None:
        self.messages = DemoMessages()


def build_loop() -> AgentLoop:
    """The loop every worker runs."""
    return AgentLoop(
        DemoModel(),
        model="claude-sonnet-4-6",
        tools=[read_order],
        budget=Budget(max_steps=4, timeout_s=60),
        system="You investigate refund requests.",
        name="refunds",
        observers=Observers(metrics=None),
    )


async def worker(dsn: str, name: str) -> int:
    """One worker: register the workflow, launch DBOS as executor `name`, serve the queue until
    stdin ends."""
    from dbos import DBOS

    from boundloop.integrations.dbos import DurableLoop

    DurableLoop(build_loop(), name=WORKFLOW)  # registered before launch, in every worker
    DBOS(
        config={
            "name": "boundloop-dbos-example",
            "system_database_url": dsn,
            "executor_id": name,
            "application_version": "dbos-workers-example",
            "log_level": "WARNING",
        }
    )
    DBOS.launch()
    await DBOS.register_queue_async(QUEUE, worker_concurrency=1, polling_interval_sec=0.1)
    print(READY, flush=True)
    try:
        await anyio.to_thread.run_sync(sys.stdin.read)  # until the submitter closes our stdin
    finally:
        DBOS.destroy()
    return 0


async def submit_runs(dsn: str) -> list[tuple[str, str, str]]:
    """Submit one run per order to the queue; wait for them. (order, worker, answer) per run."""
    from dbos import DBOSClient

    from boundloop.integrations.dbos import submit

    client = await anyio.to_thread.run_sync(lambda: DBOSClient(system_database_url=dsn))
    try:
        runs = [
            await submit(
                client,
                workflow=WORKFLOW,
                queue=QUEUE,
                goal=f"Decide whether order {order_id} gets a refund.",
                task_id=f"refund-{order_id}",
            )
            for order_id in ORDERS
        ]
        results = [await run.result(poll_s=0.1) for run in runs]
        statuses = await client.list_workflows_async(workflow_ids=[run.task_id for run in runs])
        ran_by = {status.workflow_id: str(status.executor_id) for status in statuses}
    finally:
        await anyio.to_thread.run_sync(client.destroy)
    return [
        (order_id, ran_by[run.task_id], result.answer or str(result.stop_reason))
        for order_id, run, result in zip(ORDERS, runs, results, strict=True)
    ]


async def main(dsn: str) -> int:
    """Start the workers, submit the runs, print who ran what, stop the workers."""
    processes: list[anyio.abc.Process] = []
    try:
        with anyio.fail_after(DEADLINE_S):
            for name in WORKERS:  # started together, each launching DBOS on its own
                command = [sys.executable, __file__, "--dsn", dsn, "--worker", name]
                processes.append(await anyio.open_process(command, stderr=None))
            for name, process in zip(WORKERS, processes, strict=True):
                assert process.stdout is not None
                line = await process.stdout.receive()
                if not line.decode().startswith(READY):
                    print(f"{name} did not start: {line!r}", file=sys.stderr)
                    return 1
            print(f"{len(WORKERS)} workers serve the queue {QUEUE!r}; submitting {len(ORDERS)} runs")
            for order_id, ran_by, answer in await submit_runs(dsn):
                print(f"{order_id}: run by {ran_by}: {answer}")
    finally:
        for process in processes:
            if process.stdin is not None:
                await process.stdin.aclose()
        with anyio.fail_after(DEADLINE_S, shield=True):
            for process in processes:
                await process.wait()
    return 0


def cli(argv: Sequence[str]) -> int:
    """`--dsn DSN` (or BOUNDLOOP_DBOS_DSN), and `--worker NAME` for a worker process."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dsn", default=os.environ.get("BOUNDLOOP_DBOS_DSN"), help="DBOS's system database")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.dsn:
        print(
            "This example needs a PostgreSQL database for DBOS: pass --dsn postgresql://USER@HOST:PORT/DB "
            "or set BOUNDLOOP_DBOS_DSN.",
            file=sys.stderr,
        )
        return 2
    if args.worker:
        return anyio.run(worker, args.dsn, args.worker)
    return anyio.run(main, args.dsn)


if __name__ == "__main__":
    sys.exit(cli(sys.argv[1:]))
