"""The inspector approving a run that waits for a human inside its DBOS workflow: the decision
is sent to the workflow (not resumed by the inspector, which the workflow's lease would refuse),
the run continues there to `completed`, its page follows it, and the tool ran once; a second
approval, while the workflow runs the approved call and after it ended, changes nothing (409).
Both ways the inspector reaches DBOS: a `DurableLoop` with DBOS launched in its process, and a
`DBOSClient` on the workers' system database."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncGenerator
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest
from dbos import DBOS, DBOSClient

from boundloop import AgentLoop, Budget, LoopResult, MemoryStore, Observers, StopReason, ToolContext, tool
from boundloop.integrations.dbos import DurableLoop
from boundloop.integrations.dbos._wait import WAITING_EVENT
from boundloop.testing import ScriptedClient
from boundloop.tools import Tool
from boundloop.web import app as inspector_app
from tests.helpers import JSON, text, tool_use
from tests.integrations.conftest import Launch

pytestmark = pytest.mark.asyncio_only  # DBOS and starlette under httpx's ASGI transport: asyncio

WAIT_S = 60.0
"""The longest a step of these tests may take (a slow, shared CI machine)."""


def refund_loop(store: MemoryStore, ran: list[str], hold: anyio.Event) -> AgentLoop:
    @tool(requires_approval=True, side_effect=True)
    async def refund(order_id: str, ctx: ToolContext) -> str:
        """Refund an order (once a human approved it)."""
        await hold.wait()
        ran.append(ctx.idempotency_key)
        return f"refunded {order_id}"

    tools: list[Tool] = [refund]
    script: list[JSON] = [tool_use(("refund", {"order_id": "O-1"}, "toolu_refund")), text("done")]
    return AgentLoop(
        ScriptedClient(script),
        model="claude-sonnet-4-6",
        tools=tools,
        budget=Budget(max_steps=4),
        observers=Observers(metrics=None),
        store=store,
        name="refunds",
    )


@contextlib.asynccontextmanager
async def browser(store: MemoryStore, **options: Any) -> AsyncGenerator[httpx.AsyncClient]:
    app = inspector_app(store, **options)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client,
    ):
        yield client


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert found is not None, page
    return found.group(1)


async def approve_through(
    client: httpx.AsyncClient, durable: DurableLoop, task_id: str, hold: anyio.Event
) -> None:
    """Run `task_id` as a workflow; once it waits, approve its refund from the inspector."""
    results: list[LoopResult] = []
    form: dict[str, str] = {}
    async with anyio.create_task_group() as group:

        async def run() -> None:
            results.append(await durable.run("Refund O-1", task_id=task_id))

        group.start_soon(run)
        assert await DBOS.get_event_async(task_id, WAITING_EVENT, timeout_seconds=WAIT_S) is not None
        approvals = (await client.get("/approvals")).text
        assert "refund</b> [toolu_refund]" in approvals
        form.update({"csrf": csrf_of(approvals), "decision:toolu_refund": "approve"})

        answer = await client.post(f"/runs/{task_id}/decide", data=form)

        assert answer.status_code == 303, answer.text
        assert answer.headers["location"] == f"/runs/{task_id}"
        page = (await client.get(f"/runs/{task_id}")).text
        assert 'data-live="True"' in page  # the page follows the run its workflow continues
        again = await client.post(f"/runs/{task_id}/decide", data=form)  # the refund is held
        assert again.status_code == 409, again.text
        assert "nothing changed" in again.text
        hold.set()

    [result] = results
    assert result.stop_reason is StopReason.COMPLETED
    assert result.answer == "done"
    assert await (await durable.retrieve(task_id)).status() == "SUCCESS"
    followed = (await client.get(f"/api/runs/{task_id}/events", params={"after": -1})).json()
    assert followed["stopped"] is True
    assert followed["rows"][-1]["kind"] == "stop"
    assert "completed" in followed["rows"][-1]["summary"]
    after = await client.post(f"/runs/{task_id}/decide", data=form)
    assert after.status_code == 409, after.text
    assert "nothing changed" in after.text


async def test_an_approval_from_the_inspector_continues_the_run_in_its_workflow(launch: Launch) -> None:
    store, ran, hold = MemoryStore(), list[str](), anyio.Event()
    durable = DurableLoop(refund_loop(store, ran, hold))
    launch()
    with anyio.fail_after(WAIT_S):
        async with browser(store, loop=durable) as client:
            await approve_through(client, durable, "web-wait-1", hold)
    assert ran == ["web-wait-1:1:toolu_refund"]  # once, inside the workflow
    saved = await store.load("web-wait-1")
    assert saved is not None
    assert saved.stop_reason is StopReason.COMPLETED


async def test_an_inspector_with_a_dbos_client_sends_the_decision(launch: Launch, postgres_dsn: str) -> None:
    """The inspector runs no DBOS: `dbos_client=` reaches the workflow, without `--loop`."""
    store, ran, hold = MemoryStore(), list[str](), anyio.Event()
    durable = DurableLoop(refund_loop(store, ran, hold))
    launch()
    client = await anyio.to_thread.run_sync(lambda: DBOSClient(system_database_url=postgres_dsn))
    try:
        with anyio.fail_after(WAIT_S):
            async with browser(store, dbos_client=client) as page:
                assert 'id="read-only"' not in (await page.get("/approvals")).text
                await approve_through(page, durable, "web-wait-2", hold)
    finally:
        await anyio.to_thread.run_sync(client.destroy)
    assert ran == ["web-wait-2:1:toolu_refund"]


def test_a_loop_that_is_no_loop_is_refused() -> None:
    from boundloop import ConfigurationError

    with pytest.raises(ConfigurationError, match="AgentLoop or a DurableLoop"):
        inspector_app(MemoryStore(), loop="myapp:build")  # type: ignore[arg-type]
