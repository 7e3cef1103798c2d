"""`python -m benchmarks.compaction [--quick]`: a 500-turn run with server-side compaction on.

Workload 10 of the suite (`python -m benchmarks`), runnable on its own. A scripted model (no
network) answers each request with one `tool_use` of a tool whose result is ~2,000 characters,
then, at the last turn, the answer. It simulates the API's compaction: a request's input is
estimated as the API counts it (4 characters a token, from the latest compaction block on: the
API drops what comes before) and every request past `trigger_tokens` gets a `compaction` block
first in its answer, billed in `usage.iterations`. Measured: the largest input any request
carries (the run's ceiling is the trigger plus one turn), how many compactions, the billed
input, whether any request breaks a rule of the API (tests/api_rules.py, on every request; the
loop's own request invariant runs before each one is sent), and whether the recorded run
replays identically (`boundloop.replay`).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anthropic.types import Message

from benchmarks.suite import Report, run_alone
from boundloop import AgentLoop, Budget, Compaction, ContextManagement, Observers, StopReason, replay, tool
from boundloop.events import Compacted
from boundloop.testing import parse_message
from tests.api_rules import violations

TURNS: Final = 500
TRIGGER: Final = 50_000
RESULT_CHARS: Final = 2_000


@tool
def read(page: int) -> str:
    """Read a page of the log."""
    return f"page {page}: " + "x" * RESULT_CHARS


def input_tokens(request: Mapping[str, Any]) -> int:
    """The request's input as the simulated API counts it: from the latest compaction block on."""
    messages = list(request["messages"])
    start = 0
    for index, message in enumerate(messages):
        content: object = message["content"]
        blocks = cast("list[dict[str, Any]]", content) if isinstance(content, list) else []
        if any(block.get("type") == "compaction" for block in blocks):
            start = index
    kept = {key: value for key, value in request.items() if key not in ("messages", "betas")}
    return len(json.dumps([kept, messages[start:]], default=str)) // 4


class CompactingModel:
    """`messages.create` and `beta.messages.create` over a script that compacts like the API."""

    def __init__(self, turns: int, trigger: int) -> None:
        self.turns = turns
        self.trigger = trigger
        self.requests: list[dict[str, Any]] = []
        self.responses: list[dict[str, Any]] = []
        self.inputs: list[int] = []
        self.messages = self
        self.beta = self

    async def create(self, **request: Any) -> Message:
        self.requests.append(request)
        tokens = input_tokens(request)
        self.inputs.append(tokens)
        turn = len(self.requests)
        if turn < self.turns:
            content: list[dict[str, Any]] = [
                {"type": "tool_use", "id": f"toolu_{turn}", "name": "read", "input": {"page": turn}}
            ]
            stop = "tool_use"
        else:
            content, stop = [{"type": "text", "text": "done"}], "end_turn"
        usage: dict[str, Any] = {"input_tokens": tokens, "output_tokens": 30}
        if tokens > self.trigger:
            summary = f"Summary of pages up to {turn}."
            content = [
                {"type": "compaction", "content": summary, "encrypted_content": f"enc{turn}"},
                *content,
            ]
            after = len(summary) // 4 + 100
            usage = {
                "input_tokens": after,
                "output_tokens": 30,
                "iterations": [
                    {"type": "compaction", "input_tokens": tokens, "output_tokens": len(summary) // 4,
                     "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
                    {"type": "message", "input_tokens": after, "output_tokens": 30,
                     "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0},
                ],
            }  # fmt: skip
        body = {"stop_reason": stop, "content": content, "usage": usage}
        self.responses.append(body)
        return parse_message(body, model=str(request["model"]))


async def measure(turns: int) -> dict[str, Any]:
    """Run `turns` turns with compaction on; the figures."""
    model = CompactingModel(turns, TRIGGER)
    agent = AgentLoop(
        model,
        model="claude-sonnet-4-6",
        tools=[read],
        budget=Budget(max_steps=turns + 10),
        context=ContextManagement(compaction=Compaction(trigger_tokens=TRIGGER)),
        observers=Observers(metrics=None, tracing=None),
    )
    started = time.perf_counter()
    result = await agent.run("Read every page of the log, then say done.")
    seconds = time.perf_counter() - started
    report = await replay(result.events, agent)
    growth = max(b - a for a, b in zip(model.inputs, model.inputs[1:], strict=False))
    return {
        "turns": turns,
        "stop": result.stop_reason,
        "requests": len(model.requests),
        "compactions": sum(isinstance(event, Compacted) for event in result.events),
        "max_input": max(model.inputs),
        "ceiling": TRIGGER + growth,
        "billed_input": result.state.usage.input_tokens,
        "violations": len(violations(model.requests, model.responses)),
        "identical": report.identical,
        "seconds": seconds,
    }


HEADER: Final = [
    "turns",
    "stop",
    "compactions",
    "largest request input",
    "ceiling (trigger + a turn)",
    "billed input",
    "broken requests",
    "replays identically",
    "s",
]


def rows(figures: dict[str, Any]) -> list[list[str]]:
    """The table's row."""
    return [
        [
            str(figures["turns"]),
            str(figures["stop"]),
            str(figures["compactions"]),
            f"{figures['max_input']:,}",
            f"{figures['ceiling']:,}",
            f"{figures['billed_input']:,}",
            str(figures["violations"]),
            "yes" if figures["identical"] else "no",
            f"{figures['seconds']:.1f}",
        ]
    ]


INTRO: Final = (
    f"`benchmarks/compaction.py`: {TURNS} turns of one tool call (a ~{RESULT_CHARS:,}-character result) with "
    f"`Compaction(trigger_tokens={TRIGGER:,})`, on a scripted model that compacts like the API "
    "(every request past the trigger gets a compaction block). Every request is checked against the "
    "API's rules; the run is replayed from its events."
)


async def workload(config: object, report: Report) -> None:
    """The suite's workload 10: the table and the target."""
    figures = await measure(100 if "--quick" in sys.argv else TURNS)
    report.section("10. Compaction: a 500-turn run under its input ceiling", INTRO, HEADER, rows(figures))
    met = (
        figures["stop"] is StopReason.COMPLETED
        and figures["max_input"] <= figures["ceiling"]
        and figures["violations"] == 0
        and figures["identical"]
    )
    report.target(
        "compaction: every request under the trigger plus a turn, no broken request, "
        "replayed identically (section 10)",
        f"largest input {figures['max_input']:,} ≤ {figures['ceiling']:,}; "
        f"{figures['compactions']} compactions; {figures['violations']} broken requests; "
        f"identical replay: {figures['identical']}",
        "met" if met else "not met",
    )


if __name__ == "__main__":
    run_alone(workload)
