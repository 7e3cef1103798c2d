"""What every workload shares: tools, scripts of pre-parsed responses, zero-latency clients, floors.

The floors are the smallest loops that do the job by hand: call the model, append its answer,
route on `stop_reason`, run the batch's tool calls concurrently and answer them in one user
message. One runs the batch with `asyncio.gather`, the other with an anyio task group (what
boundloop itself must use to run on asyncio and trio alike). Both call the very functions the
boundloop tools wrap, through whatever client they are given.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import anyio
from anthropic.types import (
    Message,
    MessageParam,
    TextBlock,
    ToolResultBlockParam,
    ToolUnionParam,
    ToolUseBlock,
)
from prometheus_client import CollectorRegistry

from boundloop import AgentLoop, Budget, LoopMetrics, LoopResult, Observers, Tool, tool
from boundloop.model import Model
from boundloop.testing import parse_message

MODEL: Final = "claude-sonnet-4-6"
MAX_TOKENS: Final = 1024
MAX_TOOLS: Final = 5

Handler = Callable[..., Awaitable[str]]


async def instant(key: str) -> str:
    """An instant async tool: returns its argument."""
    return key


async def sleepy(key: str) -> str:
    """A tool that waits 50 ms (`anyio.sleep`), then returns its argument."""
    await anyio.sleep(0.05)
    return key


def tools_of(handler: Handler, count: int = MAX_TOOLS) -> list[Tool]:
    """`count` boundloop tools, `lookup_0` ..., all wrapping `handler`."""
    return [
        tool(name=f"lookup_{index}", description=f"Look up a key (tool {index}).")(handler)
        for index in range(count)
    ]


def handlers_of(handler: Handler, count: int = MAX_TOOLS) -> dict[str, Handler]:
    """What the floors call: the same function under each tool name."""
    return {f"lookup_{index}": handler for index in range(count)}


def tool_use_id(run: int, turn: int, index: int) -> str:
    """An id of the API's shape (`toolu_01...`): the loop records those as they are."""
    return f"toolu_01{run:08d}T{turn:04d}C{index:02d}"


def raw_script(turns: int, tools: int, *, run: int = 0) -> list[dict[str, Any]]:
    """Messages API response bodies: `turns` turns of `tools` calls each, then a final answer."""
    bodies: list[dict[str, Any]] = [
        {
            "id": f"msg_01{run:08d}T{turn:04d}",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "content": [
                {
                    "type": "tool_use",
                    "id": tool_use_id(run, turn, index),
                    "name": f"lookup_{index}",
                    "input": {"key": f"r{run}-t{turn}-c{index}"},
                }
                for index in range(tools)
            ],
            "usage": {"input_tokens": 100, "output_tokens": 20},
        }
        for turn in range(turns)
    ]
    bodies.append(
        {
            "id": f"msg_01{run:08d}T{turns:04d}",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "content": [{"type": "text", "text": "done"}],
            "usage": {"input_tokens": 100, "output_tokens": 5},
        }
    )
    return bodies


def script(turns: int, tools: int) -> list[Message]:
    """`raw_script` validated into `Message`s, before any clock starts."""
    return [parse_message(body) for body in raw_script(turns, tools)]


def script_for_run(template: Sequence[Message], run: int) -> list[Message]:
    """The template's responses as run `run`'s own objects, with its own message and tool_use ids."""
    copies: list[Message] = []
    for turn, message in enumerate(template):
        content = [
            block.model_copy(update={"id": tool_use_id(run, turn, index)})
            if isinstance(block, ToolUseBlock)
            else block
            for index, block in enumerate(message.content)
        ]
        copies.append(message.model_copy(update={"id": f"msg_01{run:08d}T{turn:04d}", "content": content}))
    return copies


def body_bytes(bodies: Sequence[Mapping[str, Any]]) -> list[bytes]:
    """Response bodies encoded once, for the SDK path's transport."""
    return [json.dumps(body).encode() for body in bodies]


class _Messages:
    def __init__(self, create: Callable[..., Awaitable[Message]]) -> None:
        self._create = create

    @property
    def create(self) -> Callable[..., Awaitable[Message]]:
        return self._create


class FastClient:
    """A zero-latency model serving pre-parsed responses in order (no request recording)."""

    def __init__(self, responses: Sequence[Message]) -> None:
        self._responses = responses
        self._next = 0
        self.messages = _Messages(self._serve)

    def reset(self) -> None:
        """Serve the script again from the start."""
        self._next = 0

    async def _serve(self, **request: Any) -> Message:
        response = self._responses[self._next]
        self._next += 1
        return response


class KeyedClient:
    """A zero-latency model shared by many concurrent runs, each served its own script.

    The run is told by its goal (the first user message), its turn by the transcript's length
    (one assistant and one user message per turn): the client keeps no position of its own.
    With `fresh`, each response is parsed from its JSON when it is served, as a client parses
    what the API sends: a run that keeps its responses keeps objects of its own, which a memory
    figure then counts (without: the script's objects, made before any measurement).
    """

    def __init__(self, scripts: Mapping[str, Sequence[Message]], *, fresh: bool = False) -> None:
        self._scripts = scripts
        self._bodies = (
            {
                goal: [message.model_dump(mode="json") for message in script]
                for goal, script in scripts.items()
            }
            if fresh
            else None
        )
        self.messages = _Messages(self._serve)

    async def _serve(self, **request: Any) -> Message:
        messages: Sequence[MessageParam] = request["messages"]
        goal = messages[0]["content"]
        assert isinstance(goal, str)
        if self._bodies is not None:
            return parse_message(self._bodies[goal][len(messages) // 2])
        return self._scripts[goal][len(messages) // 2]


def boundloop(client: Model, tools: Sequence[Tool], *, steps: int, metrics: bool) -> AgentLoop:
    """An AgentLoop as an application builds it once: trace on, metrics on a fresh registry or off."""
    return AgentLoop(
        client,
        model=MODEL,
        tools=tools,
        budget=Budget(max_steps=steps),
        max_tokens=MAX_TOKENS,
        name="bench",
        observers=Observers(metrics=LoopMetrics(registry=CollectorRegistry()) if metrics else None),
    )


async def run_boundloop(loop: AgentLoop, goal: str) -> LoopResult:
    """One run that must complete with the scripted answer."""
    result = await loop.run(goal)
    assert result.answer == "done", (result.stop_reason, result.state.errors)
    return result


Batch = Callable[[Mapping[str, Handler], list[ToolUseBlock]], Awaitable[list[ToolResultBlockParam]]]


async def _answer(handlers: Mapping[str, Handler], block: ToolUseBlock) -> ToolResultBlockParam:
    result = await handlers[block.name](**block.input)
    return {"type": "tool_result", "tool_use_id": block.id, "content": result}


async def batch_gather(
    handlers: Mapping[str, Handler], blocks: list[ToolUseBlock]
) -> list[ToolResultBlockParam]:
    """All calls of a response with `asyncio.gather`."""
    return list(await asyncio.gather(*(_answer(handlers, block) for block in blocks)))


async def batch_anyio(
    handlers: Mapping[str, Handler], blocks: list[ToolUseBlock]
) -> list[ToolResultBlockParam]:
    """All calls of a response in one anyio task group, results in block order."""
    results: list[ToolResultBlockParam | None] = [None] * len(blocks)

    async def answer_into(index: int, block: ToolUseBlock) -> None:
        results[index] = await _answer(handlers, block)

    async with anyio.create_task_group() as group:
        for index, block in enumerate(blocks):
            group.start_soon(answer_into, index, block)
    return [result for result in results if result is not None]


FLOORS: Final[dict[str, Batch]] = {"gather": batch_gather, "anyio": batch_anyio}
"""The two floors, by the short name the tables use."""


async def run_floor(
    batch: Batch,
    client: Model,
    handlers: Mapping[str, Handler],
    goal: str,
    *,
    tools: Sequence[ToolUnionParam] | None = None,
    dump: bool = False,
) -> list[MessageParam]:
    """The hand-written loop: one run to the final answer; returns the transcript it kept.

    The model's content blocks go into the transcript as they are (the SDK's objects, which the
    SDK turns back into JSON on every later request), or with `dump` as dicts, dumped once.
    """
    messages: list[MessageParam] = [{"role": "user", "content": goal}]
    extra: dict[str, Any] = {} if tools is None else {"tools": tools}
    while True:
        response = await client.messages.create(
            model=MODEL, max_tokens=MAX_TOKENS, messages=messages, **extra
        )
        content: Any = [block.model_dump(exclude_none=True) for block in response.content] if dump else None
        messages.append({"role": "assistant", "content": content or response.content})
        if response.stop_reason != "tool_use":
            answer = "".join(block.text for block in response.content if isinstance(block, TextBlock))
            assert answer == "done", answer
            return messages
        blocks = [block for block in response.content if isinstance(block, ToolUseBlock)]
        messages.append({"role": "user", "content": await batch(handlers, blocks)})
