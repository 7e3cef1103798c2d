"""One peer framework on the per-turn workload, run inside benchmarks/.peers-venv by `peers.py`.

Usage (done by `peers.py`)::

    benchmarks/.peers-venv/bin/python benchmarks/_peers_worker.py FRAMEWORK --turns 50 --repeat 20

Prints one JSON object: the framework's version and, per variant, CPU and wall µs per turn
(median, min, max) — the framework and the hand-written `asyncio.gather` floor measured
interleaved in this process. Nothing here imports boundloop: the peers' venv does not have it.

Frameworks, each on a zero-latency model that serves a pre-built script (`turns` responses of
3 instant tool calls, then the answer "done"):

- `anthropic-tool-runner`: `client.beta.messages.tool_runner(...)` over the real
  `AsyncAnthropic` and an in-process `httpx2.MockTransport` (its model seam is the HTTP
  client), so its floor is the hand-written loop driven through the same kind of client.
- `pydantic-ai`: `Agent` on a `FunctionModel` serving pre-built `ModelResponse`s.
- `langgraph`: `create_react_agent` on a `BaseChatModel` serving pre-built `AIMessage`s.
- `openai-agents`: `Runner.run` on a `Model` serving pre-built `ModelResponse`s.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import warnings
from collections.abc import Awaitable, Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any, Final

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._harness import Runner, compare, settle

TOOLS: Final = 3
NAMES: Final = tuple(f"lookup_{index}" for index in range(TOOLS))
MODEL: Final = "claude-sonnet-4-6"


async def instant(key: str) -> str:
    """Look up a key: an instant async tool."""
    return key


def call_id(turn: int, index: int) -> str:
    """A tool call id of the Anthropic API's shape."""
    return f"toolu_01{turn:08d}C{index:02d}"


def key(turn: int, index: int) -> str:
    """A different argument on every call, as in the suite."""
    return f"t{turn}-c{index}"


def bodies(turns: int) -> list[dict[str, Any]]:
    """Messages API response bodies: `turns` turns of 3 calls, then "done"."""
    out: list[dict[str, Any]] = [
        {
            "id": f"msg_01{turn:08d}",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "content": [
                {
                    "type": "tool_use",
                    "id": call_id(turn, index),
                    "name": name,
                    "input": {"key": key(turn, index)},
                }
                for index, name in enumerate(NAMES)
            ],
            "usage": {"input_tokens": 100, "output_tokens": 20},
        }
        for turn in range(turns)
    ]
    out.append(
        {
            "id": f"msg_01{turns:08d}",
            "type": "message",
            "role": "assistant",
            "model": MODEL,
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "content": [{"type": "text", "text": "done"}],
            "usage": {"input_tokens": 100, "output_tokens": 5},
        }
    )
    return out


# -- the floor, as in the suite --------------------------------------------------------------


async def floor_loop(create: Callable[..., Awaitable[Any]], params: Sequence[Any] | None = None) -> str:
    """The hand-written loop with `asyncio.gather`: call, append, route, run the batch, answer."""
    from anthropic.types import TextBlock, ToolResultBlockParam, ToolUseBlock

    handler: Callable[..., Awaitable[str]] = instant

    async def answer(block: ToolUseBlock) -> ToolResultBlockParam:
        return {"type": "tool_result", "tool_use_id": block.id, "content": await handler(**block.input)}

    messages: list[Any] = [{"role": "user", "content": "go"}]
    extra: dict[str, Any] = {} if params is None else {"tools": params}
    while True:
        response = await create(model=MODEL, max_tokens=1024, messages=messages, **extra)
        messages.append({"role": "assistant", "content": response.content})
        if response.stop_reason != "tool_use":
            return "".join(block.text for block in response.content if isinstance(block, TextBlock))
        blocks = [block for block in response.content if isinstance(block, ToolUseBlock)]
        messages.append({"role": "user", "content": list(await asyncio.gather(*map(answer, blocks)))})


class Counter:
    """The position in a script, reset before every run."""

    def __init__(self) -> None:
        self.next = 0

    def take(self) -> int:
        """The next position."""
        self.next += 1
        return self.next - 1


def zero_latency_floor(turns: int) -> Runner:
    """The floor on pre-parsed `Message`s, like the suite's per-turn floor."""
    from anthropic.types import Message

    script = [Message.model_validate(body) for body in bodies(turns)]
    counter = Counter()

    async def create(**request: Any) -> Message:
        return script[counter.take()]

    async def run() -> object:
        counter.next = 0
        return await floor_loop(create)

    return run


# -- Anthropic SDK tool runner (SDK path) ------------------------------------------------------


def sdk_client(turns: int) -> tuple[Any, Counter]:
    """A real `AsyncAnthropic` whose transport answers with the script's bodies, in order."""
    import anthropic
    import httpx2

    encoded = [json.dumps(body).encode() for body in bodies(turns)]
    counter = Counter()

    async def handler(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(
            200, content=encoded[counter.take()], headers={"content-type": "application/json"}
        )

    client = anthropic.AsyncAnthropic(
        api_key="test", max_retries=0, http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(handler))
    )
    return client, counter


def anthropic_tool_runner(turns: int) -> dict[str, Runner]:
    """The SDK's beta tool runner, and the hand-written floor through the same kind of client."""
    from anthropic import beta_async_tool

    tools = [beta_async_tool(instant, name=name) for name in NAMES]
    params = [tool.to_dict() for tool in tools]
    floor_client, floor_counter = sdk_client(turns)
    runner_client, runner_counter = sdk_client(turns)

    async def floor() -> object:
        floor_counter.next = 0
        return await floor_loop(floor_client.messages.create, params)

    async def peer() -> object:
        runner_counter.next = 0
        runner = runner_client.beta.messages.tool_runner(
            model=MODEL,
            max_tokens=1024,
            tools=tools,
            messages=[{"role": "user", "content": "go"}],
            max_iterations=turns + 5,
        )
        final = await runner.until_done()
        answer = "".join(block.text for block in final.content if block.type == "text")
        assert answer == "done", answer
        return answer

    return {"floor": floor, "peer": peer}


# -- PydanticAI ------------------------------------------------------------------------------


def pydantic_ai(turns: int) -> dict[str, Runner]:
    """`Agent.run` on a `FunctionModel` serving pre-built responses."""
    from pydantic_ai import Agent, Tool  # type: ignore[import-not-found]
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart  # type: ignore[import-not-found]
    from pydantic_ai.models.function import FunctionModel  # type: ignore[import-not-found]
    from pydantic_ai.usage import UsageLimits  # type: ignore[import-not-found]

    script = [
        ModelResponse(
            parts=[
                ToolCallPart(
                    tool_name=name, args={"key": key(turn, index)}, tool_call_id=call_id(turn, index)
                )
                for index, name in enumerate(NAMES)
            ]
        )
        for turn in range(turns)
    ]
    script.append(ModelResponse(parts=[TextPart(content="done")]))
    counter = Counter()

    def respond(messages: object, info: object) -> Any:
        return script[counter.take()]

    agent = Agent(FunctionModel(respond), tools=[Tool(instant, name=name, takes_ctx=False) for name in NAMES])
    limits = UsageLimits(request_limit=None)

    async def peer() -> object:
        counter.next = 0
        result = await agent.run("go", usage_limits=limits)
        assert result.output == "done", result.output
        return result

    return {"floor": zero_latency_floor(turns), "peer": peer}


# -- LangGraph -------------------------------------------------------------------------------


def langgraph(turns: int) -> dict[str, Runner]:
    """`create_react_agent` on a chat model serving pre-built `AIMessage`s."""
    from langchain_core.language_models.chat_models import BaseChatModel  # type: ignore[import-not-found]
    from langchain_core.messages import AIMessage  # type: ignore[import-not-found]
    from langchain_core.outputs import ChatGeneration, ChatResult  # type: ignore[import-not-found]
    from langchain_core.tools import StructuredTool  # type: ignore[import-not-found]
    from langgraph.prebuilt import create_react_agent  # type: ignore[import-not-found]

    script = [
        AIMessage(
            content="",
            tool_calls=[
                {
                    "name": name,
                    "args": {"key": key(turn, index)},
                    "id": call_id(turn, index),
                    "type": "tool_call",
                }
                for index, name in enumerate(NAMES)
            ],
        )
        for turn in range(turns)
    ]
    script.append(AIMessage(content="done"))
    counter = Counter()

    class Scripted(BaseChatModel):  # type: ignore[misc]
        """Serves the script; binding tools changes nothing."""

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def _generate(
            self, messages: object, stop: object = None, run_manager: object = None, **kw: Any
        ) -> Any:
            return ChatResult(generations=[ChatGeneration(message=script[counter.take()])])

        async def _agenerate(
            self, messages: object, stop: object = None, run_manager: object = None, **kw: Any
        ) -> Any:
            return ChatResult(generations=[ChatGeneration(message=script[counter.take()])])

        def bind_tools(self, tools: object, **kw: Any) -> Scripted:
            return self

    tools = [
        StructuredTool.from_function(coroutine=instant, name=name, description="Look up a key.")
        for name in NAMES
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of langchain's agents
        graph = create_react_agent(Scripted(), tools)
    config = {"recursion_limit": 2 * turns + 10}

    async def peer() -> object:
        counter.next = 0
        state = await graph.ainvoke({"messages": [("user", "go")]}, config)
        assert state["messages"][-1].content == "done", state["messages"][-1]
        return state

    return {"floor": zero_latency_floor(turns), "peer": peer}


# -- OpenAI Agents SDK -----------------------------------------------------------------------


def openai_agents(turns: int) -> dict[str, Runner]:
    """`Runner.run` on a `Model` serving pre-built `ModelResponse`s (tracing off)."""
    from agents import Agent, Runner, function_tool, set_tracing_disabled  # type: ignore[import-not-found]
    from agents.items import ModelResponse  # type: ignore[import-not-found]
    from agents.models.interface import Model  # type: ignore[import-not-found]
    from agents.usage import Usage  # type: ignore[import-not-found]
    from openai.types.responses import (  # type: ignore[import-not-found]
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    set_tracing_disabled(True)
    script = [
        ModelResponse(
            output=[
                ResponseFunctionToolCall(
                    type="function_call",
                    id=f"fc_{turn}_{index}",
                    call_id=call_id(turn, index),
                    name=name,
                    arguments=json.dumps({"key": key(turn, index)}),
                    status="completed",
                )
                for index, name in enumerate(NAMES)
            ],
            usage=Usage(),
            response_id=None,
        )
        for turn in range(turns)
    ]
    script.append(
        ModelResponse(
            output=[
                ResponseOutputMessage(
                    id="msg_done",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text="done", annotations=[])],
                )
            ],
            usage=Usage(),
            response_id=None,
        )
    )
    counter = Counter()

    class Scripted(Model):  # type: ignore[misc]
        """Serves the script."""

        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            return script[counter.take()]

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError

    agent = Agent(
        name="bench",
        instructions="",
        model=Scripted(),
        tools=[function_tool(instant, name_override=n) for n in NAMES],
    )

    async def peer() -> object:
        counter.next = 0
        result = await Runner.run(agent, "go", max_turns=turns + 5)
        assert result.final_output == "done", result.final_output
        return result

    return {"floor": zero_latency_floor(turns), "peer": peer}


FRAMEWORKS: Final[dict[str, tuple[str, Callable[[int], dict[str, Runner]]]]] = {
    "anthropic-tool-runner": ("anthropic", anthropic_tool_runner),
    "pydantic-ai": ("pydantic-ai-slim", pydantic_ai),
    "langgraph": ("langgraph", langgraph),
    "openai-agents": ("openai-agents", openai_agents),
}
"""Framework name: (its distribution, the variants)."""


async def measure(framework: str, turns: int, repeat: int) -> dict[str, Any]:
    """The framework and its floor, interleaved; µs per turn."""
    variants = FRAMEWORKS[framework][1](turns)
    settle()
    figures = await compare(variants, repeat=repeat, factor=1e6 / turns, warmup=2)
    return {name: dataclasses.asdict(timing) for name, timing in figures.items()}


def main() -> None:
    """Measure one framework and print the JSON line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("framework", choices=sorted(FRAMEWORKS))
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    figures = anyio.run(measure, args.framework, args.turns, args.repeat)
    distribution = FRAMEWORKS[args.framework][0]
    print(json.dumps({"framework": args.framework, "version": metadata.version(distribution), **figures}))


if __name__ == "__main__":
    main()
