"""`python -m benchmarks.transcript [--quick]`: a turn's cost as the transcript grows, on the SDK path.

Workload 8 of the suite (`python -m benchmarks`), runnable on its own. The real
`anthropic.AsyncAnthropic` over an in-process `httpx2.MockTransport` that answers at once: 200
turns of a short text and one `tool_use` of an instant tool, then the answer. The CPU clock
(`time.thread_time()`) is read as each `messages.create` call starts and returns; a turn is the
time from one call's start to the next one's, and of that, *outside the SDK* is the time from
one call's return to the next call's start: the loop's own work (and the tool's). Reported: the
median turn around turn 10 (turns 6-15) and around turn 200 (turns 191-200), median [min-max]
over the repeats, and their ratio.

The SDK itself copies and JSON-encodes the whole request body on every call, so even a
hand-written loop's turn grows with the transcript. The floors measure that in the same run:

- *floor: dicts* keeps the transcript as plain dicts, the assistant turn dumped once (the
  minimal loop boundloop is held to);
- *floor: SDK blocks* appends `response.content` as it is (the SDK's objects, which the SDK
  dumps again on every later call: what a transcript of objects costs).
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Final, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import anthropic
import httpx2
from anthropic.types import Message

from benchmarks._fixtures import FLOORS, MODEL, boundloop, handlers_of, run_boundloop, run_floor
from benchmarks._harness import Spread, settle
from benchmarks.suite import Report, run_alone
from boundloop import tool
from boundloop.testing import parse_message

TURNS: Final = 200
EARLY: Final = range(6, 16)
"""Turns 6-15: around turn 10 (1-based turn numbers)."""
LATE: Final = range(191, 201)
"""Turns 191-200: around turn 200."""
TARGET: Final = 1.3
REPEAT: Final = 9
DICTS: Final = "floor: dicts (dumped once)"
BLOCKS: Final = "floor: SDK blocks in the transcript"
LOOP: Final = "boundloop: metrics + trace"
NO_SDK_DICTS: Final = "no SDK: floor: dicts"
NO_SDK_LOOP: Final = "no SDK: boundloop: metrics + trace"


async def ping(key: str) -> str:
    """An instant async tool: returns its argument."""
    return key


def bodies(turns: int) -> list[bytes]:
    """`turns` responses of a short text and one `tool_use`, then the answer, encoded once."""
    usage = {"input_tokens": 100, "output_tokens": 20}
    head = {"type": "message", "role": "assistant", "model": MODEL, "stop_sequence": None, "usage": usage}
    encoded = [
        json.dumps(
            {
                **head,
                "id": f"msg_01T{turn:04d}",
                "stop_reason": "tool_use",
                "content": [
                    {"type": "text", "text": f"Looking up key {turn}."},
                    {
                        "type": "tool_use",
                        "id": f"toolu_01T{turn:04d}",
                        "name": "lookup_0",
                        "input": {"key": f"key-{turn}"},
                    },
                ],
            }
        ).encode()
        for turn in range(turns)
    ]
    done = {
        **head,
        "id": "msg_01Tdone",
        "stop_reason": "end_turn",
        "content": [{"type": "text", "text": "done"}],
    }
    return [*encoded, json.dumps(done).encode()]


class Clocked:
    """A zero-latency model, with the CPU clock read around each call: the real SDK client over
    a transport serving the encoded bodies, or (`parsed`) those bodies as `Message`s parsed
    before the clock starts, with no SDK in the way."""

    def __init__(self, encoded: Sequence[bytes], parsed: Sequence[Message] | None = None) -> None:
        self._bodies = encoded
        self._parsed = parsed
        self._served = 0
        self.starts: list[float] = []
        self.ends: list[float] = []
        self._sdk = anthropic.AsyncAnthropic(
            api_key="test",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self._handler)),
        )
        self.messages = self

    async def _handler(self, request: httpx2.Request) -> httpx2.Response:
        body = self._bodies[self._served]
        self._served += 1
        return httpx2.Response(
            200, content=body, headers={"content-type": "application/json", "request-id": "req_bench"}
        )

    async def create(self, **request: Any) -> Message:
        """`messages.create` of the SDK client, timed."""
        self.starts.append(time.thread_time())
        if self._parsed is None:
            response = cast(Message, await self._sdk.messages.create(**request))
        else:
            response = self._parsed[self._served]
            self._served += 1
        self.ends.append(time.thread_time())
        return response

    def turns_us(self) -> tuple[list[float], list[float]]:
        """µs of CPU per turn, whole and outside the SDK: turn n (1-based) runs from call n's start
        to call n + 1's, and is outside the SDK from call n's return to call n + 1's start."""
        whole = [
            (later - earlier) * 1e6 for earlier, later in zip(self.starts, self.starts[1:], strict=False)
        ]
        outside = [(start - end) * 1e6 for end, start in zip(self.ends, self.starts[1:], strict=False)]
        return whole, outside


Variant = Callable[[Clocked], Awaitable[object]]


def variants(turns: int) -> dict[str, Variant]:
    """The two floors and boundloop, each a function of the client it runs on."""
    handlers = handlers_of(ping, 1)
    tools = [tool(name="lookup_0", description="Look up a key (tool 0).")(ping)]
    params: Any = [item.to_param() for item in tools]

    async def dicts(client: Clocked) -> object:
        return await run_floor(FLOORS["gather"], client, handlers, "go", tools=params, dump=True)

    async def blocks(client: Clocked) -> object:
        return await run_floor(FLOORS["gather"], client, handlers, "go", tools=params)

    async def loop(client: Clocked) -> object:
        return await run_boundloop(boundloop(client, tools, steps=turns + 2, metrics=True), "go")

    return {DICTS: dicts, BLOCKS: blocks, LOOP: loop, NO_SDK_DICTS: dicts, NO_SDK_LOOP: loop}


@dataclasses.dataclass(frozen=True, slots=True)
class Growth:
    """µs per turn around turn 10 and around turn 200, over the repeats."""

    early: Spread
    late: Spread

    @property
    def ratio(self) -> float:
        """Turn 200's cost over turn 10's (medians)."""
        return self.late.median / self.early.median


@dataclasses.dataclass(frozen=True, slots=True)
class Figures:
    """One variant: the whole turn, and its part outside the SDK."""

    whole: Growth
    outside: Growth


def window(per_turn: Sequence[float], turns: range) -> float:
    """The median turn in `turns` (1-based)."""
    return statistics.median(per_turn[turn - 1] for turn in turns)


def growth(runs: Sequence[Sequence[float]]) -> Growth:
    """Around turn 10 and turn 200, from each run's turns."""
    return Growth(
        Spread.of([window(turns, EARLY) for turns in runs]),
        Spread.of([window(turns, LATE) for turns in runs]),
    )


async def measure(quick: bool) -> dict[str, Figures]:
    """Every variant, interleaved, after one untimed run of each."""
    encoded = bodies(TURNS)
    parsed = [parse_message(json.loads(body)) for body in encoded]
    runs = variants(TURNS)

    def client(name: str) -> Clocked:
        return Clocked(encoded, parsed if name.startswith("no SDK") else None)

    for name, run in runs.items():
        await run(client(name))
    settle()
    samples: dict[str, list[tuple[list[float], list[float]]]] = {name: [] for name in runs}
    names = list(runs)
    for index in range(3 if quick else REPEAT):
        for name in names if index % 2 == 0 else reversed(names):
            clocked = client(name)
            await runs[name](clocked)
            samples[name].append(clocked.turns_us())
    return {
        name: Figures(growth([whole for whole, _ in pairs]), growth([outside for _, outside in pairs]))
        for name, pairs in samples.items()
    }


HEADER: Final = [
    "variant",
    "CPU µs, turn 10",
    "CPU µs, turn 200",
    "turn 200 / turn 10",
    "outside the SDK: turn 10",
    "turn 200",
    "turn 200 / turn 10",
]
INTRO: Final = (
    f"The real AsyncAnthropic over `httpx2.MockTransport` answering at once: {TURNS} turns of a short text "
    "and one `tool_use` of an instant tool, then the answer (boundloop: metrics and trace on). The CPU clock "
    "(`time.thread_time()`) is read as each `messages.create` call starts and returns: a turn runs from one "
    "call's start to the next one's (the SDK building, copying and JSON-encoding the request, the "
    "transport, the SDK parsing the response, then the loop's work and the tool); *outside the SDK* is "
    "from one call's return to the next call's start: the loop's own work. *Turn 10* is the median of "
    f"turns {EARLY.start}-{EARLY.stop - 1}, *turn 200* of turns {LATE.start}-{LATE.stop - 1}; median "
    f"[min-max] of {REPEAT} runs. The SDK copies and encodes the whole request body on every call, so "
    "every loop's turn grows with the transcript: *floor: dicts* is the minimal loop (the transcript "
    "as dicts, each assistant turn dumped once), *floor: SDK blocks* keeps the SDK's content blocks, "
    "which the SDK dumps again on every call. The *no SDK* rows serve the same responses as `Message`s "
    "parsed before the clock starts: the loop's own work per turn, without the SDK's. Outside the SDK, "
    "on the SDK path, a turn still grows a little for every loop alike: the SDK's copy of the body "
    "churns the caches and the allocator, and the work after it runs colder."
)


def rows(figures: dict[str, Figures]) -> list[list[str]]:
    """The table's rows."""
    return [
        [
            name,
            item.whole.early.show(),
            item.whole.late.show(),
            f"{item.whole.ratio:.2f}",
            item.outside.early.show(),
            item.outside.late.show(),
            f"{item.outside.ratio:.2f}",
        ]
        for name, item in figures.items()
    ]


async def workload(config: object, report: Report) -> None:
    """The suite's workload 8: the table and two targets."""
    figures = await measure(quick="--quick" in sys.argv)
    report.section(
        "8. A long transcript: a turn at turn 10 and at turn 200 (SDK path)", INTRO, HEADER, rows(figures)
    )
    loop, floor = figures[LOOP], figures[DICTS]
    report.target(
        f"SDK path: a turn at turn {TURNS} ≤ {TARGET}x a turn at turn 10 (metrics + trace; section 8)",
        f"{loop.whole.ratio:.2f}x CPU ({loop.whole.late.median:,.1f} vs {loop.whole.early.median:,.1f} µs); "
        f"the dicts floor: {floor.whole.ratio:.2f}x ({floor.whole.late.median:,.1f} vs "
        f"{floor.whole.early.median:,.1f} µs): the SDK's own copy and encoding of the whole body",
        "met" if loop.whole.ratio <= TARGET else "not met",
    )
    own = figures[NO_SDK_LOOP].whole
    report.target(
        f"boundloop's own work per turn (no SDK) at turn {TURNS} ≤ {TARGET}x at turn 10 (section 8)",
        f"{own.ratio:.2f}x CPU ({own.late.median:,.1f} vs {own.early.median:,.1f} µs); outside the SDK on "
        f"the SDK path: {loop.outside.ratio:.2f}x (the dicts floor: {floor.outside.ratio:.2f}x)",
        "met" if own.ratio <= TARGET else "not met",
    )


if __name__ == "__main__":
    run_alone(workload)
