"""`SimulatedClient`: a simulated model behind the real `anthropic.AsyncAnthropic`, needing no key.

The client is the SDK's own, over an HTTP transport that never leaves the process: each
`POST /v1/messages` is answered with a Messages API response the simulated model generates
(as JSON, or as the API's server-sent events when the request streams), so everything the
SDK does with a response (parsing, errors, streaming) is what it does with the API's.

The model reads each request as a state: the goal (the first user message's text) and the
outcome of every tool call so far (`start > read_order:ok > read_delivery_status:error`). In
each state it draws one of a few weighted moves, like a diligent but imperfect agent:

- call the next tool it was given and has not read yet (most likely), or several of them at once;
- after an error, call the failed tool again, or give up and answer;
- answer (more likely the more of its tools it has read, certain once it has read them all);
- now and then, call a tool it was not given (the loop refuses it).

Tool inputs are generated from each tool's input schema: an id-like string parameter
(`order_id`) takes an id such as `O-104` from the goal or the tool results so far, preferring
one whose letter matches the parameter's initial; enums take their first value. A structured
answer (`output_config.format`) is a JSON object generated from its schema.

Determinism: the n-th request in a given (goal, state) draws from a random generator seeded
by (seed, goal, state, n). Trials of one case are indistinguishable to the model, so which
trial gets which draw may vary with scheduling, but the set of paths the trials take, and
every rate computed from them, does not.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Final, cast, final

import anthropic
import httpx2

__all__ = ["SimulatedClient"]

JSON = dict[str, Any]

BASE_URL: Final = "http://simulated-anthropic.invalid"
"""Where the simulated client sends its requests (its transport answers them; nothing resolves it)."""
_ID: Final = re.compile(r"\b[A-Z]{1,4}-\d+\b")
"""An id in the goal or a tool result: `O-104`, `C-2291`."""


@final
class SimulatedClient(anthropic.AsyncAnthropic):
    """The real `AsyncAnthropic`, answered by a seeded simulated model instead of the API.

    For trying the loop, evals and live paths offline: `AgentLoop(SimulatedClient(seed=0), ...)`,
    `boundloop eval --live --model sim`, `boundloop demo --live --model sim`. Its trajectories
    vary (some runs complete, some stop early, some read a tool again after an error) but are
    reproducible: the same seed and the same requests give the same moves.

    Every request body is recorded in `requests` and its state in `states` (in arrival order).

    Args:
        seed: the seed of every draw.
    """

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.requests: list[JSON] = []
        """Every request body received, in order."""
        self.states: list[str] = []
        """The state each request was read as (`start > read_order:ok`), in order."""
        self._visits: dict[tuple[str, str], int] = {}
        self._lock = threading.Lock()
        super().__init__(
            api_key="sk-ant-simulated",
            base_url=BASE_URL,
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self._answer)),
        )

    def respond(self, body: Mapping[str, Any]) -> JSON:
        """The simulated model's response to one Messages API request body.

        Args:
            body: the request body (`model`, `messages`, `tools`, ...).

        Returns:
            The response, as the API's JSON.
        """
        goal, state, steps = read_state(body)
        with self._lock:
            self.requests.append(dict(body))
            self.states.append(state)
            visit = self._visits.get((goal, state), 0)
            self._visits[(goal, state)] = visit + 1
        key = f"{self.seed}|{goal}|{state}|{visit}"
        draw = random.Random(key)
        tools = _tools(body)
        text = _transcript_text(body)
        moves = _moves(tools, steps)
        weights = [weight for weight, _ in moves]
        kind, names = draw.choices([move for _, move in moves], weights=weights)[0]
        tag = hashlib.sha256(key.encode()).hexdigest()[:16]
        content: list[JSON] = []
        if kind == "answer":
            content.append({"type": "text", "text": _answer(body, goal, steps)})
        else:
            content.append({"type": "text", "text": _preamble(kind, names)})
            schemas = {name: schema for name, schema in tools}
            content += [
                {
                    "type": "tool_use",
                    "id": f"toolu_{tag}{position:02d}",
                    "name": name,
                    "input": _value(schemas.get(name, {"type": "object"}), "", text),
                }
                for position, name in enumerate(names)
            ]
        output_tokens = 12 + sum(len(json.dumps(block)) for block in content) // 4
        return {
            "id": f"msg_{tag}",
            "type": "message",
            "role": "assistant",
            "model": str(body.get("model", "sim")),
            "content": content,
            "stop_reason": "end_turn" if kind == "answer" else "tool_use",
            "stop_sequence": None,
            "usage": {"input_tokens": len(json.dumps(body)) // 4, "output_tokens": output_tokens},
        }

    async def _answer(self, request: httpx2.Request) -> httpx2.Response:
        if request.method != "POST" or request.url.path != "/v1/messages":
            error = {"type": "not_found_error", "message": "the simulated model serves /v1/messages only"}
            return httpx2.Response(404, json={"type": "error", "error": error})
        body = cast(JSON, json.loads(request.content))
        message = self.respond(body)
        headers = {"request-id": f"req_{message['id'][4:]}"}
        if not body.get("stream"):
            return httpx2.Response(200, json=message, headers=headers)
        return httpx2.Response(
            200,
            content="".join(_sse(message)).encode(),
            headers={**headers, "content-type": "text/event-stream"},
        )


def read_state(body: Mapping[str, Any]) -> tuple[str, str, list[tuple[str, bool]]]:
    """(goal, state, steps) of a request: the first user message's text, the state as
    `start > tool:ok > tool:error`, and the steps as (tool name, succeeded)."""
    messages = cast(list[JSON], body.get("messages") or [])
    goal = _text(messages[0]["content"]) if messages else ""
    names: dict[str, str] = {}
    steps: list[tuple[str, bool]] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            continue
        for block in cast(list[JSON], content or []):
            if block.get("type") == "tool_use":
                names[str(block.get("id"))] = str(block.get("name"))
            elif block.get("type") == "tool_result":
                steps.append((names.get(str(block.get("tool_use_id")), "?"), not block.get("is_error")))
    state = " > ".join(["start", *(f"{name}:{'ok' if ok else 'error'}" for name, ok in steps)])
    return goal, state, steps


Move = tuple[str, tuple[str, ...]]
"""A move: its kind (`call`, `batch`, `retry`, `stray`, `answer`) and the tools it calls."""


def _moves(tools: Sequence[tuple[str, JSON]], steps: Sequence[tuple[str, bool]]) -> list[tuple[float, Move]]:
    """The weighted moves in a state."""
    offered = [name for name, _ in tools]
    read = {name for name, ok in steps if ok}
    unread = [name for name in offered if name not in read]
    if not unread:
        return [(1.0, ("answer", ()))]
    moves: list[tuple[float, Move]] = []
    last = steps[-1] if steps else None
    if last is not None and not last[1] and last[0] in offered:  # an error: again, or give up
        moves += [(6.0, ("retry", (last[0],))), (2.0, ("answer", ()))]
        others = [name for name in unread if name != last[0]]
        if others:
            moves.append((1.0, ("call", (others[0],))))
        return moves
    moves.append((6.0, ("call", (unread[0],))))
    if len(unread) > 1:
        moves.append((3.0, ("batch", tuple(unread[:3]))))
    moves.append((0.5 + 3.0 * len(read) / len(offered), ("answer", ())))
    if not steps and offered:
        moves.append((0.5, ("stray", (f"{offered[0]}_v2",))))
    return moves


def _preamble(kind: str, names: Sequence[str]) -> str:
    listed = " and ".join(names)
    if kind == "retry":
        return f"{listed} failed; trying it again."
    return f"Calling {listed}."


def _answer(body: Mapping[str, Any], goal: str, steps: Sequence[tuple[str, bool]]) -> str:
    """The final answer: the structured output's JSON when one is asked for, else a sentence."""
    output = cast(JSON, body.get("output_config") or {}).get("format")
    if isinstance(output, Mapping) and isinstance(schema := cast(JSON, output).get("schema"), Mapping):
        return json.dumps(_value(cast(JSON, schema), "", _transcript_text(body)))
    read = sorted({name for name, ok in steps if ok})
    if not read:
        return f"Without reading anything: my best guess on '{goal}' is that it is in order."
    failed = sorted({name for name, ok in steps if not ok} - set(read))
    answer = f"Having read {', '.join(read)}: the evidence settles '{goal}'."
    return answer + (f" ({', '.join(failed)} failed.)" if failed else "")


def _value(schema: Mapping[str, Any], name: str, text: str) -> Any:
    """A value valid for a JSON schema (the common keywords), named `name` in its object."""
    for fixed in ("const", "default"):
        if fixed in schema:
            return schema[fixed]
    for choices in ("enum", "anyOf", "oneOf"):
        if choices in schema:
            first = cast(list[Any], schema[choices])[0]
            return first if choices == "enum" else _value(cast(JSON, first), name, text)
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in cast(list[str], kind) if k != "null"), "null")
    if kind == "object":
        properties = cast(JSON, schema.get("properties") or {})
        return {key: _value(cast(JSON, sub), key, text) for key, sub in properties.items()}
    if kind == "array":
        return [_value(cast(JSON, schema.get("items") or {}), name, text)] * int(schema.get("minItems", 1))
    return _SCALARS[kind](schema) if kind in _SCALARS else _string(name, text)


_SCALARS: Final[dict[str, Callable[[Mapping[str, Any]], Any]]] = {
    "boolean": lambda _: True,
    "integer": lambda schema: int(schema.get("minimum", 1)),
    "number": lambda schema: float(schema.get("minimum", 1.0)),
    "null": lambda _: None,
}
"""A value of each scalar type, from its schema (a string is `_string`'s)."""


def _string(name: str, text: str) -> str:
    """A string for a parameter: an id from the transcript for an id, else a short phrase."""
    ids = list(dict.fromkeys(_ID.findall(text)))
    if name.endswith("id") and ids:
        initial = name[0].upper()
        return str(next((found for found in ids if found.startswith(initial)), ids[0]))
    return f"the {name.replace('_', ' ')}" if name else "simulated"


def _tools(body: Mapping[str, Any]) -> list[tuple[str, JSON]]:
    """(name, input schema) of each client tool offered (server tools have no input schema)."""
    tools = cast(list[JSON], body.get("tools") or [])
    return [
        (str(tool["name"]), cast(JSON, tool.get("input_schema") or {}))
        for tool in tools
        if "name" in tool and "input_schema" in tool
    ]


def _transcript_text(body: Mapping[str, Any]) -> str:
    """Every text of the transcript (goal, tool results) in order, where ids are found."""
    return json.dumps(body.get("messages") or [])


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    blocks = cast(list[JSON], content or [])
    return " ".join(str(block.get("text", "")) for block in blocks if block.get("type") == "text")


def _sse(message: JSON) -> Iterator[str]:
    """The API's server-sent events for `message` (what a streamed request receives)."""
    from anthropic.types import Message

    from .scripted_stream import raw_events

    for event in raw_events(Message.model_validate(message)):
        yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
