"""What a delegation tree's ledger costs per model call (reserve + settle), in one process.

Run by hand: `.venv/bin/python benchmarks/delegation.py [--turns 200] [--repeat 20]`.

Two figures:

- the ledger alone: `TreeLedger.reserve` then `settle`, awaited, µs per call;
- a run's model calls inside a tree against the same run alone: a lead delegates once to a
  child of `turns` turns (one instant tool call each, on a zero-latency scripted model) through
  `as_tool` (the child reserves and settles every call), against the same lead whose tool
  awaits `child.run(task)` itself (no tree, no ledger). Both have cost ceilings, so both clamp
  each call's `max_tokens` to their own budget. Reported: µs per child call (CPU and wall,
  median of interleaved repeats), the ratio, and the difference per call.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._fixtures import MODEL, instant, script, tools_of
from benchmarks._harness import Timing, compare, settle
from boundloop import AgentLoop, Budget, Observers, ScriptedClient, tool
from boundloop._core.ledger import TreeLedger
from boundloop.pools import Claim, Grant
from boundloop.testing import parse_message

DELEGATED = "as_tool (a tree: the ledger on every call)"
ALONE = "child.run in a tool (no tree, no ledger)"

LEAD: list[dict[str, Any]] = [
    {
        "stop_reason": "tool_use",
        "content": [{"type": "tool_use", "id": "toolu_01lead", "name": "research", "input": {"task": "go"}}],
        "usage": {"input_tokens": 100, "output_tokens": 20},
    },
    {
        "stop_reason": "end_turn",
        "content": [{"type": "text", "text": "done"}],
        "usage": {"input_tokens": 100, "output_tokens": 5},
    },
]


async def ledger_us(calls: int) -> float:
    """µs of one `reserve` + `settle` on the in-memory ledger."""
    ledger = TreeLedger(max_cost_usd=1e9, max_total_tokens=None)
    claim = Claim(input_tokens=1_000, output_tokens=4_096, input_usd=3e-6, output_usd=15e-6)
    started = time.perf_counter()
    for _ in range(calls):
        grant = await ledger.reserve(claim)
        assert isinstance(grant, Grant)
        await ledger.settle(grant, cost_usd=0.01, tokens=1_100)
    return (time.perf_counter() - started) / calls * 1e6


async def measure(turns: int, repeat: int) -> dict[str, Timing]:
    """The lead's run with its child delegated, and with its child run by hand, interleaved."""
    child_script = script(turns, 1)
    lead_script = [parse_message(body, model=MODEL) for body in LEAD]
    budget = Budget(max_steps=turns + 2, max_cost_usd=1_000.0)

    def child() -> AgentLoop:
        return AgentLoop(
            ScriptedClient(child_script),
            model=MODEL,
            tools=tools_of(instant, 1),
            budget=budget,
            observers=Observers(metrics=None),
        )

    def lead(research: Any) -> AgentLoop:
        return AgentLoop(
            ScriptedClient(lead_script),
            model=MODEL,
            tools=[research],
            budget=budget,
            observers=Observers(metrics=None),
        )

    async def delegated() -> None:
        result = await lead(child().as_tool("research", description="Research.")).run("go")
        assert result.ok
        assert result.state.children

    async def alone() -> None:
        researcher = child()

        @tool(name="research", description="Research.")
        async def research(task: str) -> str:
            return (await researcher.run(task)).answer or ""

        result = await lead(research).run("go")
        assert result.ok
        assert not result.state.children

    settle()
    return await compare({DELEGATED: delegated, ALONE: alone}, repeat=repeat, factor=1e6 / turns)


def main() -> None:
    """Parse the arguments, measure, print µs per call and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    alone_us = anyio.run(ledger_us, 100_000)
    print(f"the ledger alone: reserve + settle {alone_us:.2f} µs per call")
    figures = anyio.run(measure, args.turns, args.repeat)
    print(f"a child of {args.turns} turns x 1 instant tool, median of {args.repeat} runs, µs per child call")
    for name, timing in figures.items():
        print(f"  {name:44s} {timing.cpu.median:7.1f} CPU / {timing.wall.median:7.1f} wall")
    cpu, wall = figures[DELEGATED].ratio(figures[ALONE])
    extra = figures[DELEGATED].wall.median - figures[ALONE].wall.median
    print(f"  ratio {cpu:.3f} CPU / {wall:.3f} wall: {extra:+.1f} µs per call in a tree")


if __name__ == "__main__":
    main()
