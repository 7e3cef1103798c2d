"""Budget pools in a multi-tenant service: each tenant's daily ceiling, and the service's hourly burn rate.

Every question a tenant asks is one run of an agent loop. Two ceilings hold across all of
those runs, in every worker process of the machine (they share one SQLite file):

- `tenant:<name>`: what the tenant may spend a day (UTC), from `TENANTS`;
- `service:burn-rate`: what the whole service may spend an hour, whichever tenants ask.

Each model call reserves its worst case from both before it is sent, and the tighter one
clamps its `max_tokens`; a call neither can cover is never sent: the run stops `cost_budget`,
the pool named, and the service answers 429. Such a run is resumable: once the ceiling is
raised (or tomorrow, for a daily one), `POST /tenants/<name>/questions/<task_id>/resume` goes
on where it stopped. docs/pools.md.

With `ANTHROPIC_API_KEY` set, questions go to the real API (with `Budget(count_tokens=True)`,
so each call's input is counted, not estimated); without it, each question is answered by a
`ScriptedClient`, so the app runs offline.

    uvicorn pool_tenants:app --app-dir examples           # POOLS_DB=pools.db by default
    curl -s localhost:8000/tenants/initech/questions -H 'content-type: application/json' \\
        -d '{"question": "Why is invoice INV-7 higher than last month?"}'
    curl -s localhost:8000/tenants/initech/pools
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
from anthropic import AsyncAnthropic
from fastapi import FastAPI, HTTPException
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from boundloop import (
    AgentLoop,
    Budget,
    BudgetPool,
    LoopResult,
    MemoryStore,
    Model,
    Observers,
    PoolStatus,
    ScriptedClient,
    SQLitePoolStore,
    tool,
)
from boundloop.testing import Request

MODEL = "claude-sonnet-4-6"
TENANTS = {"acme": 5.00, "initech": 0.03}
"""Each tenant's ceiling in dollars a day: the pools are named from this list, never from a request."""
BURN_RATE_USD_PER_HOUR = 2.00


@tool
def read_invoice(invoice_id: str) -> dict[str, Any]:
    """Read one invoice and last month's total."""
    return {"invoice_id": invoice_id, "total": 412.0, "last_month": 298.0, "new_line": "support plan"}


def scripted_client() -> ScriptedClient:
    """What the model would answer, for running without an API key: 400 input tokens a call and
    up to 300 output tokens (never more than the call's `max_tokens`, as the API)."""

    def answer(content: list[dict[str, Any]], stop_reason: str) -> Callable[[Request], dict[str, Any]]:
        def reply(request: Request) -> dict[str, Any]:
            limit = request["max_tokens"]
            assert isinstance(limit, int)
            usage = {"input_tokens": 400, "output_tokens": min(300, limit)}
            return {"stop_reason": stop_reason, "content": content, "usage": usage}

        return reply

    return ScriptedClient(
        [
            answer(
                [{"type": "tool_use", "name": "read_invoice", "input": {"invoice_id": "INV-7"}}], "tool_use"
            ),
            answer([{"type": "text", "text": "INV-7 adds a support plan: $114 more."}], "end_turn"),
        ]
    )


class Question(BaseModel):
    """One question of a tenant."""

    question: str = Field(min_length=1, max_length=2000)


def answer_of(result: LoopResult[str]) -> JSONResponse:
    """The run's outcome; 429 when a pool's ceiling stopped it (the pool named, resumable)."""
    exceeded = result.state.exceeded
    pool = None if exceeded is None else exceeded.pool
    body = {
        "task_id": result.state.task_id,
        "stop_reason": str(result.stop_reason),
        "answer": result.answer,
        "detail": result.state.stop_detail,
        "pool": pool,
        "resumable": result.resumable,
        "cost_usd": result.state.usage.cost_usd,
    }
    return JSONResponse(body, status_code=429 if pool is not None else 200)


def status_of(status: PoolStatus) -> dict[str, Any]:
    return {
        "period": status.period,
        "period_start": None if status.period_start is None else status.period_start.isoformat(),
        "spent_usd": status.spent_usd,
        "reserved_usd": status.reserved_usd,
        "max_cost_usd": status.max_cost_usd,
    }


def create_app(pools_db: str | Path | None = None, make_client: Callable[[], Model] | None = None) -> FastAPI:
    """The app: its pools in the SQLite file `pools_db` (default: `$POOLS_DB`, else `pools.db`)."""
    counted = False  # the real API counts each call's input before it is reserved
    if make_client is None:
        if os.environ.get("ANTHROPIC_API_KEY"):
            shared = AsyncAnthropic()
            counted = True

            def make_client() -> Model:
                return shared
        else:
            make_client = scripted_client
    client_for = make_client
    store = SQLitePoolStore(pools_db or os.environ.get("POOLS_DB", "pools.db"))
    burn_rate = BudgetPool(
        "service:burn-rate", max_cost_usd=BURN_RATE_USD_PER_HOUR, period="hour", store=store
    )
    daily = {
        tenant: BudgetPool(f"tenant:{tenant}", max_cost_usd=usd, period="day", store=store)
        for tenant, usd in TENANTS.items()
    }
    runs = MemoryStore()  # a real service keeps its runs in SQLiteStore or PostgresStore
    app = FastAPI(title="tenants")

    def pool_of(tenant: str) -> BudgetPool:
        if tenant not in daily:
            raise HTTPException(404, f"no tenant {tenant!r}")
        return daily[tenant]

    def loop_for() -> AgentLoop:
        return AgentLoop(
            client_for(),
            model=MODEL,
            tools=[read_invoice],
            budget=Budget(max_steps=6, count_tokens=counted),
            system="You explain invoices to the tenant's staff.",
            name="tenant_questions",
            observers=Observers(metrics=None),
            store=runs,
            pools=[burn_rate],  # every run: the service's hourly burn rate
        )

    @app.post("/tenants/{tenant}/questions")
    async def ask(tenant: str, body: Question) -> JSONResponse:
        pool = pool_of(tenant)
        result = await loop_for().run(body.question, pools=[pool])  # and this tenant's day
        return answer_of(result)

    @app.post("/tenants/{tenant}/questions/{task_id}/resume")
    async def resume(tenant: str, task_id: str) -> JSONResponse:
        result = await loop_for().resume(task_id, pools=[pool_of(tenant)])
        return answer_of(result)

    @app.get("/tenants/{tenant}/pools")
    async def pools(tenant: str) -> dict[str, Any]:
        pool = pool_of(tenant)
        return {"daily": status_of(await pool.status()), "burn_rate": status_of(await burn_rate.status())}

    @app.put("/tenants/{tenant}/daily")
    async def raise_ceiling(tenant: str, max_cost_usd: float) -> dict[str, Any]:
        """Raise (or lower) a tenant's daily ceiling in this process (an admin's call)."""
        pool = pool_of(tenant)
        pool.max_cost_usd = max_cost_usd
        return status_of(await pool.status())

    return app


app = create_app()


async def main() -> int:
    """Offline: initech asks three times; its third question stops at its daily ceiling, and
    goes on once the ceiling is raised. acme is not affected."""
    with tempfile.TemporaryDirectory() as folder:
        service = create_app(Path(folder) / "pools.db", make_client=scripted_client)
        transport = httpx.ASGITransport(app=service)
        async with httpx.AsyncClient(transport=transport, base_url="http://tenants") as client:
            question = {"question": "Why is invoice INV-7 higher than last month?"}
            stopped: dict[str, Any] = {}
            for number in (1, 2, 3):
                reply = (await client.post("/tenants/initech/questions", json=question)).json()
                print(f"initech #{number}: stop reason: {reply['stop_reason']} (pool: {reply['pool']})")
                stopped = reply
            print(f"detail: {stopped['detail']}")
            print(f"resumable: {stopped['resumable']}")
            spent = (await client.get("/tenants/initech/pools")).json()["daily"]
            print(f"initech today: spent ${spent['spent_usd']:.4f} of ${spent['max_cost_usd']:.2f}")
            await client.put("/tenants/initech/daily", params={"max_cost_usd": 0.10})
            resumed = (await client.post(f"/tenants/initech/questions/{stopped['task_id']}/resume")).json()
            print(f"initech resumed: stop reason: {resumed['stop_reason']}")
            acme = (await client.post("/tenants/acme/questions", json=question)).json()
            print(f"acme: stop reason: {acme['stop_reason']}")
            burn = (await client.get("/tenants/acme/pools")).json()["burn_rate"]
            print(f"the service this hour: spent ${burn['spent_usd']:.4f} of ${burn['max_cost_usd']:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(anyio.run(main))
