"""`python -m benchmarks.batch [--quick]`: one huge batch, its cost per call and its deadline.

Workload 7 of the suite (`python -m benchmarks`), runnable on its own. One response asks for
1,000, 10,000 or 50,000 calls of an instant tool, then the model answers; metrics and trace on.

- *per call*: the run's time divided by the batch's size. A batch is linear in its size when
  this stays flat: the target compares 50,000 calls with 1,000.
- *overrun*: the same batch of calls that never finish, under `Budget(timeout_s=...)`; the time
  from the deadline to `run()` returning `timeout`. It holds the answers to every call (each
  `tool_use` gets its `tool_result`, each is recorded in the trace), so it grows with the batch.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anthropic.types import Message
from prometheus_client import CollectorRegistry

from benchmarks._fixtures import MAX_TOKENS, MODEL, FastClient, boundloop, run_boundloop
from benchmarks._harness import Spread, sample, settle
from benchmarks.suite import Report, run_alone, verdict
from boundloop import AgentLoop, Budget, LoopMetrics, Observers, StopReason, tool
from boundloop.testing import parse_message

SIZES: Final = (1_000, 10_000, 50_000)
TIMEOUT_S: Final = 0.5
"""The deadline of the overrun runs: it passes while the batch is validated or started."""


@dataclasses.dataclass(frozen=True, slots=True)
class BatchFigures:
    """One batch size: µs per call (CPU and wall) and the overrun past the deadline (s)."""

    size: int
    cpu_us: Spread
    wall_us: Spread
    overrun_s: Spread


async def instant(n: int) -> str:
    """An instant async tool."""
    return "pong"


async def endless(n: int) -> str:
    """A tool that never finishes: only the deadline ends it."""
    await anyio.Event().wait()
    return "never"


def batch_script(size: int) -> list[Message]:
    """One response with `size` calls of `ping`, then the answer."""
    calls = [
        {"type": "tool_use", "id": f"toolu_01B{n:08d}", "name": "ping", "input": {"n": n}}
        for n in range(size)
    ]
    usage = {"input_tokens": 100, "output_tokens": 20}
    return [
        parse_message({"stop_reason": "tool_use", "content": calls, "usage": usage}, model=MODEL),
        parse_message(
            {"stop_reason": "end_turn", "content": [{"type": "text", "text": "done"}], "usage": usage},
            model=MODEL,
        ),
    ]


async def measure_size(size: int, repeat: int) -> BatchFigures:
    """Time `repeat` runs of the batch, then `repeat` runs of it past its deadline."""
    responses = batch_script(size)
    client = FastClient(responses)
    loop = boundloop(client, [tool(name="ping")(instant)], steps=3, metrics=True)

    async def complete() -> object:
        client.reset()
        return await run_boundloop(loop, "go")

    timed: list[tuple[float, float]] = [await sample(complete) for _ in range(repeat)]
    overruns: list[float] = []
    for _ in range(repeat):
        late_client = FastClient(responses)
        late = AgentLoop(
            late_client,
            model=MODEL,
            tools=[tool(name="ping")(endless)],
            budget=Budget(max_steps=3, timeout_s=TIMEOUT_S),
            max_tokens=MAX_TOKENS,
            observers=Observers(metrics=LoopMetrics(registry=CollectorRegistry())),
        )
        started = time.perf_counter()
        result = await late.run("go")
        overruns.append(time.perf_counter() - started - TIMEOUT_S)
        assert result.stop_reason is StopReason.TIMEOUT, result.stop_reason
    return BatchFigures(
        size,
        Spread.of([cpu * 1e6 / size for cpu, _ in timed]),
        Spread.of([wall * 1e6 / size for _, wall in timed]),
        Spread.of(overruns),
    )


async def measure(quick: bool) -> list[BatchFigures]:
    """Every size, smallest first."""
    settle()
    figures: list[BatchFigures] = []
    for size in SIZES:
        repeat = 1 if quick or size >= 50_000 else 3
        figures.append(await measure_size(size, repeat))
    return figures


def rows(figures: Sequence[BatchFigures]) -> list[list[str]]:
    """The table's rows."""
    base = figures[0].wall_us.median
    return [
        [
            f"{item.size:,} calls",
            item.cpu_us.show(),
            item.wall_us.show(),
            f"{item.wall_us.median / base:.2f}",
            f"{item.overrun_s.median:+.2f} [{item.overrun_s.low:+.2f} - {item.overrun_s.high:+.2f}]",
        ]
        for item in figures
    ]


HEADER: Final = [
    "batch",
    "CPU µs / call",
    "wall µs / call",
    "x 1,000 (wall / call)",
    f"s past timeout_s={TIMEOUT_S:g}",
]
INTRO: Final = (
    "One response of 1,000, 10,000 or 50,000 calls of an instant tool, then an answer (metrics and trace "
    "on); µs per call is the run's time / the batch's size, median [min-max] of 3 runs (1 at 50,000). "
    f"*s past timeout_s*: the same batch of calls that never finish under `timeout_s={TIMEOUT_S:g}`, "
    "from the deadline to `run()` returning `timeout` (every call answered and recorded on the way out)."
)


async def workload(config: object, report: Report) -> None:
    """The suite's workload 7: the table and two targets."""
    figures = await measure(quick="--quick" in sys.argv)
    report.section("7. One huge batch", INTRO, HEADER, rows(figures))
    first, last = figures[0], figures[-1]
    cpu_ratio = last.cpu_us.median / first.cpu_us.median
    wall_ratio = last.wall_us.median / first.wall_us.median
    report.target(
        f"a batch is linear: µs per call at {last.size:,} calls ≤ 3x at {first.size:,}",
        f"{cpu_ratio:.2f}x CPU, {wall_ratio:.2f}x wall ({last.cpu_us.median:.1f} / "
        f"{last.wall_us.median:.1f} µs vs {first.cpu_us.median:.1f} / {first.wall_us.median:.1f} µs)",
        verdict(cpu_ratio <= 3, wall_ratio <= 3),
    )
    overrun = last.overrun_s.median
    report.target(
        f"timeout_s honoured within 1 s at {last.size:,} calls",
        f"{overrun:+.2f} s past the deadline (wall)",
        "met" if overrun <= 1 else "not met",
    )


if __name__ == "__main__":
    run_alone(workload)
