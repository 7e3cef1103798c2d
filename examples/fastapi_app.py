"""Embedding boundloop in an async app: a FastAPI endpoint that runs one loop per request.

- Each request gets its own budget (steps and wall clock, capped by the server).
- When the client goes away, the run is cancelled (`StopReason.CANCELLED`) instead of
  burning model calls for nobody: a task watches the ASGI `http.disconnect` message and sets
  the run's `cancel` event.
- `/metrics` serves the loop's Prometheus metrics from the same app.
- `/runs` lists recent runs and the state each one is in, fed by `AgentLoop(on_event=...)`.

With `ANTHROPIC_API_KEY` set, requests go to the real API; without it, each request gets a
`ScriptedClient`, so the app runs offline.

    uvicorn fastapi_app:app --app-dir examples
    curl -s localhost:8000/investigations -H 'content-type: application/json' \\
        -d '{"order_id": "O-104", "max_steps": 6, "timeout_s": 20}'
    curl -s localhost:8000/metrics | grep boundloop_runs_total

Order O-777's carrier API hangs: ask for it with a small `timeout_s` to see a `timeout` stop,
or hang up the client to see `cancelled` in `/runs`.
"""

from __future__ import annotations

import os
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import anyio
from anthropic import AsyncAnthropic
from fastapi import FastAPI, Request
from pydantic import BaseModel, Field
from starlette.routing import Route

from boundloop import AgentLoop, Budget, Event, Model, Policy, ScriptedClient, tool
from boundloop.metrics import asgi_app

MODEL = "claude-sonnet-4-6"
RECENT_RUNS = 100
MAX_STEPS = 8
MAX_TIMEOUT_S = 60.0
HANGING_CARRIER_S = 3600.0
"""The carrier API of order O-777 never answers in time: the budget or the client must end it."""

ORDERS = {
    "O-104": {"order_id": "O-104", "total": 189.0, "refund_reason": "boots arrived damaged"},
    "O-777": {"order_id": "O-777", "total": 54.0, "refund_reason": "parcel never arrived"},
}


@tool
async def read_order(order_id: str) -> dict[str, Any]:
    """Read one order by id."""
    return ORDERS[order_id]


@tool
async def track_parcel(order_id: str) -> dict[str, str]:
    """Ask the carrier where the parcel of an order is."""
    if order_id == "O-777":
        await anyio.sleep(HANGING_CARRIER_S)
    return {"order_id": order_id, "status": "delivered", "note": "box crushed in transit"}


def scripted_client(order_id: str) -> ScriptedClient:
    """What the model would answer for one order, for running without an API key."""
    return ScriptedClient(
        [
            {
                "stop_reason": "tool_use",
                "content": [
                    {"type": "tool_use", "name": "read_order", "input": {"order_id": order_id}},
                    {"type": "tool_use", "name": "track_parcel", "input": {"order_id": order_id}},
                ],
            },
            {
                "stop_reason": "end_turn",
                "content": [
                    {"type": "text", "text": f"{order_id}: delivered damaged; the refund is justified."}
                ],
            },
        ]
    )


class Investigation(BaseModel):
    """One request: which order, and the budget this request may spend."""

    order_id: str = Field(pattern=r"^O-\d+$")
    max_steps: int = Field(default=6, ge=1, le=MAX_STEPS)
    timeout_s: float = Field(default=20.0, gt=0, le=MAX_TIMEOUT_S)


class Outcome(BaseModel):
    """What a request gets back: the typed stop reason, never a guess from prose."""

    task_id: str
    stop_reason: str
    answer: str | None
    model_calls: int
    tool_calls: int


async def _cancel_on_disconnect(request: Request, cancel: anyio.Event) -> None:
    # The body is already read, so the next ASGI message is `http.disconnect`: it arrives
    # when the client hangs up (or after the response is sent, when nobody waits any more).
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            cancel.set()
            return


def create_app(make_client: Callable[[str], Model] | None = None) -> FastAPI:
    """The app. `make_client(order_id)` gives each request its model client.

    Default: one shared `AsyncAnthropic` when `ANTHROPIC_API_KEY` is set, else a
    `ScriptedClient` per request.
    """
    if make_client is None:
        if os.environ.get("ANTHROPIC_API_KEY"):
            shared = AsyncAnthropic()

            def make_client(order_id: str) -> Model:
                return shared
        else:
            make_client = scripted_client
    client_for = make_client

    app = FastAPI(title="refund investigations")
    runs: OrderedDict[str, dict[str, Any]] = OrderedDict()
    """task_id -> order, current state and stop reason: what /runs shows (the last RECENT_RUNS)."""

    @app.post("/investigations")
    async def investigate(body: Investigation, request: Request) -> Outcome:
        task_id = uuid.uuid4().hex
        record: dict[str, Any] = {"order_id": body.order_id, "state": "assemble", "stop_reason": None}
        runs[task_id] = record
        while len(runs) > RECENT_RUNS:  # a server keeps a bounded history, never an unbounded one
            runs.popitem(last=False)

        def on_event(event: Event) -> None:
            if event.kind == "transition":
                record["state"] = str(event.dest)

        loop = AgentLoop(
            client_for(body.order_id),
            model=MODEL,
            tools=[read_order, track_parcel],
            # The per-request budget: what the caller asked for, within the server's caps.
            budget=Budget(
                max_steps=body.max_steps, max_tool_calls=2 * body.max_steps, timeout_s=body.timeout_s
            ),
            policy=Policy(required_evidence={"read_order"}),
            system="You investigate refund requests.",
            name="fastapi_investigation",
            on_event=on_event,
        )
        cancel = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(_cancel_on_disconnect, request, cancel)
            result = await loop.run(
                f"Is the refund for order {body.order_id} justified?", cancel=cancel, task_id=task_id
            )
            group.cancel_scope.cancel()
        record["stop_reason"] = str(result.stop_reason)
        return Outcome(
            task_id=task_id,
            stop_reason=str(result.stop_reason),
            answer=result.answer,
            model_calls=result.state.step,
            tool_calls=result.state.tool_calls,
        )

    @app.get("/runs")
    async def list_runs() -> dict[str, dict[str, Any]]:
        return runs

    # An ASGI app as a Route endpoint is served as-is, at exactly /metrics (a mount would
    # answer /metrics with a redirect to /metrics/).
    app.router.routes.append(Route("/metrics", asgi_app()))
    return app


app = create_app()

if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=8000)
