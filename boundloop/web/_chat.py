"""The AI SDK's chat endpoint: `useChat`'s POST in, a run's UI message stream out; the GET of a
reconnecting client; approvals and the answer to the model's question sent back resume the run
(docs/front-ends.md)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterable, AsyncIterator, Generator
from typing import Any, Final, Literal, TypeAlias

import anyio
import pydantic
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .. import AgentLoop, CheckpointCorrupt, ConfigurationError, LoopError, RunStream
from .._core import event_log_of, follow
from ..checkpoint.store import check_task_id, status_of
from ..errors import InvalidTaskId
from ..events import Event
from ..state import LoopState
from ._approvals import Decision, Outcome, not_decidable, refusal
from ._security import Guard
from ._ui_messages import UI_MESSAGE_STREAM_HEADERS, ui_message_stream

OnDisconnect: TypeAlias = Literal["cancel", "continue"]
"""What a client hanging up does to its run: cancel it (`cancelled`, checkpoint written), or let
it go on (a reconnecting client follows it from the store's log)."""

MAX_TURNS: Final = 10_000
"""The most turns a chat has (each user message starts one run)."""


class _Message(pydantic.BaseModel):
    """A `UIMessage` of `useChat`'s body: the fields read; the others are let through."""

    model_config = pydantic.ConfigDict(extra="ignore")
    id: str
    role: Literal["system", "user", "assistant"]
    parts: list[dict[str, Any]]


class _Body(pydantic.BaseModel):
    """`useChat`'s POST body (`DefaultChatTransport`): the chat's id and its messages."""

    model_config = pydantic.ConfigDict(extra="ignore")
    id: str
    messages: list[_Message] = pydantic.Field(min_length=1)


class _Approval(pydantic.BaseModel):
    """A tool part's `approval` once the person answered (`addToolApprovalResponse`)."""

    model_config = pydantic.ConfigDict(extra="ignore")
    id: str
    approved: bool
    reason: str | None = None


def ui_message_response(
    events: RunStream[Any] | AsyncGenerator[Event],
    *,
    message_id: str | None = None,
    on_disconnect: OnDisconnect = "cancel",
) -> Response:
    """A Starlette (FastAPI) response streaming a run as the AI SDK's UI message stream.

    Args:
        events: `loop.stream(...)` or `loop.stream_resume(...)` not entered yet (the response
            starts the run as it starts sending), or a run's logged events (`loop.events(task_id)`).
        message_id: the assistant message's id (`start`'s `messageId`); None: the client's own.
        on_disconnect: for a run it started, what a client hanging up does: `cancel` the run
            (its checkpoint says `cancelled`), or let it `continue` to its stop. Logged events
            are no longer read.

    Returns:
        The response. A run that refuses to start (`TaskExists`, `TaskBusy`, `NotResumable`,
        `ApprovalMissing`, `TaskNotFound`, an invalid id or history) is answered with the status
        the inspector gives (409, 400, 404) and `{"error": ...}`, not a stream.
    """
    if isinstance(events, RunStream):
        return _UIMessageResponse(run=events, message_id=message_id, on_disconnect=on_disconnect)
    return _UIMessageResponse(follow=events, message_id=message_id, on_disconnect=on_disconnect)


class _UIMessageResponse(Response):
    """A UI message stream as an ASGI response, watching for the client to hang up: a run it
    starts (`run`), or logged events it follows (`follow`)."""

    def __init__(
        self,
        *,
        run: RunStream[Any] | None = None,
        follow: AsyncGenerator[Event] | None = None,
        message_id: str | None,
        on_disconnect: OnDisconnect = "cancel",
        done: contextlib.AbstractContextManager[None] | None = None,
    ) -> None:
        self.run = run
        self.follow = follow
        self.message_id = message_id
        self.on_disconnect: OnDisconnect = on_disconnect
        self.done = done if done is not None else contextlib.nullcontext()
        """Left when the response has ended (the chat app's record of its live runs)."""
        self.status_code = 200
        self.background = None
        self.init_headers(dict(UI_MESSAGE_STREAM_HEADERS))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        with self.done:
            if self.run is not None:
                async with self.run as run:
                    await self._run(run, scope, receive, send)
            elif self.follow is not None:
                async with contextlib.aclosing(self.follow) as events:  # a follower holds a connection
                    await self._follow(events, receive, send)

    async def _run(self, run: RunStream[Any], scope: Scope, receive: Receive, send: Send) -> None:
        try:
            first = await anext(run, None)
        except LoopError as exc:  # refused before the run started: a status, as the inspector answers
            outcome = refusal(exc)
            await JSONResponse({"error": outcome.message}, outcome.status)(scope, receive, send)
            return
        events = _chain(first, run)
        gone = anyio.Event()

        async def hang_up() -> None:
            await gone.wait()
            if self.on_disconnect == "cancel":
                await run.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(_watch, receive, gone)
            group.start_soon(hang_up)
            await self._send(events, send, gone)
            group.cancel_scope.cancel()

    async def _follow(self, events: AsyncGenerator[Event], receive: Receive, send: Send) -> None:
        gone = anyio.Event()
        async with anyio.create_task_group() as group:

            async def hang_up() -> None:
                await gone.wait()
                group.cancel_scope.cancel()  # stop following: nothing to cancel

            group.start_soon(_watch, receive, gone)
            group.start_soon(hang_up)
            await self._send(events, send, gone)
            group.cancel_scope.cancel()

    async def _send(self, events: AsyncIterable[Event], send: Send, gone: anyio.Event) -> None:
        """Every part, to the client while it listens; the run's events are read to the end
        either way (a run going on after the client left is not held by a full buffer)."""

        async def write(text: str, more: bool = True) -> None:
            if gone.is_set():
                return
            try:
                await send({"type": "http.response.body", "body": text.encode(), "more_body": more})
            except OSError:  # the client hung up (ASGI 2.4: a send to a closed connection)
                gone.set()

        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        async for frame in ui_message_stream(events, message_id=self.message_id):
            await write(frame)
        await write("", more=False)


async def _watch(receive: Receive, gone: anyio.Event) -> None:
    """Set `gone` when the client hangs up (the request's body was read before)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            gone.set()
            return


async def _chain(first: Event | None, rest: AsyncIterable[Event]) -> AsyncIterator[Event]:
    if first is None:
        return
    yield first
    async for event in rest:
        yield event


def chat_app(
    loop: AgentLoop[Any], *, token: str | None = None, on_disconnect: OnDisconnect = "cancel"
) -> Starlette:
    """An ASGI app (Starlette) that `useChat` talks to: mount it at your chat's `api` (`/api/chat`).

    - `POST /` takes `useChat`'s body (`{"id": chat id, "messages": [...]}`) and answers the
      run's UI message stream. The chat's n-th user message starts the run `CHAT_ID/n` (a
      boundloop task id: checked like one); its history is the transcript of the run before, from
      the store (not the client's copy). An assistant message whose tool parts carry approval
      responses resumes the waiting run with those decisions, checked as the inspector checks
      them (a stale one: 409). One whose tool part for the model's question (the loop's
      `Policy.escalation_tool`) holds the person's answer as its output (`addToolOutput`,
      `output-available`) resumes it with that answer as `reply=`; an answer to a call that is
      not the run's open question: 409, and nothing resumes.
    - `GET /{chat_id}/stream` (the AI SDK's resumable stream) replays the chat's run in progress
      from the store's event log, from its start, then follows it live: the client rebuilds the
      message with no gap and no duplicate. No run in progress: 204.

    Args:
        loop: the application's loop. Its store must keep an event log (`MemoryStore`,
            `SQLiteStore`, `PostgresStore`; `log_deltas=True` for the text of a reconnect as it
            streams); runs waiting for a human are resumed through it.
        token: when set, every request must carry `Authorization: Bearer TOKEN` (else 401).
        on_disconnect: `cancel` (the default: `useChat`'s stop button) or `continue` (for
            reconnecting clients: the run goes on, the GET follows it).

    Returns:
        The app. It keeps no cookies; a POST must be `application/json` (415 else), which a page
        of another site cannot send without the browser asking the server first (CORS).

    Raises:
        ConfigurationError: the token is empty, or the loop's store keeps no event log.
    """
    if token is not None and not token.strip():
        raise ConfigurationError("the chat app's token must not be empty")
    if event_log_of(loop.store) is None:
        raise ConfigurationError(
            "chat_app needs a loop whose store keeps an event log (MemoryStore, SQLiteStore, "
            f"PostgresStore), not {loop.store!r}"
        )
    chat = _Chat(loop, Guard(token), on_disconnect)
    return Starlette(
        routes=[
            Route("/", chat.post, methods=["POST"]),
            Route("/{chat_id:path}/stream", chat.reconnect, methods=["GET"]),
        ]
    )


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": message}, status)


def _text(message: _Message) -> str:
    return "".join(str(part.get("text", "")) for part in message.parts if part.get("type") == "text")


def _decisions(message: _Message) -> dict[str, Decision]:
    """The approval responses of an assistant message's tool parts, by tool_use id (the approval
    ids this app sends are the calls' ids)."""
    decisions: dict[str, Decision] = {}
    for part in message.parts:
        kind = str(part.get("type", ""))
        if (kind.startswith("tool-") or kind == "dynamic-tool") and part.get("state") == "approval-responded":
            approval = _Approval.model_validate(part.get("approval"))
            decisions[approval.id] = True if approval.approved else (approval.reason or False)
    return decisions


def _outputs(message: _Message) -> dict[str, object]:
    """The outputs an assistant message's tool parts hold (`output-available`, not run by the
    API), by toolCallId: the results this app streamed, and a person's answer to the model's
    question (`addToolOutput`)."""
    return {
        str(part.get("toolCallId")): part.get("output")
        for part in message.parts
        if (str(part.get("type", "")).startswith("tool-") or part.get("type") == "dynamic-tool")
        and part.get("state") == "output-available"
        and not part.get("providerExecuted")
    }


def _answers(state: LoopState | None, outputs: dict[str, object]) -> dict[str, object]:
    """The outputs the run did not give: a person's answers (the results of calls the run
    answered, or ran in its open turn, are what this app streamed)."""
    if not outputs or state is None:
        return outputs
    told = {observation.tool_use_id for observation in state.observations}
    if state.turn is not None:
        told.update(state.turn.calls[index].id for index in state.turn.invoked)
    return {call_id: output for call_id, output in outputs.items() if call_id not in told}


def _reply(state: LoopState, task_id: str, answers: dict[str, object]) -> str | Response | None:
    """The reply to the run's open question among `answers` (None: no answer); a response
    refusing an answer to another call (409), or an answer that is no text (400)."""
    if not answers:
        return None
    question = state.escalation
    others = sorted(call_id for call_id in answers if question is None or call_id != question.tool_use_id)
    if others:
        asks = "asks nothing" if question is None else f"asks in call {question.tool_use_id!r}"
        return _error(
            409,
            f"An answer for call {', '.join(map(repr, others))}, which is not the open question of "
            f"run {task_id!r} (it {asks}): nothing changed.",
        )
    assert question is not None
    reply = answers[question.tool_use_id]
    if not isinstance(reply, str):
        return _error(
            400,
            f"The answer to the question {question.tool_use_id!r} is the reply's text (a string "
            f"output), not {type(reply).__name__}: nothing changed.",
        )
    return reply


class _Chat:
    """The handlers of one app."""

    def __init__(self, loop: AgentLoop[Any], guard: Guard, on_disconnect: OnDisconnect) -> None:
        self.loop = loop
        assert loop.store is not None
        self.store = loop.store
        self.guard = guard
        self.on_disconnect: OnDisconnect = on_disconnect
        self.live: set[str] = set()
        """The runs a response of this app drives now (their task ids)."""

    @contextlib.contextmanager
    def driving(self, task_id: str) -> Generator[None]:
        """Left when the response driving `task_id` has ended: the run is no longer live here."""
        try:
            yield
        finally:
            self.live.discard(task_id)

    def respond(self, run: RunStream[Any], task_id: str) -> Response:
        """The response that drives `run`, live here from now until it ends."""
        self.live.add(task_id)  # no await since the checks: a second POST now sees the run busy
        return _UIMessageResponse(
            run=run, message_id=task_id, on_disconnect=self.on_disconnect, done=self.driving(task_id)
        )

    async def post(self, request: Request) -> Response:
        if not self.guard.allowed(request):
            return _error(401, "This chat needs its token: Authorization: Bearer TOKEN.")
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return _error(415, "Send the chat as application/json.")
        try:
            body = _Body.model_validate_json(await request.body())
            chat_id = check_task_id(body.id)
            turn = sum(1 for message in body.messages if message.role == "user")
            if turn == 0:
                return _error(400, "The chat has no user message.")
            task_id = check_task_id(f"{chat_id}/{turn}")
            last = body.messages[-1]
            decisions = _decisions(last) if last.role == "assistant" else {}
            if last.role == "system":
                return _error(400, "Nothing to do: the last message is no user or assistant message.")
        except (pydantic.ValidationError, InvalidTaskId) as exc:
            return _error(400, f"Not a chat request: {exc}")
        try:
            state = await self.store.load(task_id)
        except CheckpointCorrupt as exc:
            return _error(400, str(exc))
        if last.role == "assistant":
            return self.decide(task_id, state, decisions, _answers(state, _outputs(last)))
        if state is not None or task_id in self.live:
            return _error(409, f"This turn has run already (run {task_id!r}): nothing changed.")
        history = None
        if turn > 1:
            before = f"{chat_id}/{turn - 1}"
            previous = await self.store.load(before)
            if previous is None or before in self.live or status_of(previous) != "stopped":
                return _error(
                    409,
                    f"The chat's turn before (run {before!r}) is not over (or not in the store): "
                    "decide its calls first. Nothing changed.",
                )
            history = previous.messages
        return self.respond(self.loop.stream(_text(last), task_id=task_id, messages=history), task_id)

    def decide(
        self,
        task_id: str,
        state: LoopState | None,
        decisions: dict[str, Decision],
        answers: dict[str, object],
    ) -> Response:
        """The waiting run resumed with an assistant message's approvals and its answer to the
        model's question; or why not (404, 409, 400)."""
        stale = not_decidable(state, task_id, decisions, busy=task_id in self.live)
        if stale is not None:  # a run that moved on refuses the message's decisions and answers
            return _outcome(stale)
        assert state is not None  # not_decidable refuses a run not in the store
        if not decisions and not answers:
            return _error(400, "Nothing to do: the message decides no waiting call and answers no question.")
        reply = _reply(state, task_id, answers)
        if isinstance(reply, Response):
            return reply
        return self.respond(self.loop.stream_resume(task_id, approvals=decisions, reply=reply), task_id)

    async def reconnect(self, request: Request) -> Response:
        if not self.guard.allowed(request):
            return _error(401, "This chat needs its token: Authorization: Bearer TOKEN.")
        try:
            chat_id = check_task_id(request.path_params["chat_id"])
            check_task_id(f"{chat_id}/1")  # its first run's id (at most 200 characters too)
        except InvalidTaskId as exc:
            return _error(400, str(exc))
        task_id = await self.latest(chat_id)
        if task_id is None or not await self.in_progress(task_id):
            return Response(status_code=204)
        return _UIMessageResponse(follow=self.replay(task_id), message_id=task_id)

    async def latest(self, chat_id: str) -> str | None:
        """The task id of the chat's last run (started here, or in the store), if any."""
        latest = None
        for turn in range(1, MAX_TURNS + 1):
            task_id = f"{chat_id}/{turn}"
            try:
                if task_id not in self.live and await self.store.load(check_task_id(task_id)) is None:
                    break
            except (InvalidTaskId, CheckpointCorrupt):  # too long an id; a damaged run ends the chat
                break
            latest = task_id
        return latest

    async def in_progress(self, task_id: str) -> bool:
        """Driven by this app now, or its log goes on past its last stop (a run elsewhere)."""
        if task_id in self.live:
            return True
        log = event_log_of(self.store)
        assert log is not None
        last = await log.last_seq(task_id)
        tail = await log.read(task_id, after=last - 1)
        return tail != [] and tail[-1].kind != "stop"

    async def replay(self, task_id: str) -> AsyncGenerator[Event]:
        """The run's events from its start, then live: past a stop only when a session after it
        is logged already (a resume with decisions continues the same assistant message)."""
        log = event_log_of(self.store)
        assert log is not None
        after = -1
        while True:
            async with contextlib.aclosing(follow(self.store, task_id, after=after)) as events:
                async for event in events:
                    yield event
                    after = event.seq
            if await log.last_seq(task_id) <= after:
                return


def _outcome(outcome: Outcome) -> Response:
    return _error(outcome.status, outcome.message)
