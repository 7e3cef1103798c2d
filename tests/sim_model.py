"""A simulated model behind the real `anthropic.AsyncAnthropic`: a seeded policy of next moves.

The fake Messages API of tests/fake_api.py answers from a queue; a live eval case needs a
model that *decides*: the same case run N times should take different paths with known odds.
`SimulatedModel(policy, seed=...)` reads each request as a state (the goal and the outcome of
every tool call so far, e.g. `start > shipping__read_delivery_status:error`) and answers with a
move drawn from the policy's weighted moves for that state.

Determinism under concurrency: the n-th request that arrives in a given state draws with a
random generator seeded by (seed, goal, state, n). Trials in one state are indistinguishable
to the API, so which trial gets which draw may vary with scheduling, but the set of paths the
trials take, and every rate computed from them, does not.

It is served two ways, neither touching the network: `client()` is an `AsyncAnthropic` over an
`httpx2.MockTransport`; `serve()` starts a `ThreadingHTTPServer` on 127.0.0.1 for code that
builds its own client (the CLI's `--live`, through `ANTHROPIC_BASE_URL`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import random
import threading
from collections.abc import Awaitable, Callable, Generator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anthropic
import httpx2

from boundloop._base.simulated import read_state

JSON = dict[str, Any]


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Move:
    """One possible response: some text and tool calls (none: a final answer), with its weight."""

    weight: float = 1.0
    text: str | None = None
    calls: tuple[tuple[str, JSON], ...] = ()
    """(tool name as the API sees it, input) of each tool_use block."""
    input_tokens: int = 100
    output_tokens: int = 20


def call(name: str, **tool_input: Any) -> tuple[str, JSON]:
    """A tool call of a `Move`."""
    return name, tool_input


Policy = Mapping[str, Sequence[Move]] | Callable[[str, str], Sequence[Move]]
"""State -> weighted moves (a `"*"` entry for any other state), or (goal, state) -> moves."""


def state_of(body: JSON) -> tuple[str, str]:
    """(goal, state) of a request, as `boundloop.testing.SimulatedClient` reads it: the first user
    message's text, and `start > tool:ok|error ...`."""
    goal, state, _ = read_state(body)
    return goal, state


class SimulatedModel:
    """A seeded policy answering Messages API requests (thread-safe: it may be served by threads).

    Args:
        policy: the weighted moves in each state.
        seed: the seed of every draw.
        gate: awaited before each answer on the mock transport (the test's hand on timing:
            events and barriers, never sleeps).
    """

    def __init__(
        self, policy: Policy, *, seed: int = 0, gate: Callable[[], Awaitable[None]] | None = None
    ) -> None:
        self.policy = policy
        self.seed = seed
        self.gate = gate
        self.requests: list[JSON] = []
        self.states: list[str] = []
        self._visits: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()

    def moves(self, goal: str, state: str) -> Sequence[Move]:
        """The policy's moves in this state."""
        if callable(self.policy):
            return self.policy(goal, state)
        return self.policy.get(state) or self.policy["*"]

    def respond(self, body: JSON) -> JSON:
        """The response to one request."""
        goal, state = state_of(body)
        with self._lock:
            self.requests.append(body)
            self.states.append(state)
            visit = self._visits.get((goal, state), 0)
            self._visits[(goal, state)] = visit + 1
        draw = random.Random(f"{self.seed}|{goal}|{state}|{visit}")
        options = list(self.moves(goal, state))
        move = draw.choices(options, weights=[option.weight for option in options])[0]
        tag = hashlib.sha256(f"{self.seed}|{goal}|{state}|{visit}".encode()).hexdigest()[:16]
        content: list[JSON] = []
        if move.text is not None:
            content.append({"type": "text", "text": move.text})
        content += [
            {"type": "tool_use", "id": f"toolu_{tag}{position:02d}", "name": name, "input": tool_input}
            for position, (name, tool_input) in enumerate(move.calls)
        ]
        return {
            "id": f"msg_{tag}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": "tool_use" if move.calls else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": move.input_tokens, "output_tokens": move.output_tokens},
        }

    async def _answer(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "POST" or request.url.path != "/v1/messages":
            return httpx2.Response(404, json={"type": "error", "error": {"type": "not_found_error"}})
        if self.gate is not None:
            await self.gate()
        return httpx2.Response(
            200, json=self.respond(json.loads(request.content)), headers={"request-id": "req_sim"}
        )

    def client(self) -> anthropic.AsyncAnthropic:
        """The real SDK client over a mock transport answering from this model (no network)."""
        return anthropic.AsyncAnthropic(
            api_key="sk-ant-simulated",
            base_url="http://simulated-anthropic.invalid",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self._answer)),
        )

    @contextmanager
    def serve(self) -> Generator[str]:
        """Serve the model over HTTP on 127.0.0.1 (a free port) while in the block; yields its URL."""
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if self.path.split("?")[0] != "/v1/messages":
                    self.send_error(404)
                    return
                payload = json.dumps(model.respond(body)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.send_header("request-id", "req_sim")
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: no line per request on stderr."""

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.server_address[1]}"
        finally:
            server.shutdown()
            server.server_close()
            thread.join()


SHIPPING = "shipping__read_delivery_status"


def shipping_policy(
    *, guess: float = 0.0, invent: float = 0.0, give_up: float = 0.0
) -> dict[str, list[Move]]:
    """A policy for the seed's shipping case: read the delivery status, and again after an error.

    Args:
        guess: weight of answering without reading (a completion the case does not expect).
        invent: weight of calling a tool that does not exist first (`refunds__lookup`).
        give_up: weight of answering after the first error instead of retrying.
    """
    read = Move(text="Checking the delivery status.", calls=(call(SHIPPING, order_id="O-7"),))
    answer = Move(text="The order arrived on time.", output_tokens=30)
    start = [Move(weight=1.0, text=read.text, calls=read.calls)]
    if guess:
        start.append(dataclasses.replace(answer, weight=guess))
    if invent:
        start.append(
            Move(weight=invent, text="Looking up refunds.", calls=(call("refunds__lookup", order_id="O-7"),))
        )
    after_error = [dataclasses.replace(read, weight=1.0)]
    if give_up:
        after_error.append(dataclasses.replace(answer, weight=give_up, text="I could not tell."))
    return {
        "start": start,
        f"start > {SHIPPING}:error": after_error,
        "start > refunds__lookup:error": [read],
        f"start > refunds__lookup:error > {SHIPPING}:error": [read],
        "*": [answer],
    }
