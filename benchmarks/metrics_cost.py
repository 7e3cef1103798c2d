"""What Prometheus metrics add to the loop's per-iteration overhead (run by hand, not by tests).

The same scripted run — `--turns` turns, each asking for `--tools` instant tools, then a final
answer — on `ScriptedClient`, once with `metrics=LoopMetrics(registry=CollectorRegistry())` and
once with `metrics=None`. Both variants run in one process, interleaved (the order alternates on
every repetition), so drift in CPU frequency or caches hits both alike. The model's responses are
validated into `Message`s before the clock starts; what is timed is the loop's own work.

Usage::

    .venv/bin/python benchmarks/metrics_cost.py [--turns 50] [--tools 3] [--repeats 40]

Target: metrics add under 10 % to the per-iteration overhead.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
from typing import Any

import anyio
from prometheus_client import CollectorRegistry

from boundloop import AgentLoop, Budget, LoopMetrics, Observers, ScriptedClient, tool
from boundloop.testing import parse_message


@tool
async def lookup(key: str) -> str:
    """Return the key: an instant async tool."""
    return key


@tool
def echo(key: str) -> str:
    """Return the key: an instant sync tool (runs in a worker thread)."""
    return key


@tool
async def count(key: str) -> int:
    """Return the key's length: an instant async tool."""
    return len(key)


TOOL_NAMES = ("lookup", "count", "echo")


def script(turns: int, tools: int) -> list[Any]:
    """`turns` tool-use responses with `tools` distinct calls each, then a final answer."""
    responses: list[Any] = []
    for turn in range(turns):
        blocks = [
            {
                "type": "tool_use",
                # The API's id shape: the loop records other ids as model-invented, redacted.
                "id": f"toolu_01bench{turn:04d}C{index:02d}",
                "name": TOOL_NAMES[index % len(TOOL_NAMES)],
                "input": {"key": f"k{turn}-{index}"},
            }
            for index in range(tools)
        ]
        responses.append(
            parse_message(
                {
                    "stop_reason": "tool_use",
                    "content": blocks,
                    "usage": {"input_tokens": 10, "output_tokens": 5},
                }
            )
        )
    responses.append(
        parse_message(
            {
                "stop_reason": "end_turn",
                "content": [{"type": "text", "text": "done"}],
                "usage": {"input_tokens": 10, "output_tokens": 5},
            }
        )
    )
    return responses


async def one_run(turns: int, tools: int, with_metrics: bool) -> tuple[float, float]:
    """Wall-clock and CPU seconds per iteration (turn) of one full run.

    CPU time (`time.process_time`, every thread of the process) is the steadier figure on a
    shared machine: time this process spent waiting for a CPU does not count.
    """
    metrics = LoopMetrics(registry=CollectorRegistry()) if with_metrics else None
    loop = AgentLoop(
        ScriptedClient(script(turns, tools)),
        model="claude-sonnet-4-5",
        tools=[lookup, echo, count],
        budget=Budget(max_steps=turns + 1, max_tool_calls=turns * tools),
        name="bench",
        observers=Observers(metrics=metrics),
    )
    # Collect now, so garbage left by an earlier run is not collected on this run's clock.
    gc.collect()
    cpu_started = time.process_time()
    started = time.perf_counter()
    result = await loop.run("benchmark")
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    assert result.stop_reason == "completed", result.stop_reason
    return elapsed / (turns + 1), cpu / (turns + 1)


async def measure(turns: int, tools: int, repeats: int) -> dict[str, list[tuple[float, float]]]:
    """Interleaved repetitions of both variants, after one warm-up run each."""
    samples: dict[str, list[tuple[float, float]]] = {"metrics": [], "none": []}
    for with_metrics in (True, False):
        await one_run(turns, tools, with_metrics)
    for repeat in range(repeats):
        order = (True, False) if repeat % 2 == 0 else (False, True)
        for with_metrics in order:
            samples["metrics" if with_metrics else "none"].append(await one_run(turns, tools, with_metrics))
    return samples


def metrics_calls(turns: int, tools: int, duration_s: float) -> float:
    """Seconds per iteration spent in the metrics calls alone, without the loop around them.

    One iteration is what a turn of the run records: five transitions (assemble, propose,
    validate, act, observe), one model request, and `tools` tool calls, every one with a
    trace id and lasting `duration_s` (exemplars are attached from `EXEMPLAR_MIN_S` on).
    """
    bound = LoopMetrics(registry=CollectorRegistry()).bind("bench", TOOL_NAMES)
    trace_id = "0" * 32
    tokens = (10, 5, 0, 0)
    edges = (("assemble", "propose"), ("propose", "validate"), ("validate", "act"), ("act", "observe"))
    started = time.perf_counter()
    for _ in range(turns):
        for source, dest in edges:
            bound.transition(source, dest, duration_s, trace_id)
        bound.model_request("tool_use", duration_s, trace_id, tokens)
        for index in range(tools):
            bound.tool_call(TOOL_NAMES[index % len(TOOL_NAMES)], "ok", duration_s, trace_id)
        bound.transition("observe", "assemble", duration_s, trace_id)
    return (time.perf_counter() - started) / turns


def main() -> None:
    """Parse the arguments, measure, print µs/iteration for each variant and their ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--tools", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=60)
    args = parser.parse_args()
    samples = anyio.run(measure, args.turns, args.tools, args.repeats)
    print(f"{args.turns} turns x {args.tools} tools, {args.repeats} interleaved repetitions")
    for clock, index in (("wall", 0), ("cpu", 1)):
        for name, pick in (("median", statistics.median), ("min", min)):
            with_metrics = pick(sample[index] for sample in samples["metrics"]) * 1e6
            without = pick(sample[index] for sample in samples["none"]) * 1e6
            ratio = with_metrics / without
            print(
                f"{clock:>4} {name:>6}: metrics=LoopMetrics(...) {with_metrics:7.1f} µs/iteration, "
                f"metrics=None {without:7.1f} µs/iteration, ratio {ratio:.3f} ({(ratio - 1) * 100:+.1f} %)"
            )
    for duration_s, what in ((1e-4, "sub-millisecond, no exemplars"), (0.1, "slow, with exemplars")):
        calls = min(metrics_calls(args.turns, args.tools, duration_s) for _ in range(args.repeats)) * 1e6
        print(f"metrics calls alone, {what} (min): {calls:.1f} µs/iteration")


if __name__ == "__main__":
    main()
