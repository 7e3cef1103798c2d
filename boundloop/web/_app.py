"""The inspector's routes: `app(store, loop=None, token=None)`."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from .. import AgentLoop, CheckpointCorrupt, ConfigurationError, LoopState
from ..checkpoint.paging import page_runs
from ..checkpoint.store import CheckpointStore, Status, check_task_id
from ..errors import InvalidTaskId
from ..pools.store import PoolStore
from ..redaction import Redactor
from ..statemachine import diagram
from ._approvals import Resumer, read_decisions, waiting_card
from ._html import Html, csrf_field, e, join, page
from ._live import LIVE_JS
from ._pools import pools_page, read_pools, stopped_by_pools
from ._runs import MAX_BELOW, STATUSES, Below, has_graphviz, run_link, run_page, runs_page
from ._security import SESSION_COOKIE, Guard
from ._timeline import call_reasons, read_events, rows

if TYPE_CHECKING:
    from dbos import DBOSClient

    from ..integrations.dbos import DurableLoop
    from ._durable import Durable

Handler = Callable[[Request], Awaitable[Response]]


def app(
    store: CheckpointStore,
    loop: AgentLoop[Any] | DurableLoop | None = None,
    token: str | None = None,
    *,
    dbos_client: DBOSClient | None = None,
    pools: PoolStore | None = None,
) -> Starlette:
    """The inspector as an ASGI app: the runs of `store`, each run's page, and the approvals.

    Args:
        store: the store the application's runs are saved in.
        loop: the application's loop: Approve and Deny resume runs through it (bound to
            `store`), in this server process. A `DurableLoop` (DBOS launched in this process):
            a run waiting for a human inside its DBOS workflow gets the decision sent to its
            workflow (`DurableLoop.decide`), which continues it; other runs resume through its
            loop. None: the pages are read-only.
        token: when set, every request must carry it (`Authorization: Bearer TOKEN`, or the
            cookie the login form sets); else the answer is 401.
        dbos_client: a `DBOSClient` on the DBOS system database of the workers that run the
            loop's workflows: decisions for runs waiting in their workflow are sent through it
            (the `decide` of `boundloop.integrations.dbos`), without DBOS in this process.
        pools: the pool store of the application's budget pools: `/pools` lists them (their
            spend, what running calls hold, their ceilings) beside the runs a pool stopped.

    Returns:
        A Starlette app. Mounted inside another app, run its lifespan too (it holds the task
        group resumed runs go on in): `lifespan=inspector.router.lifespan_context`.

    Raises:
        ConfigurationError: the token is empty, or `loop` is neither an AgentLoop nor a DurableLoop.
    """
    if token is not None and not token.strip():
        raise ConfigurationError("the inspector's token must not be empty")
    durable: Durable | None = None
    if dbos_client is not None or not (loop is None or isinstance(loop, AgentLoop)):
        from ._durable import split  # needs the dbos extra

        loop, durable = split(loop, dbos_client)
    inspector = _Inspector(store, loop, Guard(token), durable)
    inspector.pools = pools
    guarded = inspector.guarded
    routes = [
        Route("/", guarded(inspector.runs)),
        Route("/login", inspector.login, methods=["GET", "POST"]),
        Route("/approvals", guarded(inspector.approvals)),
        Route("/pools", guarded(inspector.pools_page)),
        Route("/runs/{task_id:path}/diagram.svg", guarded(inspector.diagram_svg)),
        Route("/runs/{task_id:path}/decide", guarded(inspector.decide), methods=["POST"]),
        Route("/runs/{task_id:path}", guarded(inspector.run)),
        Route("/api/runs/{task_id:path}/events", guarded(inspector.events)),
        Route("/static/live.js", inspector.live_js),
    ]
    return Starlette(routes=routes, lifespan=inspector.lifespan)


def _error(text: object) -> Html:
    return Html(f'<p class="error" id="message">{e(text)}</p>')


class _Inspector:
    """The handlers of one app."""

    def __init__(
        self, store: CheckpointStore, loop: AgentLoop[Any] | None, guard: Guard, durable: Durable | None
    ) -> None:
        self.store = store
        self.guard = guard
        self.read_only = loop is None and durable is None
        self.resumer = Resumer(loop, store, durable)
        self.redact: Callable[[str], str] = Redactor() if loop is None else loop.config.redactor
        self.graphviz = False
        """Whether the diagram is an SVG (graphviz's `dot` is installed), else mermaid text."""
        self.pools: PoolStore | None = None
        """The pool store `/pools` lists (None: only the runs a pool stopped)."""

    @contextlib.asynccontextmanager
    async def lifespan(self, _: Starlette) -> AsyncGenerator[None]:
        """The task group resumed runs go on in, for the app's life."""
        self.graphviz = await anyio.to_thread.run_sync(has_graphviz)
        async with anyio.create_task_group() as group:
            self.resumer.task_group = group
            try:
                yield
            finally:
                self.resumer.task_group = None
                group.cancel_scope.cancel()

    def html(self, request: Request, title: str, body: Html, status: int = 200) -> Response:
        return self.guard.remember(request, HTMLResponse(page(title, body, read_only=self.read_only), status))

    def guarded(self, handler: Handler) -> Handler:
        """`handler` behind the token (401 and the login form without it) and, for a POST, the
        CSRF check (403)."""

        async def checked(request: Request) -> Response:
            if not self.guard.allowed(request):
                return self.login_page(request, 401)
            if request.method == "POST":
                form = await request.form()
                if not self.guard.csrf_ok(request, form.get("csrf")):
                    refusal = _error("Refused: the form has no valid CSRF token (reload the page).")
                    return self.html(request, "Refused", refusal, 403)
            return await handler(request)

        return checked

    def login_page(self, request: Request, status: int = 200, *, failed: bool = False) -> Response:
        wrong = _error("Wrong token.") if failed else Html("")
        body = Html(
            f"<h1>Log in</h1>{wrong}<form method='post' action='/login'>"
            f"{csrf_field(self.guard.csrf_token(request))}"
            '<label>Token <input type="password" name="token" id="token" autocomplete="off"></label> '
            '<button type="submit" id="login">Log in</button></form>'
        )
        return self.html(request, "Log in", body, status)

    async def login(self, request: Request) -> Response:
        if request.method == "GET":
            return self.login_page(request)
        form = await request.form()
        if not self.guard.csrf_ok(request, form.get("csrf")):
            return self.login_page(request, 403)
        given = form.get("token")
        if not isinstance(given, str) or not self.guard.token_matches(given):
            return self.login_page(request, 401, failed=True)
        response = RedirectResponse("/", 303)
        response.set_cookie(SESSION_COOKIE, self.guard.session_value(), httponly=True, samesite="strict")
        return response

    async def runs(self, request: Request) -> Response:
        query = request.query_params
        status = query.get("status") or None
        stop_reason = query.get("stop_reason") or None
        if status is not None and status not in STATUSES:
            return self.html(request, "Runs", _error(f"Unknown status {status!r}."), 400)
        try:
            found = await page_runs(
                self.store,
                status=_status(status),
                stop_reason=stop_reason,
                cursor=query.get("cursor") or None,
            )
        except ConfigurationError as exc:
            return self.html(request, "Runs", _error(exc), 400)
        states: dict[str, LoopState | str | None] = {}
        for row in found.runs:
            try:
                states[row.task_id] = await self.store.load(row.task_id)
            except CheckpointCorrupt as exc:
                states[row.task_id] = str(exc)
        body = runs_page(found, states, {"status": status, "stop_reason": stop_reason}, self.redact)
        return self.html(request, "Runs", body)

    async def pools_page(self, request: Request) -> Response:
        usages = await read_pools(self.pools)
        stopped = await stopped_by_pools(self.store)
        return self.html(request, "Budget pools", pools_page(usages, stopped, self.redact))

    async def load(self, request: Request) -> LoopState | Response:
        task_id = request.path_params["task_id"]
        try:
            state = await self.store.load(check_task_id(task_id))
        except (CheckpointCorrupt, InvalidTaskId) as exc:
            return self.html(request, "Run", _error(exc), 400)
        if state is None:
            return self.html(request, "Run", _error(f"No run {task_id!r} in the store."), 404)
        return state

    async def run(self, request: Request) -> Response:
        state = await self.load(request)
        if isinstance(state, Response):
            return state
        events = await read_events(self.store, state.task_id)
        mermaid = None if self.graphviz else diagram.render_mermaid(events)
        # Live: resumed by this server, or the log goes on past its last stop (a run resumed
        # elsewhere: in its DBOS workflow, another inspector).
        live = state.task_id in self.resumer.resuming or (events != [] and events[-1].kind != "stop")
        csrf = None if self.read_only else self.guard.csrf_token(request)
        below = await self.below(state)
        body = run_page(state, events, self.redact, mermaid, live=live, csrf=csrf, below=below)
        return self.html(request, f"Run {state.task_id}", body)

    async def below(self, state: LoopState) -> Below:
        """The runs below `state` in its delegation tree, depth first, in the order each parent
        started them (at most `MAX_BELOW`; each run once, whatever a damaged store says)."""
        found: Below = []
        seen = {state.task_id}
        stack = [(1, task_id) for task_id in reversed(state.children)]
        while stack and len(found) < MAX_BELOW:
            depth, task_id = stack.pop()
            if task_id in seen:
                continue
            seen.add(task_id)
            try:
                child: LoopState | str | None = await self.store.load(check_task_id(task_id))
            except (CheckpointCorrupt, InvalidTaskId) as exc:
                child = str(exc)
            found.append((depth, task_id, child))
            if isinstance(child, LoopState):
                stack.extend((depth + 1, grandchild) for grandchild in reversed(child.children))
        return found

    async def diagram_svg(self, request: Request) -> Response:
        state = await self.load(request)
        if isinstance(state, Response):
            return state
        events = await read_events(self.store, state.task_id)
        image = await anyio.to_thread.run_sync(lambda: diagram.render("svg", events))
        return self.guard.remember(request, Response(image, media_type="image/svg+xml"))

    async def events(self, request: Request) -> Response:
        """The timeline rows after `?after=SEQ`, for the run page's live update."""
        task_id = request.path_params["task_id"]
        try:
            after = int(request.query_params.get("after", "-1"))
            events = await read_events(self.store, check_task_id(task_id), after=after)
        except (ValueError, InvalidTaskId) as exc:
            return JSONResponse({"error": str(exc)}, 400)
        latest = events[-1:] or await read_events(self.store, task_id, after=after - 1)
        # Stopped: the log ends with a `Stop` and no resume of this server goes on from it.
        stopped = latest[-1:] != [] and latest[-1].kind == "stop" and task_id not in self.resumer.resuming
        body = {"rows": rows(events), "last": events[-1].seq if events else after, "stopped": stopped}
        return self.guard.remember(request, JSONResponse(body))

    async def approvals(self, request: Request) -> Response:
        waiting = await page_runs(self.store, status="waiting", limit=500)
        cards: list[Html] = []
        for row in waiting.runs:
            state = await self.store.load(row.task_id)
            if state is None:
                continue
            reasons = call_reasons(await read_events(self.store, row.task_id))
            csrf = self.guard.csrf_token(request)
            cards.append(waiting_card(state, reasons, self.redact, csrf, can_resume=not self.read_only))
        none = Html('<p id="none-waiting">No run waits for a human.</p>')
        body = join([Html("<h1>Waiting for a human</h1>"), join(cards) if cards else none])
        return self.html(request, "Approvals", body)

    async def decide(self, request: Request) -> Response:
        """Approve or deny a waiting run's calls, or continue a cancelled run: it resumes here, and
        its page follows it."""
        state = await self.load(request)
        if isinstance(state, Response):
            return state
        approvals, reply = read_decisions(dict(await request.form()), state)
        outcome = await self.resumer.decide(state.task_id, approvals, reply)
        link = run_link(state.task_id)
        if outcome.resumed:
            return RedirectResponse(link, 303)
        message = join([_error(outcome.message), Html(f'<p><a href="{e(link)}">the run</a></p>')])
        return self.html(request, "Not resumed", message, outcome.status)

    async def live_js(self, _: Request) -> Response:
        return Response(LIVE_JS, media_type="text/javascript")


def _status(value: str | None) -> Status | None:
    """A status checked against `STATUSES`."""
    return None if value is None else value  # type: ignore[return-value]
