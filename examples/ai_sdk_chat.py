"""A chat for the Vercel AI SDK's `useChat`: a FastAPI app serving boundloop's UI message stream at /chat.

- `POST /chat/` takes `useChat`'s body and answers the run as the AI SDK's UI message stream:
  the model's text and reasoning as they stream, each tool call as the model writes its input,
  the tool's output, and the finish. The chat's n-th message runs the task `CHAT_ID/n`.
- A refund waits for a person: the page shows the call (`approval-requested`), the person
  approves or denies it (`addToolApprovalResponse`), `useChat` sends the decision back, and the
  run goes on where it stopped.
- The person pressing Stop hangs up: the run stops `cancelled`, its checkpoint written.
- `GET /chat/{chat_id}/stream` is the AI SDK's reconnect: a run in progress, replayed from the
  store's event log.

docs/front-ends.md has the React page. With `ANTHROPIC_API_KEY` set, the loop calls the API;
without it, `SimulatedClient(seed=0)` answers offline.

    uvicorn ai_sdk_chat:app --app-dir examples
    curl -sN localhost:8000/chat/ -H 'content-type: application/json' -d '{"id": "chat-1",
      "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Refund O-104"}]}]}'
"""

from __future__ import annotations

import os
from typing import Any

from anthropic import AsyncAnthropic
from fastapi import FastAPI

from boundloop import AgentLoop, Budget, CheckpointStore, MemoryStore, Model, ToolContext, tool
from boundloop.testing import SimulatedClient
from boundloop.web import chat_app

MODEL = "claude-sonnet-4-6"
ORDERS = {
    "O-104": {"order_id": "O-104", "total": 189.0, "refund_reason": "boots arrived damaged"},
    "O-777": {"order_id": "O-777", "total": 54.0, "refund_reason": "parcel never arrived"},
}


@tool
async def read_order(order_id: str) -> dict[str, Any]:
    """Read an order: its total and why the customer asks for a refund."""
    return ORDERS.get(order_id, {"order_id": order_id, "error": "no such order"})


@tool(side_effect=True, requires_approval=True)
async def issue_refund(order_id: str, amount: float, ctx: ToolContext) -> str:
    """Refund an order; a person approves every refund."""
    return f"refunded {amount:.2f} for {order_id} (key {ctx.idempotency_key})"


def create_app(client: Model | None = None, store: CheckpointStore | None = None) -> FastAPI:
    """The app: the chat at /chat.

    Args:
        client: the model client (default: `AsyncAnthropic()` with `ANTHROPIC_API_KEY` set,
            else `SimulatedClient(seed=0)`).
        store: where runs and their event log live (default: `MemoryStore(log_deltas=True)`; a
            `SQLiteStore(path, log_deltas=True)` or `PostgresStore` keeps them across restarts).
    """
    if client is None:
        client = AsyncAnthropic() if os.environ.get("ANTHROPIC_API_KEY") else SimulatedClient(seed=0)
    loop = AgentLoop(
        client,
        model=MODEL,
        system="You help with refunds. Read the order before refunding it.",
        tools=[read_order, issue_refund],
        budget=Budget(max_steps=8, timeout_s=120),
        store=store if store is not None else MemoryStore(log_deltas=True),
    )
    app = FastAPI(title="refund chat")
    app.mount("/chat", chat_app(loop))  # useChat: new DefaultChatTransport({ api: "/chat/" })
    return app


app = create_app()
