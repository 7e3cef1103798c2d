"""The inspector (`boundloop.web.app`) over a SQLite store with runs in it, through HTTP:
the pages, the approvals resuming a run through the application's loop, and the security rules."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest

from boundloop import AgentLoop, Budget, Observers, ScriptedClient, SQLiteStore, StopReason, Tool
from boundloop.web import app as inspector_app
from tests import inspector_runs
from tests.helpers import tool_use
from tests.inspector_runs import HOSTILE_GOAL, SECRET, build_loop

pytestmark = pytest.mark.asyncio_only  # uvicorn and starlette's test client: asyncio

WAIT_S = 30.0


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    inspector_runs.REFUNDS.clear()
    return inspector_runs.make_store(tmp_path / "runs.db")


@contextlib.asynccontextmanager
async def client_of(
    store: SQLiteStore, *, with_loop: bool = True, token: str | None = None
) -> AsyncIterator[httpx.AsyncClient]:
    app = inspector_app(store, build_loop() if with_loop else None, token=token)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client,
    ):
        yield client


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found is not None, page
    return found.group(1)


def task_links(page: str) -> list[str]:
    return re.findall(r'<a class="task" href="/runs/([^"]+)">', page)


async def test_the_runs_list_is_newest_first_and_filters(store: SQLiteStore) -> None:
    """Every run, newest save first; `?status=` and `?stop_reason=` filter it."""
    with anyio.fail_after(WAIT_S):
        async with client_of(store) as client:
            page = (await client.get("/")).text
            assert task_links(page) == ["run-max-steps", "run-%3Chostile%3E", "run-refund", "run-completed"]
            assert "claude-sonnet-4-6" in page
            waiting = (await client.get("/", params={"status": "waiting"})).text
            assert task_links(waiting) == ["run-refund"]
            limited = (await client.get("/", params={"stop_reason": "max_steps"})).text
            assert task_links(limited) == ["run-max-steps"]
            assert (await client.get("/", params={"status": "nonsense"})).status_code == 400
            assert (await client.get("/", params={"cursor": "nonsense"})).status_code == 400


async def test_a_run_page_shows_its_timeline_diagram_transcript_and_usage(store: SQLiteStore) -> None:
    with anyio.fail_after(WAIT_S):
        async with client_of(store) as client:
            answer = await client.get("/runs/run-completed")
            assert answer.status_code == 200
            page = answer.text
            for kind in ("run_started", "proposal", "validation", "tool_result", "stop"):
                assert f'<td class="kind">{kind}</td>' in page
            assert "read_order [toolu_0_read_order]: ok" in page
            assert 'id="diagram"' in page
            assert "O-7 is fine." in page
            assert 'id="usage"' in page
            assert 'id="provenance"' in page
            assert (await client.get("/runs/no-such-run")).status_code == 404


async def test_values_from_runs_are_escaped_and_secrets_stay_redacted(store: SQLiteStore) -> None:
    """The hostile goal and task id show as text, never as markup; the key in the refund's goal
    is `[REDACTED]` on every page."""
    with anyio.fail_after(WAIT_S):
        async with client_of(store) as client:
            pages = [
                (await client.get("/")).text,
                (await client.get("/runs/run-%3Chostile%3E")).text,
                (await client.get("/runs/run-refund")).text,
                (await client.get("/approvals")).text,
            ]
            assert all("<script>document" not in page for page in pages)
            assert "&lt;script&gt;document.title=&#x27;owned&#x27;&lt;/script&gt;" in pages[1]
            assert "<hostile>" not in pages[0]
            assert "run-&lt;hostile&gt;" in pages[0]
            assert "&lt;b&gt;bold&lt;/b&gt; answer" in pages[1]
            assert all(SECRET not in page for page in pages)
            assert "[REDACTED]" in pages[2]
            assert "[REDACTED]" in pages[3]
            assert HOSTILE_GOAL not in "".join(pages)


async def wait_for_stop(store: SQLiteStore, task_id: str, after: int) -> str:
    """The stop reason of the run's next `Stop` after `after` (followed in the event log)."""
    async for event in build_loop().with_store(store).events(task_id, after=after):
        if event.kind == "stop":
            return event.stop_reason
    raise AssertionError("no stop")


async def test_approving_the_refund_resumes_the_run_once(store: SQLiteStore) -> None:
    """Approve: the run resumes through the application's loop, the refund runs once and the run
    completes; approving again changes nothing and says so."""
    last = await store.last_seq("run-refund")
    with anyio.fail_after(WAIT_S):
        async with client_of(store) as client:
            approvals = (await client.get("/approvals")).text
            assert "refund</b> [toolu_1_refund]" in approvals
            assert "run-refund:1:toolu_1_refund" in approvals  # the idempotency key
            assert "why: refund awaits human approval" in approvals
            form = {"csrf": csrf_of(approvals), "decision:toolu_1_refund": "approve"}
            answer = await client.post("/runs/run-refund/decide", data=form)
            assert answer.status_code == 303
            assert answer.headers["location"] == "/runs/run-refund"
            assert await wait_for_stop(store, "run-refund", last) == "completed"
            again = await client.post("/runs/run-refund/decide", data=form)
            assert again.status_code == 409
            assert "no longer pending" in again.text
            assert "nothing changed" in again.text
    state = await store.load("run-refund")
    assert state is not None
    assert state.stop_reason is StopReason.COMPLETED
    assert inspector_runs.REFUNDS == ["run-refund:1:toolu_1_refund"]


async def test_two_approvals_at_once_one_resumes_the_other_is_told(store: SQLiteStore) -> None:
    last = await store.last_seq("run-refund")
    statuses: list[int] = []
    with anyio.fail_after(WAIT_S):
        async with client_of(store) as client:
            approvals = (await client.get("/approvals")).text
            form = {"csrf": csrf_of(approvals), "decision:toolu_1_refund": "approve"}

            async def post() -> None:
                statuses.append((await client.post("/runs/run-refund/decide", data=form)).status_code)

            async with anyio.create_task_group() as group:
                group.start_soon(post)
                group.start_soon(post)
            assert sorted(statuses) == [303, 409]
            assert await wait_for_stop(store, "run-refund", last) == "completed"
    assert inspector_runs.REFUNDS == ["run-refund:1:toolu_1_refund"]


async def test_a_denial_with_a_reason_reaches_the_model(store: SQLiteStore) -> None:
    last = await store.last_seq("run-refund")
    with anyio.fail_after(WAIT_S):
        async with client_of(store) as client:
            approvals = (await client.get("/approvals")).text
            form = {
                "csrf": csrf_of(approvals),
                "decision:toolu_1_refund": "deny",
                "reason:toolu_1_refund": "no receipt",
            }
            assert (await client.post("/runs/run-refund/decide", data=form)).status_code == 303
            assert await wait_for_stop(store, "run-refund", last) == "completed"
            page = (await client.get("/runs/run-refund")).text
            assert "denied by a human (no receipt)" in page
    assert inspector_runs.REFUNDS == []


async def test_a_post_without_the_csrf_token_is_refused(store: SQLiteStore) -> None:
    with anyio.fail_after(WAIT_S):
        async with client_of(store) as client:
            await client.get("/approvals")  # the CSRF cookie is set
            for form in (
                {"decision:toolu_1_refund": "approve"},
                {"csrf": "0" * 64, "decision:toolu_1_refund": "approve"},
            ):
                answer = await client.post("/runs/run-refund/decide", data=form)
                assert answer.status_code == 403
                assert "CSRF" in answer.text
    state = await store.load("run-refund")
    assert state is not None
    assert state.stop_reason is StopReason.NEEDS_HUMAN
    assert inspector_runs.REFUNDS == []


async def test_without_a_loop_the_inspector_is_read_only(store: SQLiteStore) -> None:
    with anyio.fail_after(WAIT_S):
        async with client_of(store, with_loop=False) as client:
            approvals = (await client.get("/approvals")).text
            assert 'id="read-only"' in approvals
            assert "--loop" in approvals
            assert "decision:toolu_1_refund" not in approvals
            csrf = csrf_of((await client.get("/login")).text)
            answer = await client.post(
                "/runs/run-refund/decide", data={"csrf": csrf, "decision:toolu_1_refund": "approve"}
            )
            assert answer.status_code == 403
            assert "read-only" in answer.text
    state = await store.load("run-refund")
    assert state is not None
    assert state.stop_reason is StopReason.NEEDS_HUMAN


async def test_with_a_token_every_request_needs_it(store: SQLiteStore) -> None:
    """No token: 401 (and the login form); a bearer token, or the login form's HttpOnly cookie:
    the page."""
    with anyio.fail_after(WAIT_S):
        async with client_of(store, token="s3cret-token") as client:
            for path in ("/", "/approvals", "/runs/run-refund", "/api/runs/run-refund/events"):
                refused = await client.get(path)
                assert refused.status_code == 401, path
                assert "run-refund" not in refused.text
            assert (
                await client.get("/", headers={"Authorization": "Bearer s3cret-token"})
            ).status_code == 200
            assert (await client.get("/", headers={"Authorization": "Bearer wrong"})).status_code == 401
            login = await client.get("/login")
            wrong = await client.post("/login", data={"csrf": csrf_of(login.text), "token": "nope"})
            assert wrong.status_code == 401
            logged = await client.post("/login", data={"csrf": csrf_of(login.text), "token": "s3cret-token"})
            assert logged.status_code == 303
            cookie = logged.headers["set-cookie"]
            assert "HttpOnly" in cookie
            assert "s3cret-token" not in cookie
            assert (await client.get("/")).status_code == 200


async def test_the_live_update_reads_the_event_log_after_a_seq(store: SQLiteStore) -> None:
    with anyio.fail_after(WAIT_S):
        async with client_of(store) as client:
            body = (await client.get("/api/runs/run-completed/events", params={"after": 3})).json()
            assert body["rows"]
            assert all(row["seq"] > 3 for row in body["rows"])
            assert body["stopped"] is True
            assert body["last"] == await store.last_seq("run-completed")
            # Polled again at the end of the log: nothing new, and still stopped (the page reloads).
            again = (
                await client.get("/api/runs/run-completed/events", params={"after": body["last"]})
            ).json()
            assert again == {"rows": [], "last": body["last"], "stopped": True}
            waiting = (await client.get("/api/runs/run-refund/events", params={"after": 0})).json()
            assert waiting["stopped"] is True  # its log ends with the needs_human stop
            assert (await client.get("/static/live.js")).status_code == 200


async def cancel_a_run(store: SQLiteStore) -> None:
    """Save `run-cancelled`: stopped `cancelled` during its first model call."""
    cancel = anyio.Event()

    async def hang(_: object) -> dict[str, object]:
        cancel.set()
        await anyio.sleep_forever()
        raise AssertionError("cancelled")

    loop = AgentLoop(
        ScriptedClient([hang]),
        model="claude-sonnet-4-6",
        tools=[inspector_runs.read_order, inspector_runs.refund],
        budget=Budget(max_steps=5),
        observers=Observers(metrics=None),
        store=store,
    )
    result = await loop.run("Look at order O-5", task_id="run-cancelled", cancel=cancel)
    assert result.stop_reason is StopReason.CANCELLED


async def test_a_cancelled_run_is_continued_from_its_page(store: SQLiteStore) -> None:
    """A cancelled run's page has a Continue button (none without a loop); it resumes the run
    with no decision, which completes; a second press changes nothing (409)."""
    await cancel_a_run(store)
    last = await store.last_seq("run-cancelled")
    with anyio.fail_after(WAIT_S):
        async with client_of(store, with_loop=False) as client:
            assert 'id="continue"' not in (await client.get("/runs/run-cancelled")).text
        async with client_of(store) as client:
            page = (await client.get("/runs/run-cancelled")).text
            assert 'id="continue"' in page
            form = {"csrf": csrf_of(page)}
            answer = await client.post("/runs/run-cancelled/decide", data=form)
            assert answer.status_code == 303
            assert await wait_for_stop(store, "run-cancelled", last) == "completed"
            again = await client.post("/runs/run-cancelled/decide", data=form)
            assert again.status_code == 409
            assert "nothing changed" in again.text
            assert 'id="continue"' not in (await client.get("/runs/run-completed")).text
    state = await store.load("run-cancelled")
    assert state is not None
    assert state.stop_reason is StopReason.COMPLETED
    assert state.answer == "Refunded O-104: 25 EUR."


async def test_a_secret_used_as_a_key_of_a_waiting_calls_input_stays_redacted(tmp_path: Path) -> None:
    """The model picks a tool input's keys: a key that is a secret is `[REDACTED]` on the
    approvals page as on the run page."""
    annotate = Tool(
        name="annotate",
        description="Attach notes to an order (needs a human's approval).",
        input_schema={"type": "object", "additionalProperties": {"type": "string"}},
        handler=lambda **notes: "noted",
        requires_approval=True,
    )
    store = SQLiteStore(tmp_path / "runs.db")
    waiting = AgentLoop(
        ScriptedClient([tool_use(("annotate", {SECRET: "the customer's key", "order": "O-5"}))]),
        model="claude-sonnet-4-6",
        tools=[annotate],
        budget=Budget(max_steps=3),
        observers=Observers(metrics=None),
        store=store,
    )
    result = await waiting.run("Annotate order O-5", task_id="run-keyed")
    assert result.stop_reason is StopReason.NEEDS_HUMAN
    with anyio.fail_after(WAIT_S):
        async with client_of(store, with_loop=False) as client:
            approvals = (await client.get("/approvals")).text
            run_page = (await client.get("/runs/run-keyed")).text
    assert "annotate</b> [toolu_0_annotate]" in approvals
    assert "O-5" in approvals
    assert SECRET not in approvals
    assert SECRET not in run_page
    assert "[REDACTED]" in approvals
