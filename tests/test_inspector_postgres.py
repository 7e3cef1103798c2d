"""The inspector on PostgreSQL: two inspectors (two `boundloop.web.app` over two `PostgresStore`s,
as two server processes would be) on one database, approving the same waiting call at once:
one resumes the run, the refund runs once, and the other is told nothing changed."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncGenerator

import anyio
import httpx
import pytest

from boundloop import StopReason
from boundloop.checkpoint import PostgresStore
from boundloop.checkpoint.paging import PagingStore
from boundloop.web import app as inspector_app
from tests import inspector_runs
from tests.inspector_runs import build_loop

pytestmark = pytest.mark.asyncio_only  # starlette's app under httpx's ASGI transport: asyncio

WAIT_S = 60.0


@contextlib.asynccontextmanager
async def inspector(dsn: str) -> AsyncGenerator[tuple[httpx.AsyncClient, PostgresStore]]:
    """An inspector with its own store (its own pool and lease session) on the database."""
    async with PostgresStore(dsn) as store:
        app = inspector_app(store, build_loop())
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client,
        ):
            yield client, store


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found is not None, page
    return found.group(1)


@pytest.fixture
async def dsn(postgres_dsn: str) -> AsyncGenerator[str]:
    """A database holding the inspector's runs (the refund waits for its approval)."""
    inspector_runs.REFUNDS.clear()
    inspector_runs.REFUND_HOLDS.clear()
    async with PostgresStore(postgres_dsn) as store:
        await inspector_runs.fill(store)
    yield postgres_dsn
    inspector_runs.REFUND_HOLDS.clear()


async def test_the_runs_list_pages_from_postgres(dsn: str) -> None:
    with anyio.fail_after(WAIT_S):
        async with inspector(dsn) as (client, store):
            assert isinstance(store, PagingStore)
            page = (await client.get("/")).text
            found = re.findall(r'<a class="task" href="/runs/([^"]+)">', page)
            assert found == ["run-max-steps", "run-%3Chostile%3E", "run-refund", "run-completed"]
            waiting = (await client.get("/", params={"status": "waiting"})).text
            assert re.findall(r'<a class="task" href="/runs/([^"]+)">', waiting) == ["run-refund"]


async def test_two_inspectors_approving_at_once_one_wins(dsn: str) -> None:
    """Both inspectors POST the approval at once; the refund is held until both have answered,
    so the loser is decided while the winner's resume holds the run. One answers 303 and
    resumes the run to `completed`; the other answers 409, nothing changed; the refund ran once."""
    hold = anyio.Event()
    inspector_runs.REFUND_HOLDS.append(hold)
    answers: list[httpx.Response] = []
    with anyio.fail_after(WAIT_S):
        async with inspector(dsn) as (first, store), inspector(dsn) as (second, _):
            last = await store.last_seq("run-refund")
            forms = []
            for client in (first, second):
                approvals = (await client.get("/approvals")).text
                assert "refund</b> [toolu_1_refund]" in approvals
                forms.append({"csrf": csrf_of(approvals), "decision:toolu_1_refund": "approve"})
            both = anyio.Event()

            async def approve(client: httpx.AsyncClient, form: dict[str, str]) -> None:
                await both.wait()
                answers.append(await client.post("/runs/run-refund/decide", data=form))

            async with anyio.create_task_group() as group:
                group.start_soon(approve, first, forms[0])
                group.start_soon(approve, second, forms[1])
                both.set()
            assert sorted(answer.status_code for answer in answers) == [303, 409]
            [told] = [answer for answer in answers if answer.status_code == 409]
            assert "nothing changed" in told.text
            assert inspector_runs.REFUNDS == []  # held: the answers came while the run was resumed
            hold.set()
            async for event in build_loop().with_store(store).events("run-refund", after=last):
                if event.kind == "stop":
                    assert event.stop_reason == "completed", event.detail
                    break
            again = await second.post("/runs/run-refund/decide", data=forms[1])
            assert again.status_code == 409
            assert "nothing changed" in again.text
    # The inspectors are gone (their lifespans waited for the resume, whose last save is shielded).
    async with PostgresStore(dsn) as store:
        state = await store.load("run-refund")
    assert state is not None
    assert state.stop_reason is StopReason.COMPLETED
    assert inspector_runs.REFUNDS == ["run-refund:1:toolu_1_refund"]
