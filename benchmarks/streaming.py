"""`python -m benchmarks.streaming [--quick]`: what watching a run with `loop.stream` costs.

Workload 11 of the suite (`python -m benchmarks`), runnable on its own. The scripted model
(`ScriptedClient`) serves 20 turns, each a 40-word text and one `tool_use` of an instant tool
(its input streams as 4 pieces), then a 40-word answer: 21 model calls, ~45 deltas each.

- *CPU per turn*: the same script through `run()` (`messages.create`) and through
  `loop.stream()` read to the end by a consumer that does nothing else (`messages.stream`: the
  scripted model builds the stream events, the SDK's stream manager assembles the message, the
  loop turns each delta into an event and hands it over), `time.thread_time()` over the whole
  run divided by its turns, median [min-max] over the repeats. Target: ≤ 1.10x.
- *Delta latency*: from the moment the scripted model hands a delta event to the SDK (its raw
  stream yields it) to the moment the consumer's `async for` gets the `TextDelta`/
  `ToolInputDelta`, `time.perf_counter()`, over every delta of every repeat: median and p99.
  Target: both ≤ 1 ms.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Final

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anthropic.lib.streaming import AsyncMessageStreamManager

from benchmarks._harness import Spread, settle
from benchmarks.suite import Report
from boundloop import AgentLoop, Budget, ScriptedClient, tool
from boundloop._scripted_stream import RawStream, raw_events
from boundloop.events import TextDelta, ToolInputDelta

TURNS: Final = 20
WORDS: Final = 40
REPEAT: Final = 15
QUICK_REPEAT: Final = 5
CPU_TARGET: Final = 1.10
LATENCY_TARGET_MS: Final = 1.0
INTRO: Final = (
    f"{TURNS} turns of a {WORDS}-word text and one instant tool, then a {WORDS}-word answer, on the "
    "scripted model (`ScriptedClient`); CPU µs per turn (`time.thread_time()`), median [min-max] of "
    "the repeats; delta latency: from the scripted model's raw stream yielding a delta to the "
    "consumer receiving its event, over every delta. `python -m benchmarks.streaming`."
)


async def aecho(key: str) -> str:
    """Return the key (async: no worker thread in the measurement)."""
    return key


ECHO = tool(name="echo", description="Return the key.")(aecho)


def script() -> list[dict[str, Any]]:
    words = " ".join(f"word{n}" for n in range(WORDS))
    turn = {
        "stop_reason": "tool_use",
        "content": [
            {"type": "text", "text": words},
            {"type": "tool_use", "name": "echo", "input": {"key": "a value with spaces"}},
        ],
        "usage": {"input_tokens": 100, "output_tokens": 50},
    }
    answer = {"stop_reason": "end_turn", "content": [{"type": "text", "text": words}]}
    return [turn] * TURNS + [answer]


class _Stamped:
    """The scripted raw stream, noting when each delta event is handed over."""

    def __init__(self, inner: RawStream, stamps: list[float]) -> None:
        self._inner = inner
        self._stamps = stamps
        self.response = inner.response

    async def __aiter__(self) -> AsyncIterator[object]:
        async for event in self._inner:
            if getattr(event, "type", None) == "content_block_delta":
                self._stamps.append(time.perf_counter())
            yield event

    async def close(self) -> None:
        await self._inner.close()


class _StampedMessages:
    def __init__(self, client: ScriptedClient, stamps: list[float]) -> None:
        self._client = client
        self._stamps = stamps
        self.create = client.messages.create

    def stream(self, **request: Any) -> object:
        async def api_request() -> Any:
            message = await self._client.messages.create(**request)
            return _Stamped(RawStream(raw_events(message), beta=False, request=request), self._stamps)

        return AsyncMessageStreamManager(api_request())


class StampedClient:
    """A `ScriptedClient` whose streams note when each delta is handed to the SDK."""

    def __init__(self, stamps: list[float]) -> None:
        self.messages = _StampedMessages(ScriptedClient(script()), stamps)


def make_loop(client: Any) -> AgentLoop:
    return AgentLoop(
        client, model="claude-sonnet-4-6", tools=[ECHO], budget=Budget(max_steps=TURNS + 5), metrics=None
    )


async def plain_run() -> float:
    loop = make_loop(ScriptedClient(script()))
    started = time.thread_time()
    await loop.run("go")
    return (time.thread_time() - started) / (TURNS + 1)


async def streamed_run(latencies: list[float] | None = None) -> float:
    stamps: list[float] = []
    loop = make_loop(StampedClient(stamps))
    received: list[float] = []
    started = time.thread_time()
    async with loop.stream("go") as run:
        async for event in run:
            if isinstance(event, TextDelta | ToolInputDelta):
                received.append(time.perf_counter())
    cpu = (time.thread_time() - started) / (TURNS + 1)
    assert len(stamps) == len(received)
    if latencies is not None:
        latencies.extend(got - handed for handed, got in zip(stamps, received, strict=True))
    return cpu


async def measure(repeat: int) -> Mapping[str, Any]:
    plain: list[float] = []
    streamed: list[float] = []
    latencies: list[float] = []
    await plain_run()  # warm up every path
    await streamed_run()
    for _ in range(repeat):
        settle()
        plain.append(await plain_run())
        settle()
        streamed.append(await streamed_run(latencies))

    latencies.sort()
    return {
        "plain": Spread.of([value * 1e6 for value in plain]),
        "streamed": Spread.of([value * 1e6 for value in streamed]),
        "median_ms": statistics.median(latencies) * 1e3,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1e3,
        "deltas": len(latencies),
    }


async def workload(config: object, report: Report) -> None:
    """The suite's workload 11: the table and two targets."""
    figures = await measure(QUICK_REPEAT if "--quick" in sys.argv else REPEAT)
    plain, streamed = figures["plain"], figures["streamed"]
    ratio = streamed.median / plain.median
    report.section(
        "11. Streaming: `loop.stream()` against `run()`",
        INTRO,
        ["variant", "CPU µs per turn", "ratio", "delta latency median / p99 (ms)"],
        [
            ["`run()`", plain.show(), "1.00", "-"],
            [
                "`loop.stream()`, deltas read",
                streamed.show(),
                f"{ratio:.2f}",
                f"{figures['median_ms']:.3f} / {figures['p99_ms']:.3f} ({figures['deltas']:,} deltas)",
            ],
        ],
    )
    report.target(
        f"streaming ≤ {CPU_TARGET:.2f}x the CPU per turn of run() (section 11)",
        f"{ratio:.2f}x ({streamed.median:,.1f} vs {plain.median:,.1f} µs): most of it the SDK's stream "
        "manager (a pydantic object per event, built twice) and the scripted model's event building",
        "met" if ratio <= CPU_TARGET else "not met",
    )
    worst = max(figures["median_ms"], figures["p99_ms"])
    report.target(
        f"a delta reaches the consumer ≤ {LATENCY_TARGET_MS:g} ms after the scripted model hands it over "
        "(section 11)",
        f"median {figures['median_ms']:.3f} ms, p99 {figures['p99_ms']:.3f} ms",
        "met" if worst <= LATENCY_TARGET_MS else "not met",
    )


def main() -> None:
    """Measure, print the table and the targets."""
    report = Report()
    anyio.run(workload, None, report)
    for target in report.targets:
        print(f"- {target.name}: {target.measured} — **{target.verdict}**")


if __name__ == "__main__":
    main()
