"""`python -m benchmarks.streaming [--quick]`: what watching a run with `loop.stream` costs.

Workload 11 of the suite (`python -m benchmarks`), runnable on its own. The scripted model
(`ScriptedClient`) serves 20 turns, each a 40-word text and one `tool_use` of an instant tool
(its input, different each turn, streams as 5 pieces), then a 40-word answer: 21 model calls, ~45 deltas each.

- *CPU per turn*, `time.thread_time()` over a whole run divided by its 21 turns, median
  [min-max] over the repeats; the variants run interleaved (the order reversed on every other
  repeat), each after a `gc.collect()`, their client and loop built before the clock starts:
  - boundloop `run()` (`messages.create`: the scripted model serves parsed `Message`s) and
    `loop.stream()` read to the end by a consumer that does nothing else (`messages.stream`: the
    scripted model builds the API's stream events, the SDK's stream manager parses them and
    assembles the message, the loop turns each delta into an event and hands it over);
  - the floors, hand-written minimal loops over the same client: *(b)* `messages.create`, run the
    tool, next turn; *(a)* the same over the response's raw stream events (what
    `messages.create(stream=True)` yields: the API's events as the SDK's event objects), the
    message put together by hand (the text and the tool input's JSON pieces joined, the input
    parsed at its block's end), every text/thinking/input-JSON delta sent to a consumer task
    through a bounded anyio memory object stream (64, boundloop's default buffer), run the tool,
    next turn; and *(a)* with the deltas dropped instead of sent (what the scripted stream costs
    alone);
  - not a floor: the same loop over the SDK's stream helper (`messages.stream`, whose stream
    manager folds every event into a snapshot of the message; `get_final_message()`), which
    boundloop's `loop.stream()` uses: what that helper costs.
  Targets: the issue's literal one, `stream()` ≤ 1.10x `run()`, and what a loop can be held to:
  `stream()` ≤ 1.10x floor (a), and what streaming adds to boundloop (`stream()` - `run()`) ≤
  1.10x what it adds to the floor ((a) - (b)).
- *Delta latency*: from the moment the scripted model hands a delta event to the SDK (its raw
  stream yields it) to the moment the consumer's `async for` gets it, `time.perf_counter()`,
  over every delta of every repeat: median, p99 and max, for boundloop and floor (a); each repeat
  after a `gc.collect()` on an otherwise idle event loop. The same again with the garbage
  collector disabled during the runs, as a diagnostic (is the p99 a collection's pause?), not
  the target's figure. Target: median and p99 ≤ 1 ms.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Final

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anthropic.lib.streaming import AsyncMessageStreamManager
from anthropic.types import MessageParam, ToolParam, ToolResultBlockParam
from anyio.streams.memory import MemoryObjectSendStream

from benchmarks._harness import Spread, settle
from benchmarks.suite import Report, run_alone
from boundloop import AgentLoop, Budget, LoopState, Observers, ScriptedClient, StopReason, tool
from boundloop._base.scripted_stream import RawStream, raw_events
from boundloop.events import TextDelta, ThinkingDelta, ToolInputDelta

TURNS: Final = 20
WORDS: Final = 40
REPEAT: Final = 15
QUICK_REPEAT: Final = 5
LATENCY_REPEAT: Final = 10
BUFFER: Final = 64
"""The floor's bound on deltas in flight: boundloop's default buffer."""
CPU_TARGET: Final = 1.10
LATENCY_TARGET_MS: Final = 1.0
MODEL: Final = "claude-sonnet-4-6"
MAX_TOKENS: Final = 1024
FLOOR_DELTAS: Final = frozenset({"text_delta", "thinking_delta", "input_json_delta"})
"""The SDK's delta types a streaming loop hands on (not `signature_delta`, as boundloop)."""
TOOL_PARAMS: Final[list[ToolParam]] = [
    {
        "name": "echo",
        "description": "Return the key.",
        "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
    }
]
RUN: Final = "boundloop `run()`"
STREAM: Final = "boundloop `loop.stream()`, deltas read"
CREATE_FLOOR: Final = "floor (b): `messages.create`"
STREAM_FLOOR: Final = "floor (a): the raw stream events, deltas read"
DROP_FLOOR: Final = "floor (a), deltas dropped (the scripted stream alone)"
SDK_STREAM: Final = "not a floor: (a) over the SDK's `messages.stream` helper, deltas read"
INTRO: Final = (
    f"{TURNS} turns of a {WORDS}-word text and one instant tool, then a {WORDS}-word answer, on the "
    "scripted model (`ScriptedClient`), against hand-written minimal loops over the same client: "
    "floor (b) calls `messages.create`; floor (a) reads the response's raw stream events (what "
    "`messages.create(stream=True)` yields), puts the message together by hand and sends each delta "
    f"to a consumer task through a bounded anyio memory object stream ({BUFFER}). The last floor row "
    "is not a floor: the same loop over the SDK's `messages.stream` helper (its stream manager folds "
    "every event into a snapshot of the message), which `loop.stream()` uses. CPU µs per turn "
    "(`time.thread_time()`), median [min-max] of the repeats; delta latency: from the scripted "
    "model's raw stream yielding a delta to the consumer receiving it, over every delta, after a "
    "`gc.collect()` per run. `python -m benchmarks.streaming`."
)


async def aecho(key: str) -> str:
    """Return the key (async: no worker thread in the measurement)."""
    return key


ECHO = tool(name="echo", description="Return the key.")(aecho)


def script() -> list[dict[str, Any]]:
    """The responses: each turn's tool input differs (a repeated call would stop the run)."""
    words = " ".join(f"word{n}" for n in range(WORDS))
    turns: list[dict[str, Any]] = [
        {
            "stop_reason": "tool_use",
            "content": [
                {"type": "text", "text": words},
                {"type": "tool_use", "name": "echo", "input": {"key": f"value {turn} with spaces"}},
            ],
            "usage": {"input_tokens": 100, "output_tokens": 50},
        }
        for turn in range(TURNS)
    ]
    return [*turns, {"stop_reason": "end_turn", "content": [{"type": "text", "text": words}]}]


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


class _Messages:
    def __init__(self, client: ScriptedClient, stamps: list[float] | None) -> None:
        self._client = client
        self._stamps = stamps
        self.create = client.messages.create

    async def raw(self, **request: Any) -> Any:
        """The response's raw stream events, as `messages.create(stream=True)` yields them."""
        message = await self._client.messages.create(**request)
        stream = RawStream(raw_events(message), beta=False, request=request)
        return stream if self._stamps is None else _Stamped(stream, self._stamps)

    def stream(self, **request: Any) -> object:
        """The SDK's stream helper over the raw events."""
        return AsyncMessageStreamManager(self.raw(**request))


class StreamingClient:
    """The scripted model as a streaming loop reads it: `create`, the raw events (`raw`), and the
    SDK's stream helper over them (`stream`); with `stamps`, each delta's hand-over is noted."""

    def __init__(self, stamps: list[float] | None = None) -> None:
        self.messages = _Messages(ScriptedClient(script()), stamps)


def make_loop(client: Any) -> AgentLoop:
    return AgentLoop(
        client,
        model=MODEL,
        tools=[ECHO],
        budget=Budget(max_steps=TURNS + 5),
        observers=Observers(metrics=None),
    )


# -- the floors --------------------------------------------------------------------------

Send = Callable[[object], Awaitable[None]]


async def streamed_turn(client: Any, request: dict[str, Any], send: Send) -> tuple[list[Any], str]:
    """One model call read from its raw stream events, the message put together by hand: its
    blocks (text joined, a tool input's JSON joined and parsed at its block's end) and its stop
    reason; each text/thinking/input-JSON delta handed to `send`."""
    blocks: list[Any] = []  # each a content block param, as dicts
    parts: list[str] = []
    stop_reason = ""
    async for event in await client.messages.raw(**request):
        kind = event.type
        if kind == "content_block_delta":
            delta = event.delta
            if delta.type == "text_delta":
                blocks[-1]["text"] += delta.text
            elif delta.type == "input_json_delta":
                parts.append(delta.partial_json)
            if delta.type in FLOOR_DELTAS:
                await send(delta)
        elif kind == "content_block_start":
            block = event.content_block
            if block.type == "tool_use":
                blocks.append({"type": "tool_use", "id": block.id, "name": block.name, "input": {}})
                parts = []
            else:
                blocks.append({"type": "text", "text": ""})
        elif kind == "content_block_stop":
            if blocks[-1]["type"] == "tool_use" and parts:
                blocks[-1]["input"] = json.loads("".join(parts))
        elif kind == "message_delta":
            stop_reason = event.delta.stop_reason
    return blocks, stop_reason


async def floor_turns(client: Any, send: Send | None, *, helper: bool = False) -> list[MessageParam]:
    """The hand-written loop: `messages.create` without `send`; with it, streamed from the raw
    events (each delta sent), or with `helper` through the SDK's `messages.stream`."""
    messages: list[MessageParam] = [{"role": "user", "content": "go"}]
    while True:
        request: dict[str, Any] = {
            "model": MODEL,
            "max_tokens": MAX_TOKENS,
            "messages": messages,
            "tools": TOOL_PARAMS,
        }
        calls: list[tuple[str, dict[str, Any]]]
        if send is None or helper:
            if send is None:
                message = await client.messages.create(**request)
            else:
                async with client.messages.stream(**request) as stream:
                    async for event in stream:
                        if event.type == "content_block_delta" and event.delta.type in FLOOR_DELTAS:
                            await send(event.delta)
                    message = await stream.get_final_message()
            messages.append({"role": "assistant", "content": message.content})
            stop_reason = message.stop_reason
            calls = [(block.id, block.input) for block in message.content if block.type == "tool_use"]
        else:
            content, stop_reason = await streamed_turn(client, request, send)
            messages.append({"role": "assistant", "content": content})
            calls = [(block["id"], block["input"]) for block in content if block["type"] == "tool_use"]
        if stop_reason != "tool_use":
            assert len(messages) == 2 * TURNS + 2, len(messages)
            return messages
        results: list[ToolResultBlockParam] = [
            {"type": "tool_result", "tool_use_id": call_id, "content": await aecho(**arguments)}
            for call_id, arguments in calls
        ]
        messages.append({"role": "user", "content": results})


async def floor_streamed(client: Any, received: list[float] | None = None, *, helper: bool = False) -> None:
    """Floor (a) (`helper`: over the SDK's stream helper): the loop in a task, its deltas read by
    this one through a bounded stream."""
    send_stream, receive_stream = anyio.create_memory_object_stream[object](BUFFER)

    async def produce(send_stream: MemoryObjectSendStream[object]) -> None:
        async with send_stream:
            await floor_turns(client, send_stream.send, helper=helper)

    async with anyio.create_task_group() as group:
        group.start_soon(produce, send_stream)
        async with receive_stream:
            async for _delta in receive_stream:
                if received is not None:
                    received.append(time.perf_counter())


async def dropped(delta: object) -> None:
    """A consumer that drops the delta."""


# -- the variants ------------------------------------------------------------------------

Runner = Callable[[], Awaitable[object]]
Prepare = Callable[[], Runner]
"""Builds a variant's client and loop (off the clock), returns the run to time."""


def boundloop_run() -> Runner:
    loop = make_loop(ScriptedClient(script()))

    async def run() -> None:
        finished((await loop.run("go")).state)

    return run


def boundloop_streamed(client: Any = None, received: list[float] | None = None) -> Runner:
    loop = make_loop(ScriptedClient(script()) if client is None else client)

    async def run() -> None:
        async with loop.stream("go") as stream:
            async for event in stream:
                if received is None or not isinstance(event, TextDelta | ThinkingDelta | ToolInputDelta):
                    continue
                if isinstance(event, ToolInputDelta) and not event.partial_json:
                    continue  # a tool call's announcement at its block's start: not a delta handed over
                received.append(time.perf_counter())
        assert stream.result is not None
        finished(stream.result.state)

    return run


def finished(state: LoopState) -> None:
    """A boundloop run did the whole workload (every turn, then the answer)."""
    assert state.stop_reason == StopReason.COMPLETED, state.stop_reason
    assert state.step == TURNS + 1, state.step


VARIANTS: Final[Mapping[str, Prepare]] = {
    RUN: boundloop_run,
    STREAM: boundloop_streamed,
    CREATE_FLOOR: lambda: lambda: floor_turns(StreamingClient(), None),
    STREAM_FLOOR: lambda: lambda: floor_streamed(StreamingClient()),
    DROP_FLOOR: lambda: lambda: floor_turns(StreamingClient(), dropped),
    SDK_STREAM: lambda: lambda: floor_streamed(StreamingClient(), helper=True),
}


async def cpu_per_turn(repeat: int) -> dict[str, Spread]:
    """Each variant's CPU µs per turn over `repeat` interleaved runs, after one warm-up each."""
    for prepare in VARIANTS.values():
        await prepare()()
    settle()
    names = list(VARIANTS)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for index in range(repeat):
        for name in names if index % 2 == 0 else reversed(names):
            run = VARIANTS[name]()
            gc.collect()
            started = time.thread_time()
            await run()
            samples[name].append((time.thread_time() - started) * 1e6 / (TURNS + 1))
    return {name: Spread.of(values) for name, values in samples.items()}


# -- delta latency -----------------------------------------------------------------------

Latencies = dict[str, float]


def summary(values: list[float]) -> Latencies:
    """Median, p99 and max of `values` (seconds), in ms; and their count."""
    values.sort()
    return {
        "median": statistics.median(values) * 1e3,
        "p99": values[min(len(values) - 1, int(len(values) * 0.99))] * 1e3,
        "max": values[-1] * 1e3,
        "count": len(values),
    }


async def one_latency_run(floor: bool, into: list[float]) -> None:
    stamps: list[float] = []
    received: list[float] = []
    client = StreamingClient(stamps)
    run = (lambda: floor_streamed(client, received)) if floor else boundloop_streamed(client, received)
    gc.collect()
    await run()
    assert len(stamps) == len(received), (len(stamps), len(received))
    into.extend(got - handed for handed, got in zip(stamps, received, strict=True))


async def latency(repeat: int, *, collector: bool) -> dict[str, Latencies]:
    """Delta latency of boundloop and floor (a) over `repeat` runs each (the collector off: a diagnostic)."""
    values: dict[str, list[float]] = {STREAM: [], STREAM_FLOOR: []}
    collections = 0
    for index in range(repeat):
        for floor in (False, True) if index % 2 == 0 else (True, False):
            before = sum(generation["collections"] for generation in gc.get_stats())
            if not collector:
                gc.disable()
            try:
                await one_latency_run(floor, values[STREAM_FLOOR if floor else STREAM])
            finally:
                gc.enable()
            collections += sum(generation["collections"] for generation in gc.get_stats()) - before
    figures = {name: summary(found) for name, found in values.items()}
    for found in figures.values():
        found["collections"] = collections
    return figures


# -- the report --------------------------------------------------------------------------


async def measure(repeat: int) -> dict[str, Any]:
    cpu = await cpu_per_turn(repeat)
    latency_repeat = max(repeat, LATENCY_REPEAT)
    return {
        "cpu": cpu,
        "latency": await latency(latency_repeat, collector=True),
        "latency_no_gc": await latency(latency_repeat, collector=False),
    }


def shown(figures: Latencies) -> str:
    return f"{figures['median']:.3f} / {figures['p99']:.3f} / {figures['max']:.3f}"


async def workload(config: object, report: Report) -> None:
    """The suite's workload 11: the table and its targets."""
    figures = await measure(QUICK_REPEAT if "--quick" in sys.argv else REPEAT)
    cpu: dict[str, Spread] = figures["cpu"]
    lat: dict[str, Latencies] = figures["latency"]
    quiet: dict[str, Latencies] = figures["latency_no_gc"]
    run, stream = cpu[RUN].median, cpu[STREAM].median
    create, streamed = cpu[CREATE_FLOOR].median, cpu[STREAM_FLOOR].median

    def row(name: str, against: str | None) -> list[str]:
        ratio = "-" if against is None else f"{cpu[name].median / cpu[against].median:.2f}"
        latencies = "-" if name not in lat else shown(lat[name])
        no_gc = "-" if name not in quiet else shown(quiet[name])
        return [name, cpu[name].show(), ratio, latencies, no_gc]

    report.section(
        "11. Streaming: `loop.stream()` against `run()` and against hand-written loops",
        INTRO,
        [
            "variant",
            "CPU µs per turn",
            "ratio (to its floor)",
            "delta latency median / p99 / max (ms)",
            "the same, collector off (diagnostic)",
        ],
        [
            row(CREATE_FLOOR, None),
            row(RUN, CREATE_FLOOR),
            row(DROP_FLOOR, None),
            row(STREAM_FLOOR, None),
            row(SDK_STREAM, STREAM_FLOOR),
            row(STREAM, STREAM_FLOOR),
        ],
    )
    literal = stream / run
    report.target(
        f"issue, literally: stream() ≤ {CPU_TARGET:.2f}x the CPU per turn of run() (section 11)",
        f"{literal:.2f}x ({stream:,.1f} vs {run:,.1f} µs); a streamed turn pays the scripted model's "
        f"stream events, which no loop avoids: the minimal floors' own ratio is {streamed / create:.2f}x",
        "met" if literal <= CPU_TARGET else "not met",
    )
    against_floor = stream / streamed
    report.target(
        f"stream() ≤ {CPU_TARGET:.2f}x the CPU per turn of a hand-written streaming loop (section 11)",
        f"{against_floor:.2f}x ({stream:,.1f} vs {streamed:,.1f} µs); the SDK's `messages.stream` "
        f"helper, which `loop.stream()` reads, costs {cpu[SDK_STREAM].median / streamed:.2f}x the floor "
        f"on its own ({cpu[SDK_STREAM].median:,.1f} µs)",
        "met" if against_floor <= CPU_TARGET else "not met",
    )
    added, floor_added = stream - run, streamed - create
    report.target(
        f"what streaming adds to boundloop ≤ {CPU_TARGET:.2f}x what it adds to a hand-written loop "
        "(section 11)",
        f"{added / floor_added:.2f}x (stream() - run() {added:,.1f} µs, "
        f"floor (a) - (b) {floor_added:,.1f} µs per turn)",
        "met" if added <= CPU_TARGET * floor_added else "not met",
    )
    ours = lat[STREAM]
    worst = max(ours["median"], ours["p99"])
    report.target(
        f"a delta reaches the consumer ≤ {LATENCY_TARGET_MS:g} ms after the scripted model hands it over "
        "(section 11)",
        f"median {ours['median']:.3f} ms, p99 {ours['p99']:.3f} ms, max {ours['max']:.3f} ms "
        f"({ours['count']:,.0f} deltas; floor (a): p99 {lat[STREAM_FLOOR]['p99']:.3f} ms, "
        f"max {lat[STREAM_FLOOR]['max']:.3f} ms); collector off: p99 {quiet[STREAM]['p99']:.3f} ms, "
        f"max {quiet[STREAM]['max']:.3f} ms",
        "met" if worst <= LATENCY_TARGET_MS else "not met",
    )


if __name__ == "__main__":
    run_alone(workload)
