"""The benchmark suite: five workloads, boundloop against two hand-written floors in the same run.

Usage::

    .venv/bin/python -m benchmarks [--quick] [--write]
    .venv/bin/python benchmarks/run.py [--quick] [--write]      # the same

1. per turn — 50 turns x 1, 3 and 5 instant tools on a zero-latency model serving pre-parsed
   `Message`s; boundloop with metrics (a fresh registry) and trace, and with `metrics=None`.
2. parallel — 2 turns of 5 tools that each sleep 50 ms, then an answer: wall time vs 100 ms.
3. concurrency — 1,000 and 10,000 concurrent runs of 5 turns x 2 tools in one task group, on a
   shared `AgentLoop` and a shared zero-latency client serving each run its own script.
4. start-up — `AgentLoop(...)` construction, and a one-turn `run()` (a single `end_turn`).
5. SDK path — the per-turn workload through the real `anthropic.AsyncAnthropic` over an
   in-process `httpx2.MockTransport`, for boundloop and for the floors alike.
6. tracing — the per-turn workload and a one-turn run with OpenTelemetry tracing off (no
   provider; `tracing=None`) and on (an SDK `TracerProvider`, batch processor).
7. one huge batch — 1,000, 10,000 and 50,000 calls in one response: µs per call, and the time
   past `timeout_s` when the calls never finish (`benchmarks/batch.py`; `python -m benchmarks.batch`).
8. a long transcript — 200 turns on the SDK path: a turn's cost at turn 10 and at turn 200, and
   the loop's own part of it (`benchmarks/transcript.py`; `python -m benchmarks.transcript`).
9. prompt caching — 30 turns x 3 parallel tools over a 20,000-token prefix on the SDK path, billed
   by a fake API simulating the API's cache rules: the share of cache reads and the cost with
   caching on vs off (`benchmarks/caching.py`; `python -m benchmarks.caching`).
10. compaction — 500 turns with server-side compaction on a model that compacts like the API: the
    largest request input, broken requests, an identical replay (`python -m benchmarks.compaction`).
11. streaming — `loop.stream()` against `run()` on the scripted model: CPU per turn, and a delta's
    latency to the consumer (`benchmarks/streaming.py`; `python -m benchmarks.streaming`).
12. budget pools — a pool's reservation per model call on the memory, SQLite and PostgreSQL stores
    against a run without pools, and 1,000 concurrent runs sharing one PostgreSQL pool
    (`benchmarks/pools.py`; `python -m benchmarks.pools`).

Prints Markdown tables and the targets; `--write` also writes `benchmarks/RESULTS.md`.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import sys
import time
import tracemalloc
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, cast

import anthropic
import anyio
import httpx2
from anthropic.types import Message, ToolUnionParam
from prometheus_client import CollectorRegistry

from benchmarks._fixtures import (
    FLOORS,
    MAX_TOKENS,
    MODEL,
    FastClient,
    Handler,
    KeyedClient,
    body_bytes,
    boundloop,
    handlers_of,
    instant,
    raw_script,
    run_boundloop,
    run_floor,
    script,
    script_for_run,
    sleepy,
    tools_of,
)
from benchmarks._harness import Runner, Timing, compare, machine, settle
from boundloop import AgentLoop, Budget, LoopMetrics, Observers
from boundloop.model import Model
from boundloop.otel import TraceSettings

RESULTS: Final = Path(__file__).with_name("RESULTS.md")
GATHER: Final = "floor: asyncio.gather"
ANYIO: Final = "floor: anyio task group"
METRICS: Final = "boundloop: metrics + trace"
NO_METRICS: Final = "boundloop: trace, metrics=None"
DUMPED: Final = "floor: asyncio.gather, blocks as dicts"


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    """How much of each workload to run."""

    turns: int = 50
    turn_repeat: int = 30
    parallel_repeat: int = 10
    sizes: tuple[int, ...] = (1_000, 10_000)
    concurrency_repeat: int = 5
    traced_up_to: int = 1_000
    startup_repeat: int = 60
    startup_batch: int = 20
    sdk_turns: int = 20
    sdk_repeat: int = 20


QUICK: Final = Config(
    turn_repeat=10,
    parallel_repeat=3,
    sizes=(1_000,),
    concurrency_repeat=2,
    startup_repeat=15,
    sdk_repeat=6,
)


@dataclasses.dataclass(frozen=True, slots=True)
class Target:
    """One of the issue's targets and what this run measured for it."""

    name: str
    measured: str
    verdict: str


@dataclasses.dataclass(slots=True)
class Report:
    """The sections of the report, as Markdown, and the targets."""

    sections: list[str] = dataclasses.field(default_factory=list[str])
    targets: list[Target] = dataclasses.field(default_factory=list[Target])

    def section(self, title: str, intro: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        """Add a table under a heading, and print it at once."""
        lines = [f"### {title}", "", intro, "", "| " + " | ".join(header) + " |"]
        lines.append("|" + "|".join("---" if index == 0 else "---:" for index in range(len(header))) + "|")
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        text = "\n".join(lines) + "\n"
        self.sections.append(text)
        self.sections.sort(key=lambda section: section.split(" ", 2)[1])  # by number: "### 1b. ..."
        print(text, flush=True)

    def target(self, name: str, measured: str, verdict: str) -> None:
        """Record a target's figure."""
        self.targets.append(Target(name, measured, verdict))


def run_alone(workload: Callable[[object, Report], Awaitable[None]]) -> None:
    """One workload on its own (`python -m benchmarks.<name>`): its table, then its targets."""
    report = Report()
    anyio.run(workload, None, report)
    for target in report.targets:
        print(f"- {target.name}: {target.measured} — **{target.verdict}**")


def verdict(cpu_ok: bool, wall_ok: bool) -> str:
    """Whether a target is met on both clocks, one of them, or neither."""
    return {
        (True, True): "met",
        (True, False): "met on CPU, not on wall",
        (False, True): "met on wall, not on CPU",
        (False, False): "not met",
    }[(cpu_ok, wall_ok)]


def timing_row(name: str, timing: Timing, floors: dict[str, Timing], digits: int = 1) -> list[str]:
    """A variant's row: CPU and wall spreads, then the ratios to both floors (CPU / wall)."""
    row = [name, timing.cpu.show(digits), timing.wall.show(digits)]
    for floor in (GATHER, ANYIO):
        cpu, wall = timing.ratio(floors[floor])
        row.append(f"{cpu:.2f} / {wall:.2f}")
    return row


TIMING_HEADER: Final = (
    "variant",
    "CPU {unit}",
    "wall {unit}",
    "x gather (CPU / wall)",
    "x anyio (CPU / wall)",
)


def header(unit: str) -> list[str]:
    """The timing table's header in `unit`."""
    return [column.format(unit=unit) for column in TIMING_HEADER]


def floor_variants(
    client: FastClient, handlers: dict[str, Handler], goal: str = "go"
) -> dict[str, Callable[[], Awaitable[object]]]:
    """Both floors on one client, the script served from the start on every call."""
    variants: dict[str, Callable[[], Awaitable[object]]] = {}
    for name, batch in ((GATHER, FLOORS["gather"]), (ANYIO, FLOORS["anyio"])):

        async def run(batch: Any = batch) -> object:
            client.reset()
            return await run_floor(batch, client, handlers, goal)

        variants[name] = run
    return variants


def loop_variant(client: FastClient, loop: AgentLoop, goal: str = "go") -> Runner:
    """A run of `loop` on its client, the script served from the start."""

    async def run() -> object:
        client.reset()
        return await run_boundloop(loop, goal)

    return run


def standard_variants(responses: Sequence[Message], handler: Handler, tools: int) -> dict[str, Runner]:
    """The floors, boundloop with metrics and trace, and boundloop without metrics, each on its own client."""
    steps = len(responses) + 1
    variants = floor_variants(FastClient(responses), handlers_of(handler, tools))
    for name, metrics in ((METRICS, True), (NO_METRICS, False)):
        client = FastClient(responses)
        variants[name] = loop_variant(
            client, boundloop(client, tools_of(handler, tools), steps=steps, metrics=metrics)
        )
    return variants


# -- 1. per turn ---------------------------------------------------------------------------


async def per_turn(config: Config, report: Report) -> None:
    """Per-turn overhead with 1, 3 and 5 instant tools per batch; µs per extra tool; metrics' share."""
    by_tools: dict[int, dict[str, Timing]] = {}
    for tools in (3, 1, 5):
        variants = standard_variants(script(config.turns, tools), instant, tools)
        settle()
        by_tools[tools] = await compare(variants, repeat=config.turn_repeat, factor=1e6 / config.turns)
    rows: list[list[str]] = []
    for tools in (1, 3, 5):
        figures = by_tools[tools]
        rows += [timing_row(f"{name}, {tools} tool(s)", figures[name], figures) for name in figures]
    report.section(
        "1. Per turn: zero-latency model, instant tools",
        f"{config.turns} turns x 1, 3 or 5 instant async tools, then an answer; µs per turn (run time / "
        f"{config.turns}), median [min-max] of {config.turn_repeat} interleaved repeats.",
        header("µs / turn"),
        rows,
    )
    extra = {
        name: (
            (by_tools[5][name].cpu.median - by_tools[1][name].cpu.median) / 4,
            (by_tools[5][name].wall.median - by_tools[1][name].wall.median) / 4,
        )
        for name in by_tools[1]
    }
    report.section(
        "1b. Per extra tool call in a batch",
        "(median per turn with 5 tools - with 1 tool) / 4, µs.",
        ["variant", "CPU µs / extra call", "wall µs / extra call"],
        [[name, f"{cpu:.1f}", f"{wall:.1f}"] for name, (cpu, wall) in extra.items()],
    )
    three = by_tools[3]
    for floor, limit in ((GATHER, 8.0), (ANYIO, 3.2)):
        cpu, wall = three[METRICS].ratio(three[floor])
        report.target(
            f"per turn, metrics + trace ≤ {limit:g}x {floor.removeprefix('floor: ')} floor (3 tools)",
            f"{cpu:.2f}x CPU, {wall:.2f}x wall ({three[METRICS].cpu.median:.0f} / "
            f"{three[METRICS].wall.median:.0f} µs vs {three[floor].cpu.median:.0f} / "
            f"{three[floor].wall.median:.0f} µs)",
            verdict(cpu <= limit, wall <= limit),
        )
    cpu_cost, wall_cost = (ratio - 1 for ratio in three[METRICS].ratio(three[NO_METRICS]))
    report.target(
        "metrics < 10 % of the loop's per-turn overhead (3 tools)",
        f"+{100 * cpu_cost:.1f} % CPU, +{100 * wall_cost:.1f} % wall (metrics + trace vs metrics=None)",
        verdict(cpu_cost < 0.10, wall_cost < 0.10),
    )
    cpu_extra, wall_extra = extra[METRICS]
    report.target(
        "per extra tool call in a batch ≤ 20 µs (metrics + trace)",
        f"{cpu_extra:.1f} µs CPU, {wall_extra:.1f} µs wall",
        verdict(cpu_extra <= 20, wall_extra <= 20),
    )


# -- 2. parallel ---------------------------------------------------------------------------


async def parallel(config: Config, report: Report) -> None:
    """Two turns of five 50 ms tools: the batch must take as long as its slowest call."""
    variants = standard_variants(script(2, 5), sleepy, 5)
    del variants[NO_METRICS]
    settle()
    figures = await compare(variants, repeat=config.parallel_repeat, factor=1e3)
    report.section(
        "2. Parallel tools: 2 turns x 5 tools sleeping 50 ms",
        f"Ideal: 100 ms of wall time. ms per run, median [min-max] of {config.parallel_repeat} repeats; "
        "the CPU column is the work around the sleeps.",
        [*header("ms / run")[:3], "wall - 100 ms"],
        [
            [name, timing.cpu.show(2), timing.wall.show(2), f"{timing.wall.median - 100:+.2f} ms"]
            for name, timing in figures.items()
        ],
    )
    excess = figures[METRICS].wall.median - 100
    report.target(
        "parallel tools within 5 ms of 100 ms",
        f"{figures[METRICS].wall.median:.2f} ms wall ({excess:+.2f} ms); "
        f"floors {figures[GATHER].wall.median:.2f} / {figures[ANYIO].wall.median:.2f} ms",
        "met" if abs(excess) <= 5 else "not met",
    )


# -- 3. concurrency ------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, slots=True)
class Memory:
    """Bytes per run, traced by tracemalloc."""

    peak: float
    """Peak while the runs were in flight, over what was allocated before they started."""
    retained: float
    """Still allocated after the runs, every result kept (state, transcript, trace), after a collection."""
    leftover: float
    """Still allocated once the results are dropped too: what runs leave behind."""


async def traced(runs: Callable[[], Awaitable[list[object]]], count: int) -> Memory:
    """Run once under tracemalloc (not timed: tracing slows every allocation)."""
    gc.collect()
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        results = await runs()
        gc.collect()
        retained, peak = tracemalloc.get_traced_memory()
        del results
        gc.collect()
        leftover = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return Memory((peak - base) / count, (retained - base) / count, (leftover - base) / count)


def concurrent(count: int, one: Callable[[str], Awaitable[object]]) -> Callable[[], Awaitable[list[object]]]:
    """`count` runs of `one` in one task group; the results are returned (kept)."""

    async def runs() -> list[object]:
        results: list[object] = [None] * count

        async def run(index: int) -> None:
            results[index] = await one(f"run {index}")

        async with anyio.create_task_group() as group:
            for index in range(count):
                group.start_soon(run, index)
        return results

    return runs


def concurrency_variants(
    count: int, *, fresh: bool = False
) -> dict[str, Callable[[], Awaitable[list[object]]]]:
    """Floors and boundloop (metrics + trace), all on one keyed client with a script per run
    (`fresh`: each response parsed from its JSON when served, as a deployment's are)."""
    template = script(5, 2)
    scripts = {f"run {index}": script_for_run(template, index) for index in range(count)}
    client = KeyedClient(scripts, fresh=fresh)
    handlers = handlers_of(instant, 2)
    loop = boundloop(client, tools_of(instant, 2), steps=7, metrics=True)
    variants: dict[str, Callable[[], Awaitable[list[object]]]] = {}
    for name, batch in ((GATHER, FLOORS["gather"]), (ANYIO, FLOORS["anyio"])):

        async def floor(goal: str, batch: Any = batch) -> object:
            return await run_floor(batch, client, handlers, goal)

        variants[name] = concurrent(count, floor)

    async def loop_run(goal: str) -> object:
        return await run_boundloop(loop, goal)

    variants[METRICS] = concurrent(count, loop_run)
    return variants


class KeyedTransport:
    """A zero-latency Messages API behind `httpx2.MockTransport` for many concurrent runs: each
    run (told by its goal) is served its own pre-encoded bodies, its turn told by the request's
    transcript length, as `KeyedClient` does; the SDK parses every body into fresh objects."""

    def __init__(self, bodies: Mapping[str, Sequence[bytes]]) -> None:
        self._bodies = bodies

    async def handler(self, request: httpx2.Request) -> httpx2.Response:
        """Answer one request with its run's next body."""
        messages = json.loads(request.content)["messages"]
        body = self._bodies[messages[0]["content"]][len(messages) // 2]
        return httpx2.Response(
            200, content=body, headers={"content-type": "application/json", "request-id": "req_bench"}
        )

    def client(self) -> anthropic.AsyncAnthropic:
        """The real SDK client, talking only to this transport."""
        return anthropic.AsyncAnthropic(
            api_key="test",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handler)),
        )


def sdk_concurrency_variants(count: int) -> dict[str, Callable[[], Awaitable[list[object]]]]:
    """`concurrency_variants`' runs (fresh) through the real SDK client: the floors and boundloop
    (metrics + trace) on one keyed transport, the floors sending the same tool definitions."""
    template = script(5, 2)
    bodies = {
        f"run {index}": body_bytes(
            [message.model_dump(mode="json") for message in script_for_run(template, index)]
        )
        for index in range(count)
    }
    transport = KeyedTransport(bodies)
    client: Model = transport.client()
    tools = tools_of(instant, 2)
    params: list[ToolUnionParam] = [tool.to_param() for tool in tools]
    handlers = handlers_of(instant, 2)
    loop = boundloop(client, tools, steps=7, metrics=True)
    variants: dict[str, Callable[[], Awaitable[list[object]]]] = {}
    for name, batch in ((GATHER, FLOORS["gather"]), (ANYIO, FLOORS["anyio"])):

        async def floor(goal: str, batch: Any = batch) -> object:
            return await run_floor(batch, client, handlers, goal, tools=params)

        variants[name] = concurrent(count, floor)

    async def loop_run(goal: str) -> object:
        return await run_boundloop(loop, goal)

    variants[METRICS] = concurrent(count, loop_run)
    return variants


async def sdk_memory(report: Report, count: int = 1_000) -> None:
    """Memory per run of `count` concurrent runs on the SDK path: boundloop against the
    hand-written SDK loops, traced in the same run."""
    for variant in sdk_concurrency_variants(20).values():  # warm-up
        await variant()
    memory = {name: await traced(runs, count) for name, runs in sdk_concurrency_variants(count).items()}
    report.section(
        "3b. Memory on the SDK path: concurrent runs through the real AsyncAnthropic",
        f"{count:,} concurrent runs of 5 turns x 2 instant tools, as in 3, each request through the SDK "
        "over `httpx2.MockTransport` (each run served its own bodies, parsed by the SDK into fresh "
        "objects); the floors keep the SDK's content blocks in their transcript. KiB per run, traced "
        "by tracemalloc as in 3.",
        ["variant", "peak KiB/run", "retained KiB/run", "leftover KiB/run", "x gather (peak)"],
        [
            [
                name,
                kib(figure.peak / 1024),
                kib(figure.retained / 1024),
                kib(figure.leftover / 1024),
                f"{figure.peak / memory[GATHER].peak:.2f}",
            ]
            for name, figure in memory.items()
        ],
    )
    ours, hand = memory[METRICS], memory[GATHER]
    report.target(
        "memory per run on the SDK path at 1,000 concurrent ≤ 40 KiB peak, ≤ 1.3x the hand-written SDK loop",
        f"{ours.peak / 1024:.1f} KiB peak, {ours.peak / hand.peak:.2f}x the gather SDK loop's "
        f"({hand.peak / 1024:.1f} KiB)",
        "met" if ours.peak <= 40 * 1024 and ours.peak <= 1.3 * hand.peak else "not met",
    )


def kib(value: float | None) -> str:
    """KiB per run, or a dash for a figure not taken."""
    return "—" if value is None else f"{value:.1f}"


async def concurrency(config: Config, report: Report) -> None:
    """Many concurrent runs on one loop: total time, runs/s, memory per run; the same for the floors."""
    for variant in concurrency_variants(50).values():  # warm-up
        await variant()
    rows: list[list[str]] = []
    for count in config.sizes:
        variants = concurrency_variants(count)
        settle()
        repeat = config.concurrency_repeat if count <= 1_000 else 1
        figures = await compare(variants, repeat=repeat, warmup=0)
        traced_here = count <= config.traced_up_to
        del variants
        # Memory with fresh responses: what a run keeps of the model's responses is its own.
        fresh = concurrency_variants(count, fresh=True) if traced_here else {}
        memory = {name: await traced(runs, count) for name, runs in fresh.items()}
        del fresh
        for name, timing in figures.items():
            per_run = memory.get(name)
            rows.append(
                [
                    f"{name}, {count:,} runs",
                    timing.cpu.show(3),
                    timing.wall.show(3),
                    f"{count / timing.wall.median:,.0f}",
                    kib(None if per_run is None else per_run.peak / 1024),
                    kib(None if per_run is None else per_run.retained / 1024),
                    kib(None if per_run is None else per_run.leftover / 1024),
                    "{:.2f} / {:.2f}".format(*timing.ratio(figures[GATHER])),
                    "{:.2f} / {:.2f}".format(*timing.ratio(figures[ANYIO])),
                ]
            )
        if count == 1_000:
            loop, floor = figures[METRICS], figures[GATHER]
            report.target(
                "1,000 concurrent runs ≤ 0.5 s",
                f"{loop.wall.median:.3f} s wall, {loop.cpu.median:.3f} s CPU "
                f"(gather floor {floor.wall.median:.3f} s, anyio floor {figures[ANYIO].wall.median:.3f} s)",
                verdict(loop.cpu.median <= 0.5, loop.wall.median <= 0.5),
            )
            ours, hand = memory[METRICS], memory[GATHER]
            report.target(
                "memory per run at 1,000 concurrent ≤ 40 KiB peak, fresh responses, full trace kept",
                f"{ours.peak / 1024:.1f} KiB tracemalloc peak in flight; "
                f"{ours.retained / 1024:.1f} KiB retained with the result kept",
                "met" if ours.peak <= 40 * 1024 else "not met",
            )
            report.target(
                "memory per run at 1,000 concurrent ≤ 1.3x the hand-written loop's (peak, fresh responses)",
                f"{ours.peak / hand.peak:.2f}x ({ours.peak / 1024:.1f} vs {hand.peak / 1024:.1f} KiB)",
                "met" if ours.peak <= 1.3 * hand.peak else "not met",
            )
    if 1_000 in config.sizes and config.traced_up_to >= 1_000:
        await sdk_memory(report)
    report.section(
        "3. Concurrency: runs of 5 turns x 2 instant tools in one task group",
        "Seconds for all runs (repeats: "
        f"{config.concurrency_repeat} at 1,000, 1 above), runs/s from the median wall time. Memory in KiB "
        "per run, traced by tracemalloc in a separate, untimed pass (tracing slows every allocation): "
        "*peak* = tracemalloc's peak while the runs are in flight, over what was allocated before they "
        "started; *retained* = still allocated after all runs with every result kept (boundloop: the "
        "`LoopResult` with state, transcript and full trace; floors: the transcript), after a "
        "collection; *leftover* = still allocated once the results are dropped too. In the traced pass "
        "each response is parsed from its JSON when the client serves it, as a client parses what "
        "the API sends, so what a run keeps of its responses is counted. "
        + (
            ""
            if config.traced_up_to >= max(config.sizes)
            else f"Not traced above {config.traced_up_to:,} runs (that takes minutes; `--trace-all` does it)."
        ),
        [
            "variant",
            "CPU s",
            "wall s",
            "runs/s",
            "peak KiB/run",
            "retained KiB/run",
            "leftover KiB/run",
            "x gather (CPU / wall)",
            "x anyio (CPU / wall)",
        ],
        rows,
    )


def batched(run: Runner, batch: int) -> Runner:
    """`run` `batch` times in a row, as one runner: short runs timed in batches."""

    async def runs() -> object:
        for _ in range(batch):
            await run()
        return None

    return runs


# -- 4. start-up ---------------------------------------------------------------------------


async def startup(config: Config, report: Report) -> None:
    """What building a loop costs, and what a run that is a single answer costs."""
    batch = config.startup_batch
    responses = script(0, 0)
    tools = tools_of(instant, 3)
    shared = LoopMetrics(registry=CollectorRegistry())

    def builder(metrics: LoopMetrics | None) -> Runner:
        client = FastClient(responses)

        async def build() -> object:
            for _ in range(batch):
                AgentLoop(
                    client,
                    model=MODEL,
                    tools=tools,
                    budget=Budget(max_steps=2),
                    observers=Observers(metrics=metrics),
                )
            return None

        return build

    build = await compare(
        {
            "AgentLoop(...), 3 tools, metrics=None": builder(None),
            "AgentLoop(...), 3 tools, shared LoopMetrics": builder(shared),
        },
        repeat=config.startup_repeat,
        factor=1e6 / batch,
    )

    variants = {name: batched(run, batch) for name, run in standard_variants(responses, instant, 3).items()}
    settle()
    one_turn = await compare(variants, repeat=config.startup_repeat, factor=1e6 / batch)
    rows = [[name, timing.cpu.show(), timing.wall.show(), "—", "—"] for name, timing in build.items()]
    rows += [timing_row(f"one-turn run(): {name}", timing, one_turn) for name, timing in one_turn.items()]
    report.section(
        "4. Start-up",
        f"µs per construction or per run (batches of {batch}), median [min-max] of {config.startup_repeat} "
        "repeats. The one-turn run is a single `end_turn` answer on a zero-latency model.",
        header("µs"),
        rows,
    )


# -- 5. SDK path ---------------------------------------------------------------------------


class Transport:
    """A zero-latency Messages API behind `httpx2.MockTransport`: pre-encoded bodies, in order."""

    def __init__(self, bodies: Sequence[bytes]) -> None:
        self._bodies = bodies
        self._next = 0

    def reset(self) -> None:
        """Serve the script again from the start."""
        self._next = 0

    async def handler(self, request: httpx2.Request) -> httpx2.Response:
        """Answer one request with the next body."""
        body = self._bodies[self._next]
        self._next += 1
        return httpx2.Response(
            200, content=body, headers={"content-type": "application/json", "request-id": "req_bench"}
        )

    def client(self) -> anthropic.AsyncAnthropic:
        """The real SDK client, talking only to this transport."""
        return anthropic.AsyncAnthropic(
            api_key="test",
            max_retries=0,
            http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(self.handler)),
        )


def sdk_variants(turns: int) -> dict[str, Runner]:
    """The per-turn workload (3 tools) through the real SDK client: floors and boundloop alike."""
    bodies = body_bytes(raw_script(turns, 3))
    tools = tools_of(instant, 3)
    params: list[ToolUnionParam] = [tool.to_param() for tool in tools]
    handlers = handlers_of(instant, 3)
    variants: dict[str, Runner] = {}
    for name, batch in ((GATHER, FLOORS["gather"]), (ANYIO, FLOORS["anyio"])):
        transport = Transport(bodies)
        client: Model = transport.client()

        async def run_floor_sdk(
            transport: Transport = transport, client: Model = client, batch: Any = batch
        ) -> object:
            transport.reset()
            return await run_floor(batch, client, handlers, "go", tools=params)

        variants[name] = run_floor_sdk
    transport = Transport(bodies)
    client = transport.client()

    async def run_dumped_sdk(transport: Transport = transport, client: Model = client) -> object:
        transport.reset()
        return await run_floor(FLOORS["gather"], client, handlers, "go", tools=params, dump=True)

    variants[DUMPED] = run_dumped_sdk
    for name, metrics in ((METRICS, True), (NO_METRICS, False)):
        transport = Transport(bodies)
        loop = boundloop(transport.client(), tools, steps=turns + 2, metrics=metrics)

        async def run_loop_sdk(transport: Transport = transport, loop: AgentLoop = loop) -> object:
            transport.reset()
            return await run_boundloop(loop, "go")

        variants[name] = run_loop_sdk
    return variants


async def sdk_path(config: Config, report: Report) -> None:
    """boundloop and the floors through the real SDK client: the ratio an application sees."""
    turns = config.sdk_turns
    variants = sdk_variants(turns)
    settle()
    figures = await compare(variants, repeat=config.sdk_repeat, factor=1e6 / turns, warmup=2)
    report.section(
        "5. SDK path: the real AsyncAnthropic over httpx2.MockTransport",
        f"{turns} turns x 3 instant tools; each request goes through the SDK (build, JSON-encode, the "
        "transport, parse the JSON body into a `Message`); the floors send the same tool definitions. "
        "The floors keep the SDK's content blocks in the transcript, which the SDK turns back into JSON "
        "on every request; the *blocks as dicts* floor, like boundloop, dumps them once instead (not a "
        "target's floor: it shows what that re-serialisation costs). "
        f"µs per turn, median [min-max] of {config.sdk_repeat} repeats.",
        header("µs / turn"),
        [timing_row(name, timing, figures) for name, timing in figures.items()],
    )
    for floor in (GATHER, ANYIO):
        cpu, wall = figures[METRICS].ratio(figures[floor])
        report.target(
            f"SDK path ≤ 1.10x SDK {floor.removeprefix('floor: ')} floor (metrics + trace)",
            f"{cpu:.2f}x CPU, {wall:.2f}x wall",
            verdict(cpu <= 1.10, wall <= 1.10),
        )


# -- 6. tracing ---------------------------------------------------------------------------

TRACING_OFF: Final = "boundloop: tracing off (no provider set)"
TRACING_NONE: Final = "boundloop: tracing off (tracing=None)"
TRACING_ON: Final = "boundloop: tracing on"
TRACING_CONTENT: Final = "boundloop: tracing on, TraceSettings(content=True)"


def tracing_variants(responses: Sequence[Message], provider: object, batch: int = 1) -> dict[str, Runner]:
    """The floors, and boundloop (metrics + trace) with tracing off two ways and on two ways;
    `batch` runs per sample."""
    tools = tools_of(instant, 3)
    variants = floor_variants(FastClient(responses), handlers_of(instant, 3))
    tracings: dict[str, TraceSettings | None] = {
        TRACING_OFF: TraceSettings(),
        TRACING_NONE: None,
        TRACING_ON: TraceSettings(provider=cast(Any, provider)),
        TRACING_CONTENT: TraceSettings(provider=cast(Any, provider), content=True),
    }
    for name, tracing in tracings.items():
        client = FastClient(responses)
        metrics = LoopMetrics(registry=CollectorRegistry())
        loop = AgentLoop(
            client,
            model=MODEL,
            tools=tools,
            budget=Budget(max_steps=len(responses) + 1),
            max_tokens=MAX_TOKENS,
            name="bench",
            observers=Observers(metrics=metrics, tracing=tracing),
        )
        variants[name] = loop_variant(client, loop)
    if batch == 1:
        return variants
    return {name: batched(run, batch) for name, run in variants.items()}


async def tracing(config: Config, report: Report) -> None:
    """What OpenTelemetry tracing costs a run: nothing while off, its spans while on."""
    from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

    class Dropped(SpanExporter):
        """An exporter that sends nothing: the figures are boundloop's and the SDK's work."""

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropped()))
    try:
        settle()
        per_turn = await compare(
            tracing_variants(script(config.turns, 3), provider),
            repeat=config.turn_repeat,
            factor=1e6 / config.turns,
        )
        batch = config.startup_batch
        settle()
        one_turn = await compare(  # a run's fixed cost: twice the start-up repeats, the noise being larger
            tracing_variants(script(0, 0), provider, batch),
            repeat=2 * config.startup_repeat,
            factor=1e6 / batch,
        )
    finally:
        provider.shutdown()
    rows = [
        timing_row(f"{name}, {config.turns} turns x 3 tools", t, per_turn) for name, t in per_turn.items()
    ]
    rows += [timing_row(f"one-turn run(): {name}", t, one_turn) for name, t in one_turn.items()]
    report.section(
        "6. Tracing: OpenTelemetry off and on",
        f"µs per turn ({config.turns} turns x 3 instant tools, median [min-max] of {config.turn_repeat} "
        f"repeats) and µs per one-turn run (batches of {batch}, {2 * config.startup_repeat} repeats); "
        "metrics and trace on throughout. *Off*: no tracer provider set anywhere (the default: a run looks "
        "the global provider up once), or `tracing=None`. *On*: an SDK `TracerProvider` "
        "with a `BatchSpanProcessor` whose exporter drops the spans (its thread's work is not on "
        "the event loop's CPU clock): an `invoke_agent` span per run, a `chat` span per model "
        "call, an `execute_tool` span per tool call and a `transition` event per edge.",
        header("µs"),
        rows,
    )
    for figures, what in ((per_turn, "per turn"), (one_turn, "per one-turn run")):
        cpu, wall = (ratio - 1 for ratio in figures[TRACING_OFF].ratio(figures[TRACING_NONE]))
        report.target(
            f"tracing off costs nothing measurable {what} (no provider vs tracing=None, ≤ 3 %)",
            f"{100 * cpu:+.1f} % CPU, {100 * wall:+.1f} % wall; tracing on: "
            f"{100 * (figures[TRACING_ON].ratio(figures[TRACING_NONE])[0] - 1):+.1f} % CPU",
            verdict(abs(cpu) <= 0.03, abs(wall) <= 0.03),
        )


# -- the report ----------------------------------------------------------------------------


def render(report: Report, info: dict[str, str], command: str, seconds: float) -> str:
    """The whole report as Markdown: machine, tables, targets."""
    lines = [
        "# Benchmark results",
        "",
        f"Written by `{command}` (the suite took {seconds:.0f} s). Every figure is the median with "
        "[min-max] over the repeats; CPU time is `time.thread_time()` of the event loop's thread (steady "
        "on a busy machine), wall time is `time.perf_counter()`. The floors are hand-written loops "
        "measured in the same run: *gather* runs each batch with `asyncio.gather`, *anyio* with an anyio "
        "task group. Ratios are of medians. Regenerate with `.venv/bin/python -m benchmarks --write`.",
        "",
        "## Machine",
        "",
        *(f"- **{key}**: {value}" for key, value in info.items()),
        "",
        "## Targets",
        "",
        "| target | measured | verdict |",
        "|---|---|---|",
        *(f"| {target.name} | {target.measured} | {target.verdict} |" for target in report.targets),
        "",
        "## Figures",
        "",
        *report.sections,
    ]
    return "\n".join(lines)


async def huge_batch(config: Config, report: Report) -> None:
    """7. One huge batch: `benchmarks/batch.py`, imported here (it imports this module)."""
    from benchmarks import batch

    await batch.workload(config, report)


async def long_transcript(config: Config, report: Report) -> None:
    """8. A long transcript: `benchmarks/transcript.py`, imported here (it imports this module)."""
    from benchmarks import transcript

    await transcript.workload(config, report)


async def prompt_caching(config: Config, report: Report) -> None:
    """9. Prompt caching: `benchmarks/caching.py`, imported here (it imports this module)."""
    from benchmarks import caching

    await caching.workload(config, report)


async def compaction(config: Config, report: Report) -> None:
    """10. Compaction: `benchmarks/compaction.py`, imported here (it imports this module)."""
    from benchmarks import compaction

    await compaction.workload(config, report)


async def budget_pools(config: Config, report: Report) -> None:
    """12. Budget pools: `benchmarks/pools.py`, imported here (it imports this module)."""
    from benchmarks import pools

    await pools.workload(config, report)


async def streaming(config: Config, report: Report) -> None:
    """11. Streaming: `benchmarks/streaming.py`, imported here (it imports this module)."""
    from benchmarks import streaming

    await streaming.workload(config, report)


WORKLOADS: Final = (
    per_turn,
    parallel,
    startup,
    sdk_path,
    concurrency,
    tracing,
    huge_batch,
    long_transcript,
    prompt_caching,
    compaction,
    streaming,
    budget_pools,
)


async def measure(config: Config, report: Report) -> None:
    """Every workload, in order."""
    settle()
    for workload in WORKLOADS:
        started = time.perf_counter()
        await workload(config, report)
        print(f"({workload.__name__}: {time.perf_counter() - started:.0f} s)\n", file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the arguments, run the suite, print the tables and targets, write RESULTS.md on request."""
    parser = argparse.ArgumentParser(description="boundloop's benchmark suite (see benchmarks/suite.py).")
    parser.add_argument("--quick", action="store_true", help="fewer repeats, no 10,000-run case (~40 s)")
    parser.add_argument("--write", action="store_true", help="also write benchmarks/RESULTS.md")
    parser.add_argument(
        "--trace-all", action="store_true", help="trace memory at 10,000 concurrent runs too (~2 min more)"
    )
    args = parser.parse_args(argv)
    config = QUICK if args.quick else Config()
    if args.trace_all:
        config = dataclasses.replace(config, traced_up_to=max(config.sizes))
    info = machine()
    print("\n".join(f"{key}: {value}" for key, value in info.items()), end="\n\n", flush=True)
    report = Report()
    started = time.perf_counter()
    anyio.run(measure, config, report)
    seconds = time.perf_counter() - started
    print("### Targets\n")
    for target in report.targets:
        print(f"- {target.name}: {target.measured} — **{target.verdict}**")
    print(f"\n(the suite took {seconds:.0f} s)")
    if args.write:
        flags = [flag for flag, on in (("--quick", args.quick), ("--trace-all", args.trace_all)) if on]
        command = " ".join([".venv/bin/python -m benchmarks", *flags, "--write"])
        RESULTS.write_text(render(report, info, command, seconds), encoding="utf-8")
        print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
