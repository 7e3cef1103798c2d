"""Per-iteration overhead of AgentLoop against hand-written minimal loops, in one process.

Run by hand: `.venv/bin/python benchmarks/overhead.py [--turns 50] [--repeat 30]`.

Workload: a zero-latency `ScriptedClient`, `turns` responses of 3 instant tool calls each,
then a final `end_turn`. Every variant serves the same pre-parsed `Message` objects, so the
figures compare loop overhead only. Variants run interleaved, and the median over repeats
is reported as µs per iteration and as a ratio to the hand-written floor.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
from anthropic.types import Message, MessageParam, ToolResultBlockParam, ToolUseBlock
from prometheus_client import CollectorRegistry

from boundloop import AgentLoop, Budget, LoopMetrics, tool
from boundloop.testing import parse_message


@tool
async def lookup_a(key: str) -> str:
    """Instant tool A."""
    return key


@tool
async def lookup_b(key: str) -> str:
    """Instant tool B."""
    return key


@tool
async def lookup_c(key: str) -> str:
    """Instant tool C."""
    return key


TOOLS = [lookup_a, lookup_b, lookup_c]


async def _instant(key: str) -> str:
    return key


HANDLERS: dict[str, Callable[..., Awaitable[str]]] = {
    "lookup_a": _instant,
    "lookup_b": _instant,
    "lookup_c": _instant,
}
"""The hand-written loops call the same instant function the tools wrap."""


def script(turns: int) -> list[Message]:
    """`turns` responses with three tool calls each, then a final answer."""
    responses = [
        parse_message(
            {
                "stop_reason": "tool_use",
                "content": [
                    {"type": "tool_use", "id": f"t{turn}_{i}", "name": name, "input": {"key": f"k{turn}"}}
                    for i, name in enumerate(HANDLERS)
                ],
                "usage": {"input_tokens": 100, "output_tokens": 20},
            }
        )
        for turn in range(turns)
    ]
    responses.append(
        parse_message({"stop_reason": "end_turn", "content": [{"type": "text", "text": "done"}]})
    )
    return responses


class FastClient:
    """A zero-latency model serving pre-parsed responses (no request recording)."""

    def __init__(self, responses: list[Message]) -> None:
        self._responses = responses
        self._next = 0
        self.messages = self

    def reset(self) -> None:
        """Serve the script again from the start."""
        self._next = 0

    async def create(self, **request: Any) -> Message:
        response = self._responses[self._next]
        self._next += 1
        return response


async def _answer(block: ToolUseBlock) -> ToolResultBlockParam:
    result = await HANDLERS[block.name](**block.input)
    return {"type": "tool_result", "tool_use_id": block.id, "content": result}


async def _answer_into(results: list[ToolResultBlockParam | None], index: int, block: ToolUseBlock) -> None:
    results[index] = await _answer(block)


async def batch_gather(blocks: list[ToolUseBlock]) -> list[ToolResultBlockParam]:
    """All calls of a response with asyncio.gather."""
    return list(await asyncio.gather(*(_answer(b) for b in blocks)))


async def batch_anyio(blocks: list[ToolUseBlock]) -> list[ToolResultBlockParam]:
    """All calls of a response in one anyio task group, results by block index."""
    results: list[ToolResultBlockParam | None] = [None] * len(blocks)
    async with anyio.create_task_group() as group:
        for index, block in enumerate(blocks):
            group.start_soon(_answer_into, results, index, block)
    return [r for r in results if r is not None]


Batch = Callable[[list[ToolUseBlock]], Awaitable[list[ToolResultBlockParam]]]


def hand_written(batch: Batch) -> Callable[[list[Message]], Awaitable[str]]:
    """The floor: call, append, route on stop_reason, run the tools, answer in one user message."""

    async def run(responses: list[Message]) -> str:
        client = FastClient(responses)
        messages: list[MessageParam] = [{"role": "user", "content": "go"}]
        while True:
            response = await client.create(model="m", max_tokens=1024, messages=messages)
            messages.append({"role": "assistant", "content": response.content})
            if response.stop_reason != "tool_use":
                return "".join(b.text for b in response.content if b.type == "text")
            blocks = [b for b in response.content if isinstance(b, ToolUseBlock)]
            messages.append({"role": "user", "content": await batch(blocks)})

    return run


def boundloop_variant(
    responses: list[Message], *, metrics: bool
) -> Callable[[list[Message]], Awaitable[str]]:
    """AgentLoop, built once as an app would, with trace on and metrics on (a fresh registry) or off."""
    client = FastClient(responses)
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-5",
        tools=TOOLS,
        budget=Budget(max_steps=len(responses) + 1, max_consecutive_tool_errors=10),
        metrics=LoopMetrics(registry=CollectorRegistry()) if metrics else None,
    )

    async def run(responses: list[Message]) -> str:
        client.reset()
        result = await loop.run("go")
        return result.unwrap()

    return run


async def measure(turns: int, repeat: int) -> dict[str, float]:
    """Median µs per iteration of every variant, interleaved."""
    responses = script(turns)
    variants: dict[str, Callable[[list[Message]], Awaitable[str]]] = {
        "hand-written (asyncio.gather)": hand_written(batch_gather),
        "hand-written (anyio task group)": hand_written(batch_anyio),
        "boundloop (metrics + trace)": boundloop_variant(responses, metrics=True),
        "boundloop (trace, no metrics)": boundloop_variant(responses, metrics=False),
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for name, variant in variants.items():  # warm up
        assert await variant(responses) == "done", name
    gc.collect()
    for _ in range(repeat):
        for name, variant in variants.items():
            started = time.perf_counter()
            await variant(responses)
            samples[name].append((time.perf_counter() - started) / turns * 1e6)
    return {name: statistics.median(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args()
    figures = anyio.run(measure, args.turns, args.repeat)
    floor = figures["hand-written (asyncio.gather)"]
    print(f"{args.turns} turns x 3 instant tools, median of {args.repeat} runs, µs per iteration")
    for name, value in figures.items():
        print(f"  {name:34s} {value:8.1f} µs   x{value / floor:5.2f}")
    with_metrics = figures["boundloop (metrics + trace)"]
    without = figures["boundloop (trace, no metrics)"]
    print(f"  metrics cost: {100 * (with_metrics / without - 1):+.1f} % per iteration")


if __name__ == "__main__":
    main()
