"""`agui_app(loop)`: the loop behind an AG-UI endpoint (docs/front-ends.md).

A POST at the app's root takes a `RunAgentInput` and answers with the run's AG-UI events as
server-sent events, each with an `id:` (its `Cursor`). Which run it is:

- `Last-Event-ID` sent: a reconnection to the run the input names (`THREAD_ID/RUN_ID`, or the
  task its `resume` answers): the events after that id, from the store's event log, then the
  run goes on live (a run cancelled by the client's disconnect is continued).
- `resume` sent: the answers to a waiting run's interrupts, checked as the inspector checks a
  decision (409 when the calls no longer wait), then the resumed run, live.
- Otherwise a new run `THREAD_ID/RUN_ID` on the conversation; the same ids again (a client
  that lost the stream and holds none of it) replay that run from its start, then go on.

A client that disconnects cancels the run its request drives: it stops `cancelled`, its
checkpoint written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Final

import anyio
from ag_ui.core import BaseEvent as AguiEvent
from ag_ui.core import RunAgentInput, RunErrorEvent, RunStartedEvent
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from .. import AgentLoop, ConfigurationError, RunStream
from .._core import event_log_of, follow
from ..checkpoint.eventlog import PAGE, EventLog
from ..checkpoint.store import CheckpointStore
from ..events import Event, Stop
from ..records import StopReason
from ._agui_events import BEFORE_ALL, Cursor, OpenBlocks, Translation
from ._agui_input import Answers, BadInput, answers, history, task_of
from ._approvals import not_decidable, refusal
from ._security import Guard

Emit = Callable[[str], Awaitable[None]]

HEADERS: Final = {"cache-control": "no-cache", "x-accel-buffering": "no"}
"""No cache or proxy holds an event back."""


def agui_app(loop: AgentLoop[Any], *, token: str | None = None) -> ASGIApp:
    """The loop as an AG-UI endpoint: an ASGI app taking the POST of a `RunAgentInput` at its root.

    Args:
        loop: the loop each run runs on. Its store must log the deltas too
            (`MemoryStore(log_deltas=True)`, `SQLiteStore(path, log_deltas=True)`,
            `PostgresStore(..., log_deltas=True)`): a reconnecting client is served from the log.
        token: when set, every request carries it as `Authorization: Bearer TOKEN` (else 401).

    Returns:
        An ASGI app answering a POST at whatever path it is routed: `Route("/agui", app)` in
        a Starlette or FastAPI app (its `HttpAgent`'s url), or served alone by uvicorn.

    Raises:
        ConfigurationError: the loop's store keeps no event log, or not its deltas; the token is empty.
    """
    store = loop.config.store
    log = event_log_of(store)
    if store is None or log is None or not log.log_deltas:
        raise ConfigurationError(
            "agui_app needs a loop whose store logs its deltas (MemoryStore(log_deltas=True), "
            "SQLiteStore(path, log_deltas=True), ...): a reconnecting client is served from the log; "
            f"this loop's store is {store!r}"
        )
    if token is not None and not token.strip():
        raise ConfigurationError("the AG-UI endpoint's token must not be empty")
    return _AguiApp(_Endpoint(loop, store, log, Guard(token)))


class _AguiApp:
    """The endpoint as an ASGI app: a POST at any path it is routed (`Route("/agui", app)`,
    `Mount`, or uvicorn's root) runs; any other method is answered 405."""

    def __init__(self, endpoint: _Endpoint) -> None:
        self.endpoint = endpoint

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":  # served alone: nothing to start or stop
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        if scope["method"] != "POST":
            response: Response = JSONResponse(
                {"error": "POST a RunAgentInput here."}, 405, headers={"allow": "POST"}
            )
        else:
            response = await self.endpoint.post(Request(scope, receive))
        await response(scope, receive, send)


class Refused(Exception):
    """A request answered with an error status before its stream began."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _problems(exc: ValidationError) -> str:
    """Each problem as `where: what`, in the wire's (camelCase) names."""
    return "; ".join(
        f"{'.'.join(str(part) for part in error['loc']) or 'body'}: {error['msg']}"
        for error in exc.errors(include_url=False)
    )


def _refuse(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status)


class _Endpoint:
    """The POST handler of one app."""

    def __init__(self, loop: AgentLoop[Any], store: CheckpointStore, log: EventLog, guard: Guard) -> None:
        self.loop = loop
        self.store = store
        self.log = log
        self.guard = guard
        self.live: dict[str, anyio.Event] = {}
        """The tasks a request of this app drives now, each with the event set once its run has
        stopped and saved its last checkpoint (and let go of its lease)."""

    async def post(self, request: Request) -> Response:
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        # The header only, never a cookie: no session another site's page could ride.
        if self.guard.token is not None and not (
            scheme.lower() == "bearer" and self.guard.token_matches(credentials.strip())
        ):
            return _refuse(401, "This endpoint needs its token: Authorization: Bearer TOKEN.")
        # A form or a text/plain body is what another site's page can send without asking
        # (no CORS preflight): refused, so a browser cannot be made to start or approve runs.
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return _refuse(415, "The body is an AG-UI RunAgentInput, sent as application/json.")
        try:
            run = RunAgentInput.model_validate_json(await request.body())
        except ValidationError as exc:
            return _refuse(422, f"The body is not an AG-UI RunAgentInput: {_problems(exc)}")
        try:
            given = request.headers.get("last-event-id")
            cursor = None if given is None else Cursor.parse(given)
            decided = answers(run) if run.resume else None
            task_id = task_of(run) if decided is None else decided.task_id
        except (BadInput, ValueError) as exc:
            return _refuse(400, str(exc))
        stream = _Stream(self, run, task_id)
        if cursor is not None:
            return _EventStream(stream, lambda emit: stream.reconnect(emit, cursor))
        if decided is not None:
            return _EventStream(stream, lambda emit: stream.resume(emit, decided))
        if await self.log.last_seq(task_id) >= 0 or await self.store.load(task_id) is not None:
            return _EventStream(stream, lambda emit: stream.reconnect(emit, BEFORE_ALL))
        try:
            messages = history(run)
        except BadInput as exc:
            return _refuse(400, str(exc))
        return _EventStream(stream, lambda emit: stream.start(emit, messages))

    async def logged(self, task_id: str) -> list[Event]:
        """Every event of the task in the store's log."""
        events: list[Event] = []
        while True:
            page = await self.log.read(task_id, after=events[-1].seq if events else -1, limit=PAGE)
            events += page
            if len(page) < PAGE:
                return events


class _Stream:
    """One response: the AG-UI events of one task, numbered, those after the client's cursor."""

    def __init__(self, endpoint: _Endpoint, run: RunAgentInput, task_id: str) -> None:
        self.endpoint = endpoint
        self.loop = endpoint.loop
        self.task_id = task_id
        self.thread_id = run.thread_id
        self.run_id = run.run_id
        self.translation = Translation(task_id, run.thread_id, run.run_id)
        self.cursor = BEFORE_ALL
        """The last event the client has: nothing at or before it is sent again."""
        self.seen = OpenBlocks()
        """What the client has open at the cursor: its starts go out again after RUN_STARTED."""
        self.headed = False
        self.places = 0
        """How many AG-UI events the last boundloop event made (after a stop: the run's end's place)."""
        self.emit: Emit | None = None
        self.driven: RunStream[Any] | None = None
        """The run this response drives: the client's disconnect cancels it."""

    async def start(self, emit: Emit, messages: list[Any]) -> None:
        """A new run on the conversation."""
        metadata = {"agui": {"thread_id": self.thread_id, "run_id": self.run_id}}
        await self.drive(
            emit, self.loop.stream(None, task_id=self.task_id, messages=messages, metadata=metadata)
        )

    async def resume(self, emit: Emit, decided: Answers) -> None:
        """The waiting run, resumed with the human's answers, checked as the inspector checks them."""
        state = await self.endpoint.store.load(self.task_id)
        busy = self.task_id in self.endpoint.live
        stale = not_decidable(state, self.task_id, decided.approvals, busy=busy)
        question = None if state is None or state.escalation is None else state.escalation.tool_use_id
        if stale is None and decided.replies and set(decided.replies) != {question}:
            stale = not_decidable(state, self.task_id, {"": False}, busy=busy)  # no such question waits
        if stale is not None:
            raise Refused(stale.status, stale.message)
        reply = next(iter(decided.replies.values()), None)
        await self.drive(
            emit, self.loop.stream_resume(self.task_id, approvals=decided.approvals, reply=reply)
        )

    async def reconnect(self, emit: Emit, cursor: Cursor) -> None:
        """The task's events after `cursor` from the log, then on to its stop: a run cancelled
        (by a disconnect) is continued, a run going on is followed."""
        self.emit, self.cursor = emit, cursor
        events = await self.endpoint.logged(self.task_id)
        if not events:
            raise Refused(404, f"No run {self.task_id!r} in the store: nothing to reconnect to.")
        for event in events:
            await self.send(event)
        last = events[-1]
        if not isinstance(last, Stop):  # going on elsewhere, or not yet stopped by the disconnect
            async for event in follow(self.endpoint.store, self.task_id, after=last.seq):
                last = await self.send(event)
        assert isinstance(last, Stop)
        if last.stop_reason == StopReason.CANCELLED:
            driving = self.endpoint.live.get(self.task_id)
            if driving is not None:  # the request it cancelled is still saving its checkpoint
                await driving.wait()
            await self.drive(emit, self.loop.stream_resume(self.task_id))
        else:
            await self.finish(last)

    async def drive(self, emit: Emit, stream: RunStream[Any]) -> None:
        """Run `stream` in this response: its events as they come, to its stop."""
        self.emit = emit
        if self.task_id in self.endpoint.live:  # another request of this app drives it now
            await self.refuse(
                Refused(409, f"Another request drives the run {self.task_id!r} now: nothing changed.")
            )
            return
        released = self.endpoint.live[self.task_id] = anyio.Event()
        try:
            async with stream as run:
                self.driven = run
                events = aiter(run)
                try:
                    first = await anext(events)
                except Exception as exc:  # refused before it began (TaskBusy, NotResumable, ...)
                    outcome = refusal(exc)
                    await self.refuse(Refused(outcome.status, outcome.message))
                    return
                await self.head()
                last = await self.send(first)
                try:
                    async for event in events:
                        last = await self.send(event)
                except Exception as exc:  # the run raised (a tool's, with on_tool_error="raise", ...)
                    await self.write(RunErrorEvent(message=f"{type(exc).__name__}: {exc}", code="exception"))
                    return
        finally:
            self.driven = None
            del self.endpoint.live[self.task_id]
            released.set()
        assert isinstance(last, Stop)
        await self.finish(last)

    async def refuse(self, refused: Refused) -> None:
        """A refusal: its status before the stream began, else the stream's RUN_ERROR."""
        if not self.headed:
            raise refused
        await self.write(RunErrorEvent(message=refused.message, code=str(refused.status)))

    async def cancel(self) -> None:
        """The client went away: the run it drives stops `cancelled` (checkpoint written)."""
        if self.driven is not None:
            await self.driven.cancel()

    async def head(self) -> None:
        """RUN_STARTED, then the starts of what the client has open (on a reconnection)."""
        if not self.headed:
            self.headed = True
            await self.write(RunStartedEvent(thread_id=self.thread_id, run_id=self.run_id))
            for start in self.seen.starts():
                await self.write(start)

    async def send(self, event: Event) -> Event:
        """The AG-UI events of one boundloop event, those after the cursor."""
        outs = self.translation.feed(event)
        for place, out in enumerate(outs):
            await self.numbered(out, Cursor(event.seq, place))
        self.places = len(outs)
        return event

    async def finish(self, stop: Stop) -> None:
        """The end of the AG-UI run at the run's stop (its interrupts read from the checkpoint);
        sent again to a client that had it, as a stream always ends with it."""
        end = self.translation.finish(stop, await self.endpoint.store.load(self.task_id))
        await self.head()
        cursor = Cursor(stop.seq, self.places)
        await self.write(end, cursor if cursor > self.cursor else None)

    async def numbered(self, event: AguiEvent, cursor: Cursor) -> None:
        if cursor <= self.cursor:  # the client has it
            self.seen.see(event)
            return
        await self.head()
        await self.write(event, cursor)

    async def write(self, event: AguiEvent, cursor: Cursor | None = None) -> None:
        """One server-sent event: `data:` is one line, as JSON escapes every control character."""
        assert self.emit is not None
        ident = "" if cursor is None else f"id: {cursor}\n"
        await self.emit(f"{ident}data: {event.model_dump_json(by_alias=True)}\n\n")


class _EventStream(Response):
    """A server-sent event stream whose producer may still refuse before its first event
    (`Refused`: a JSON error with its status), and whose client's disconnect (the ASGI
    `http.disconnect`) cancels the run it drives, checkpoint written, before it is abandoned."""

    def __init__(self, stream: _Stream, produce: Callable[[Emit], Awaitable[None]]) -> None:
        # As starlette's StreamingResponse: no body, so no content-length.
        self.status_code = 200
        self.media_type = "text/event-stream"
        self.background = None
        self.init_headers(HEADERS)
        self.stream = stream
        self.produce = produce
        self.disconnected = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def begin() -> None:
            nonlocal started
            if not started:
                started = True
                await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})

        async def emit(chunk: str) -> None:
            await begin()
            await send({"type": "http.response.body", "body": chunk.encode(), "more_body": True})

        refused: Refused | None = None
        gone = False
        async with anyio.create_task_group() as group:
            group.start_soon(self._listen, receive, group.cancel_scope)
            try:
                await self.produce(emit)
            except Refused as exc:
                refused = exc
            except OSError:  # the client went away mid-write (ASGI 2.4 servers raise it on send)
                gone = True
            group.cancel_scope.cancel()
        if refused is not None and not started:
            await _refuse(refused.status, refused.message)(scope, receive, send)
        elif not gone and not self.disconnected:
            await begin()
            await send({"type": "http.response.body", "body": b"", "more_body": False})

    async def _listen(self, receive: Receive, scope: anyio.CancelScope) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        self.disconnected = True
        with anyio.CancelScope(shield=True):
            await self.stream.cancel()  # the run stops `cancelled`, its checkpoint written
        scope.cancel()
