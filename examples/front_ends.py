"""A front end's endpoints: a FastAPI app serving one loop to AG-UI and AI SDK clients (docs/front-ends.md).

- `POST /agui`: the AG-UI endpoint (`boundloop.web.agui_app`). Point CopilotKit or the
  official `@ag-ui/client` `HttpAgent` at it: the model's text and thinking as they stream,
  each tool call as it is written and its result, and a refund waiting for a person's approval
  as the run's interrupt (answered by the next run's `resume`).
- `POST /chat/`: the AI SDK's UI message stream (`useChat`; `examples/ai_sdk_chat.py` is a
  chat of its own, with its reconnect and approvals shown).

With `ANTHROPIC_API_KEY` set, runs go to the real API; without it, a `ScriptedClient` answers,
so the app runs offline.

    uvicorn front_ends:app --app-dir examples
    curl -sN localhost:8000/agui -H 'content-type: application/json' -d '{"threadId": "t1",
        "runId": "r1", "messages": [{"id": "m1", "role": "user", "content": "Is O-104 refundable?"}]}'
"""

from __future__ import annotations

import os
from typing import Any

from anthropic import AsyncAnthropic
from fastapi import FastAPI
from starlette.routing import Route

from boundloop import AgentLoop, Budget, CheckpointStore, MemoryStore, Model, ScriptedClient, tool
from boundloop.web import agui_app, chat_app

MODEL = "claude-sonnet-4-6"
ORDERS = {"O-104": {"order_id": "O-104", "total": 189.0, "status": "delivered damaged"}}


@tool
async def read_order(order_id: str) -> dict[str, Any]:
    """Read one order by id."""
    return ORDERS.get(order_id, {"order_id": order_id, "status": "unknown"})


@tool(requires_approval=True)
async def refund(order_id: str, amount: float) -> str:
    """Refund an order: a person approves it first."""
    return f"refunded {amount:.2f} on {order_id}"


def scripted_client() -> ScriptedClient:
    """What the model would answer, for running without an API key: it reads the order, then
    asks to refund it (the run waits for approval), then says so."""
    return ScriptedClient(
        [
            {
                "stop_reason": "tool_use",
                "content": [
                    {"type": "text", "text": "Reading the order."},
                    {"type": "tool_use", "name": "read_order", "input": {"order_id": "O-104"}},
                ],
            },
            {
                "stop_reason": "tool_use",
                "content": [
                    {"type": "tool_use", "name": "refund", "input": {"order_id": "O-104", "amount": 189.0}}
                ],
            },
            {"stop_reason": "end_turn", "content": [{"type": "text", "text": "O-104 is refunded."}]},
        ]
    )


def build_loop(client: Model | None = None, store: CheckpointStore | None = None) -> AgentLoop:
    """The loop the endpoints serve. Its store logs the deltas: a client that reconnects is
    served from the log (a `SQLiteStore(path, log_deltas=True)` or `PostgresStore` outlives
    the process)."""
    if client is None:
        client = AsyncAnthropic() if os.environ.get("ANTHROPIC_API_KEY") else scripted_client()
    return AgentLoop(
        client,
        model=MODEL,
        tools=[read_order, refund],
        budget=Budget(max_steps=6, timeout_s=60),
        system="You handle refund requests.",
        name="front_ends",
        store=MemoryStore(log_deltas=True) if store is None else store,
    )


def create_app(loop: AgentLoop | None = None) -> FastAPI:
    """The app: `loop` (default: `build_loop()`) behind each front end's endpoint."""
    loop = build_loop() if loop is None else loop
    app = FastAPI(title="front ends")
    # A route, not a mount: the endpoint answers at exactly /agui (a mount would redirect to /agui/).
    app.router.routes.append(Route("/agui", agui_app(loop), methods=["POST"]))
    # The AI SDK's UI message stream (docs/front-ends.md, "AI SDK"): useChat's
    # `new DefaultChatTransport({ api: "/chat/" })`; its reconnect is GET /chat/{id}/stream.
    app.mount("/chat", chat_app(loop))
    return app


app = create_app()

if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app, host="127.0.0.1", port=8000)
