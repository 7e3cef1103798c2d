"""Embedding boundloop in an async app: a FastAPI endpoint that runs one loop per request.

- Each request gets its own budget (steps and wall clock, capped by the server).
- When the client goes away, the run is cancelled (`StopReason.CANCELLED`) instead of
  burning model calls for nobody: a task watches the ASGI `http.disconnect` message and sets
  the run's `cancel` event.
- `/metrics` serves the loop's Prometheus metrics from the same app.
- `/runs` lists recent runs and the state each one is in, fed by the loop's event hook
  (`AgentLoop(observers=Observers(on_event=...))`).
- Watching a run as it happens: `POST /runs` starts a run in the background with
  `loop.stream(...)`, `GET /runs/{task_id}/events` serves its events from the store's event log
  as server-sent events (`id:` is the event's `seq`; a client reconnecting with
  `Last-Event-ID` continues after it), `POST /runs/{task_id}/cancel` stops it `cancelled`, and
  `/watch` is a page that shows it (examples/static/watch.html). docs/streaming.md has the recipe.

With `ANTHROPIC_API_KEY` set, requests go to the real API; without it, each request gets a
`ScriptedClient`, so the app runs offline.

    uvicorn fastapi_app:app --app-dir examples
    curl -s localhost:8000/investigations -H 'content-type: application/json' \\
        -d '{"order_id": "O-104", "max_steps": 6, "timeout_s": 20}'
    curl -s localhost:8000/metrics | grep boundloop_runs_total
    curl -s localhost:8000/runs -H 'content-type: application/json' -d '{"order_id": "O-104"}'
    curl -sN localhost:8000/runs/<task_id>/events          # or open localhost:8000/watch

Order O-777's carrier API hangs: ask for it with a small `timeout_s` to see a `timeout` stop,
or hang up the client to see `cancelled` in `/runs`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import uuid
from collections import OrderedDict
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from pathlib import Path
from typing import Annotated, Any

import anyio
from anthropic import AsyncAnthropic
from anyio.abc import TaskGroup, TaskStatus
from fastapi import FastAPI, Header, HTTPException, Request
from fastapi.responses import FileResponse, StreamingResponse
from pydantic import BaseModel, Field
from starlette.routing import Route

from boundloop import (
    AgentLoop,
    Budget,
    CheckpointStore,
    Event,
    InvalidTaskId,
    MemoryStore,
    Model,
    Observers,
    Policy,
    RunStream,
    ScriptedClient,
    tool,
)
from boundloop.events import to_json_line
from boundloop.metrics import asgi_app

MODEL = "claude-sonnet-4-6"
RECENT_RUNS = 100
MAX_STEPS = 8
MAX_TIMEOUT_S = 60.0
HANGING_CARRIER_S = 3600.0
"""The carrier API of order O-777 never answers in time: the budget or the client must end it."""
STATIC = Path(__file__).resolve().parent / "static"
logger = logging.getLogger(__name__)

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
                    {"type": "text", "text": f"Reading order {order_id} and asking the carrier about it."},
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


def question(order_id: str) -> str:
    """The goal of a run about one order."""
    return f"Is the refund for order {order_id} justified?"


def build_loop(
    client: Model, body: Investigation, record: dict[str, Any], store: CheckpointStore | None = None
) -> AgentLoop:
    """The loop of one run: its budget is what the caller asked for, within the server's caps."""

    def on_event(event: Event) -> None:
        if event.kind == "transition":
            record["state"] = str(event.dest)

    return AgentLoop(
        client,
        model=MODEL,
        tools=[read_order, track_parcel],
        budget=Budget(max_steps=body.max_steps, max_tool_calls=2 * body.max_steps, timeout_s=body.timeout_s),
        policy=Policy(required_evidence={"read_order"}),
        system="You investigate refund requests.",
        name="fastapi_investigation",
        observers=Observers(on_event=on_event),
        store=store,
    )


class Started(BaseModel):
    """What `POST /runs` answers: the run's id and where to watch it."""

    task_id: str
    events: str
    watch: str


async def server_sent(events: AsyncGenerator[Event]) -> AsyncIterator[str]:
    """Each event as a server-sent event: `id:` its `seq` (what a reconnecting client sends back
    as `Last-Event-ID`), `event:` its kind, `data:` its JSON line; the stream ends after the `Stop`."""
    async with contextlib.aclosing(events):  # a client that hangs up stops the follower too
        async for event in events:
            yield f"id: {event.seq}\nevent: {event.kind}\ndata: {to_json_line(event)}\n\n"


class WatchedRuns:
    """The runs `POST /runs` started: each runs in the app's task group (its lifespan) as a
    `RunStream`, kept here while it goes on so that `POST /runs/{task_id}/cancel` can stop it."""

    def __init__(self, store: CheckpointStore) -> None:
        self.store = store
        self.streams: dict[str, RunStream[str]] = {}
        self._group: TaskGroup | None = None
        # A loop that only reads the store's event log (`loop.events`): it never calls its model.
        self.follower = AgentLoop(
            ScriptedClient([]),
            model=MODEL,
            budget=Budget(max_steps=1),
            store=store,
            observers=Observers(metrics=None),
            name="fastapi_follower",
        )

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The app's lifespan: runs can start while it is entered; leaving it cancels them."""
        async with anyio.create_task_group() as group:
            self._group = group
            yield
            self._group = None
            for run in list(self.streams.values()):  # a server going down stops its runs `cancelled`
                await run.cancel()

    async def start(self, loop: AgentLoop, goal: str, task_id: str, record: dict[str, Any]) -> None:
        """Start the run; returns once its handle is kept (it can be cancelled from then on)."""
        if self._group is None:
            raise HTTPException(503, "the app's lifespan is not running: it runs the watched runs")
        await self._group.start(self._drive, loop, goal, task_id, record)

    async def _drive(
        self,
        loop: AgentLoop,
        goal: str,
        task_id: str,
        record: dict[str, Any],
        *,
        task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED,
    ) -> None:
        try:
            async with loop.stream(goal, task_id=task_id) as run:
                self.streams[task_id] = run
                task_status.started()
                try:
                    # Reading the stream lets the run go on; its events, deltas included,
                    # reach the store's log, where GET /runs/{task_id}/events reads them.
                    async for _ in run:
                        pass
                finally:
                    del self.streams[task_id]
        except Exception:  # a background run's error must not take the server down
            logger.exception("the run %s raised", task_id)
            record["stop_reason"] = "raised"
            return
        assert run.result is not None
        record["stop_reason"] = str(run.result.stop_reason)


def add_watch_routes(app: FastAPI, watched: WatchedRuns) -> None:
    """`GET /runs/{task_id}/events` (server-sent events), `POST /runs/{task_id}/cancel`, `GET /watch`."""

    @app.get("/runs/{task_id}/events")
    async def run_events(
        task_id: str, last_event_id: Annotated[int | None, Header()] = None
    ) -> StreamingResponse:
        after = -1 if last_event_id is None else last_event_id
        try:
            events = watched.follower.events(task_id, after=after)  # stored, then live, to its Stop
        except InvalidTaskId as exc:
            raise HTTPException(404, str(exc)) from None
        return StreamingResponse(
            server_sent(events),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},  # no proxy buffering
        )

    @app.post("/runs/{task_id}/cancel")
    async def cancel_run(task_id: str) -> dict[str, str]:
        run = watched.streams.get(task_id)
        if run is None:
            raise HTTPException(404, f"no run {task_id!r} is going on in this server")
        await run.cancel()  # returns once the run has stopped, its checkpoint written
        assert run.result is not None
        return {"task_id": task_id, "stop_reason": str(run.result.stop_reason)}

    @app.get("/watch")
    async def watch_page() -> FileResponse:
        return FileResponse(STATIC / "watch.html", media_type="text/html")


def create_app(
    make_client: Callable[[str], Model] | None = None, store: CheckpointStore | None = None
) -> FastAPI:
    """The app. `make_client(order_id)` gives each request its model client.

    Default: one shared `AsyncAnthropic` when `ANTHROPIC_API_KEY` is set, else a
    `ScriptedClient` per request. `store` keeps the watched runs (`POST /runs`) and their event
    log, deltas included: `MemoryStore(log_deltas=True)` by default; a `SQLiteStore(path,
    log_deltas=True)` or `PostgresStore` lets other processes serve the events too.
    """
    if make_client is None:
        if os.environ.get("ANTHROPIC_API_KEY"):
            shared = AsyncAnthropic()

            def make_client(order_id: str) -> Model:
                return shared
        else:
            make_client = scripted_client
    client_for = make_client
    watched = WatchedRuns(MemoryStore(log_deltas=True) if store is None else store)
    app = FastAPI(title="refund investigations", lifespan=lambda _: watched.running())
    runs: OrderedDict[str, dict[str, Any]] = OrderedDict()
    """task_id -> order, current state and stop reason: what /runs shows (the last RECENT_RUNS)."""

    def remember(task_id: str, body: Investigation) -> dict[str, Any]:
        record: dict[str, Any] = {"order_id": body.order_id, "state": "assemble", "stop_reason": None}
        runs[task_id] = record
        while len(runs) > RECENT_RUNS:  # a server keeps a bounded history, never an unbounded one
            runs.popitem(last=False)
        return record

    @app.post("/investigations")
    async def investigate(body: Investigation, request: Request) -> Outcome:
        task_id = uuid.uuid4().hex
        record = remember(task_id, body)
        loop = build_loop(client_for(body.order_id), body, record)
        cancel = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(_cancel_on_disconnect, request, cancel)
            result = await loop.run(question(body.order_id), cancel=cancel, task_id=task_id)
            group.cancel_scope.cancel()
        record["stop_reason"] = str(result.stop_reason)
        return Outcome(
            task_id=task_id,
            stop_reason=str(result.stop_reason),
            answer=result.answer,
            model_calls=result.state.step,
            tool_calls=result.state.tool_calls,
        )

    @app.post("/runs")
    async def start_run(body: Investigation) -> Started:
        """Start a run in the background, streamed into the store's event log; watch it at /watch."""
        task_id = uuid.uuid4().hex
        record = remember(task_id, body)
        loop = build_loop(client_for(body.order_id), body, record, store=watched.store)
        await watched.start(loop, question(body.order_id), task_id, record)
        return Started(task_id=task_id, events=f"/runs/{task_id}/events", watch=f"/watch?task_id={task_id}")

    @app.get("/runs")
    async def list_runs() -> dict[str, dict[str, Any]]:
        return runs

    add_watch_routes(app, watched)
    # An ASGI app as a Route endpoint is served as-is, at exactly /metrics (a mount would
    # answer /metrics with a redirect to /metrics/).
    app.router.routes.append(Route("/metrics", asgi_app()))
    return app


app = create_app()

if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=8000)
