"""`python -m benchmarks.caching`: what prompt caching saves on a long run, billed by the API's rules.

Workload 9 of the suite (`python -m benchmarks`), runnable on its own. A scripted run of
`TURNS` turns, each asking for `CALLS` tools at once, then the answer, over a prefix of about
`PREFIX_TOKENS` tokens (a long system prompt and three long tool definitions), through the real
`anthropic.AsyncAnthropic` over tests/cache_sim.py's `CachingAPI`: a fake Messages API that bills
each request's `usage` by the API's documented prompt caching rules (breakpoints, automatic
caching, the 20-block lookback, the 5-minute TTL, the minimum length; tokens estimated as bytes / 4
of each block's JSON). The clock moves `SECONDS_PER_REQUEST` per request. Costs are the run's
`Price` (`boundloop.prices.resolve_price(MODEL)`) applied to each billed `usage`.

Reported per variant: the requests, every input token (uncached, read, written), the share of
the input tokens after the first request that were cache reads, the cost, its ratio to the same
run with caching off, and what caching saved (`usage.cache_savings_usd`). The targets: reads
>= 90 % of the input after the first request, cost <= 25 % of the run with caching off.

The variants are boundloop with caching on and off, and the peers where they run here: the SDK's
tool runner (`client.beta.messages.tool_runner`, in the installed SDK) as it sends its requests by
default but for `thread=False` (its default keeps the conversation in a server-held thread, which
the fake API does not bill), and with its best caching settings (the API's automatic caching and
the system prompt marked). PydanticAI, LangGraph and the OpenAI Agents SDK are not installed in
this environment and are not run: no figure is given for them.

Section 9b runs the same at `WIDE_CALLS` calls a turn, each turn opening with a sentence of text:
a turn then adds more blocks than the API's 20-block lookback, which automatic caching alone does
not reach past (boundloop marks the previous request's last user turn then). Target: reads >= 90 %.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from anthropic import beta_async_tool, omit
from anthropic.types import CacheCreation
from anthropic.types import Usage as ApiUsage
from anthropic.types.beta import BetaTextBlockParam

from benchmarks.suite import Report, run_alone
from boundloop import AgentLoop, Budget, Price, Tool, tool
from boundloop.prices import resolve_price
from tests.cache_sim import CacheSim, CacheUsage, CachingAPI, tokens_of
from tests.fake_api import Body

MODEL: Final = "claude-sonnet-4-6"
TURNS: Final = 30
CALLS: Final = 3
PREFIX_TOKENS: Final = 20_000
SECONDS_PER_REQUEST: Final = 10.0
READ_TARGET: Final = 0.90
COST_TARGET: Final = 0.25
TOOL_NAMES: Final = ("search_orders", "read_policy", "check_ledger")
TOOL_TOKENS: Final = 1_500
"""About how many tokens each tool definition takes (its description's length)."""

CACHING: Final[dict[str, dict[str, Any]]] = {"on": {"cache": "auto"}, "off": {"cache": "off"}}
"""boundloop's default (`cache="auto"`) against `cache="off"`."""

ON: Final = 'boundloop: cache="auto" (the default)'
OFF: Final = 'boundloop: cache="off"'
RUNNER: Final = "anthropic SDK tool runner: its defaults, thread=False"


async def lookup(key: str) -> str:
    """An instant tool: a record of about 60 tokens for the key."""
    return f"record {key}: " + ", ".join(f"field {n} = value {n} of {key}" for n in range(6))


def padding(label: str, tokens: int) -> str:
    """Deterministic prose of about `tokens` tokens (4 bytes each)."""
    text = ""
    rule = 0
    while len(text) < 4 * tokens:
        text += f"{label} rule {rule}: a refund over {rule * 10} dollars needs a second reviewer. "
        rule += 1
    return text[: 4 * tokens]


def tools() -> list[Tool]:
    """The three tools, each with a long description."""
    return [tool(name=name, description=padding(name, TOOL_TOKENS))(lookup) for name in TOOL_NAMES]


def system_prompt(tool_list: Sequence[Tool]) -> str:
    """The system prompt that makes tools + system about `PREFIX_TOKENS` tokens."""
    used = sum(tokens_of(item.to_param()) for item in tool_list)
    return padding("policy", PREFIX_TOKENS - used - 10)


def prefix_tokens(tool_list: Sequence[Tool], system: str) -> int:
    """Tokens of the prefix as the fake API counts them."""
    return sum(tokens_of(item.to_param()) for item in tool_list) + tokens_of({"type": "text", "text": system})


def bodies(calls: int = CALLS) -> list[dict[str, Any]]:
    """The model's responses: `TURNS` turns of `calls` calls, then the answer; output tokens as
    the fake API counts them (bytes / 4 of each block). A turn of more than `CALLS` calls opens
    with a sentence of text, as a model's turn often does."""
    responses: list[dict[str, Any]] = []
    for turn in range(TURNS + 1):
        if turn < TURNS:
            said = [{"type": "text", "text": f"Checking {calls} orders."}] if calls > CALLS else []
            content = said + [
                {
                    "type": "tool_use",
                    "id": f"toolu_01T{turn:04d}C{index}",
                    "name": TOOL_NAMES[index % len(TOOL_NAMES)],
                    "input": {"key": f"order-{turn}-{index}"},
                }
                for index in range(calls)
            ]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": "done"}]
            stop = "end_turn"
        responses.append(
            {
                "id": f"msg_01T{turn:04d}",
                "type": "message",
                "role": "assistant",
                "model": MODEL,
                "content": content,
                "stop_reason": stop,
                "stop_sequence": None,
                "usage": {"input_tokens": 0, "output_tokens": sum(tokens_of(block) for block in content)},
            }
        )
    return responses


class Clock:
    """The fake API's clock: `SECONDS_PER_REQUEST` later on every reading (one per request)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += SECONDS_PER_REQUEST
        return self.now


def caching_api(calls: int = CALLS) -> CachingAPI:
    """A fresh fake API and cache, serving the script of `calls` calls a turn."""
    return CachingAPI([Body(json=body) for body in bodies(calls)], cache=CacheSim(clock=Clock()))


@dataclasses.dataclass(frozen=True, slots=True)
class Run:
    """One variant's billed requests."""

    usages: list[CacheUsage]
    outputs: list[int]
    breakpoints: str
    """What the first request carried: top-level and block `cache_control`s."""
    loop_cost: float | None = None
    """boundloop's own `result.usage.cost_usd` (checked against the bill)."""
    loop_savings: float | None = None

    def billed(self) -> list[ApiUsage]:
        """Each response's usage as the API bills it."""
        return [
            ApiUsage(
                input_tokens=usage.input_tokens,
                output_tokens=output,
                cache_read_input_tokens=usage.cache_read_input_tokens,
                cache_creation_input_tokens=usage.cache_creation_input_tokens,
                cache_creation=CacheCreation(
                    ephemeral_5m_input_tokens=usage.cache_creation_5m,
                    ephemeral_1h_input_tokens=usage.cache_creation_1h,
                ),
            )
            for usage, output in zip(self.usages, self.outputs, strict=True)
        ]

    def cost(self, price: Price) -> float:
        """The run's cost at `price`."""
        return sum(price.cost(usage) for usage in self.billed())

    def savings(self, price: Price) -> float:
        """What caching saved at `price`."""
        return sum(price.cache_savings(usage) for usage in self.billed())

    @property
    def input_tokens(self) -> int:
        """Every input token: uncached, read and written."""
        return sum(_all(usage) for usage in self.usages)

    @property
    def read_share(self) -> float:
        """Cache reads over every input token, after the first request."""
        later = self.usages[1:]
        return sum(usage.cache_read_input_tokens for usage in later) / sum(_all(usage) for usage in later)


def _all(usage: CacheUsage) -> int:
    return usage.input_tokens + usage.cache_read_input_tokens + usage.cache_creation_input_tokens


def _breakpoints(request: dict[str, Any]) -> str:
    text = json.dumps(request)
    blocks = text.count('"cache_control"') - (1 if "cache_control" in request else 0)
    return f"top-level: {'yes' if 'cache_control' in request else 'no'}, on blocks: {blocks}"


async def run_boundloop(caching: str, calls: int = CALLS) -> Run:
    """boundloop with caching on or off (`CACHING`), `calls` calls a turn."""
    api = caching_api(calls)
    tool_list = tools()
    loop = AgentLoop(
        api.client(),
        model=MODEL,
        system=system_prompt(tool_list),
        tools=tool_list,
        budget=Budget(max_steps=TURNS + 2),
        max_tokens=1024,
        **CACHING[caching],
    )
    result = await loop.run("Check the refunds of orders 0 to 89.")
    assert result.answer == "done", (result.stop_reason, result.state.errors)
    outputs = [response.usage.output_tokens for response in result.state.responses]
    return Run(
        api.usages,
        outputs,
        _breakpoints(api.requests[0]),
        result.usage.cost_usd,
        result.usage.cache_savings_usd,
    )


async def run_tool_runner(calls: int = CALLS, *, best: bool = False) -> Run:
    """The SDK's beta tool runner with the same tools and system, as it sends requests by default
    except for `thread=False`: by default it keeps the conversation in a server-held thread and
    sends only each turn's new messages, which the fake API does not bill (how the API bills a
    thread's history is not among the caching rules it implements). With `best`, its best
    caching settings: the API's automatic caching (a top-level `cache_control`, which marks the
    request's last block) and the system prompt as a block with its own breakpoint."""
    api = caching_api(calls)
    tool_list = tools()
    runner_tools = [
        beta_async_tool(
            lookup, name=item.name, description=item.description, input_schema=dict(item.input_schema)
        )
        for item in tool_list
    ]
    system = system_prompt(tool_list)
    marked: list[BetaTextBlockParam] = [
        {"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}
    ]
    runner = api.client().beta.messages.tool_runner(
        model=MODEL,
        max_tokens=1024,
        system=marked if best else system,
        tools=runner_tools,
        messages=[{"role": "user", "content": "Check the refunds of orders 0 to 89."}],
        max_iterations=TURNS + 2,
        thread=False,
        cache_control={"type": "ephemeral"} if best else omit,
    )
    final = await runner.until_done()
    assert [block.type for block in final.content] == ["text"], final.content
    outputs = [body["usage"]["output_tokens"] for body in bodies(calls)]
    return Run(api.usages, outputs, _breakpoints(api.requests[0]))


RUNNER_BEST: Final = (
    "anthropic SDK tool runner: its best caching (automatic caching, system marked), thread=False"
)
WIDE_CALLS: Final = 10
"""Tool calls a turn in the wide workload: with its text, a turn adds 21 blocks (a text, 10
tool_use, 10 tool_result), past the 20 the API looks back from a breakpoint for an earlier entry."""

VARIANTS: Final[dict[str, Callable[[int], Awaitable[Run]]]] = {
    ON: lambda calls: run_boundloop("on", calls),
    OFF: lambda calls: run_boundloop("off", calls),
    RUNNER: lambda calls: run_tool_runner(calls),
    RUNNER_BEST: lambda calls: run_tool_runner(calls, best=True),
}


async def measure(calls: int = CALLS) -> dict[str, Run]:
    """Every variant at `calls` calls a turn, once: the figures are deterministic."""
    return {name: await variant(calls) for name, variant in VARIANTS.items()}


HEADER: Final = [
    "variant",
    "cache_control sent",
    "requests",
    "input tokens (all kinds)",
    "cache reads after the 1st request",
    "cache writes",
    "cost",
    "x boundloop caching off",
    "caching saved",
]


def rows(runs: dict[str, Run], price: Price) -> list[list[str]]:
    """The table's rows."""
    baseline = runs[OFF].cost(price)
    table: list[list[str]] = []
    for name, run in runs.items():
        cost = run.cost(price)
        table.append(
            [
                name,
                run.breakpoints,
                str(len(run.usages)),
                f"{run.input_tokens:,}",
                f"{100 * run.read_share:.1f} %",
                f"{sum(usage.cache_creation_input_tokens for usage in run.usages):,}",
                f"${cost:.4f}",
                f"{100 * cost / baseline:.1f} %",
                f"${run.savings(price):.4f}",
            ]
        )
    return table


def intro(runs: dict[str, Run], price: Price) -> str:
    """The section's text above the table."""
    tool_list = tools()
    prefix = prefix_tokens(tool_list, system_prompt(tool_list))
    return (
        f"A scripted run of {TURNS} turns x {CALLS} parallel tool calls, then the answer, over a "
        f"{prefix:,}-token prefix (a system prompt and {len(TOOL_NAMES)} tool definitions), through the real "
        "AsyncAnthropic over tests/cache_sim.py's `CachingAPI`: a fake Messages API billing each request "
        "under the API's documented prompt caching rules (a read where the prefix up to a breakpoint "
        "matches an earlier request's within the TTL, checked up to 20 blocks back; a write otherwise; "
        "tokens estimated as bytes / 4 of each block's JSON), its clock moving "
        f"{SECONDS_PER_REQUEST:g} s per request. Priced at {MODEL}'s `Price` (input "
        f"${price.input_per_mtok:g}/MTok, cache reads {_rate(price.cache_read_per_mtok, price, 0.1)}, "
        f"5-minute writes {_rate(price.cache_write_per_mtok, price, 1.25)}, output "
        f"${price.output_per_mtok:g}/MTok). boundloop runs with its default `cache='auto'` (a "
        "top-level `cache_control`, the API's automatic caching, its breakpoint on the last block, "
        "moving forward every turn, and the system prompt marked) and with `cache='off'`. "
        "*caching saved* is `result.usage.cache_savings_usd` (the "
        "reads' discount minus the writes' premium). The tool runner is the installed SDK's, as it "
        "sends requests by default but for `thread=False`: by default it keeps the conversation in a "
        'server-held thread (`thread: {"type": "create"}`, then only each turn\'s new messages), whose '
        "billing the fake API does not model, so that default is not measured; its best caching settings "
        "are the API's automatic caching (a top-level `cache_control`) and the system prompt marked. "
        "PydanticAI, LangGraph and the OpenAI Agents SDK are not installed here and were not run. "
        "Deterministic: one run each."
    )


def _rate(rate: float | None, price: Price, default: float) -> str:
    return f"${(price.input_per_mtok * default if rate is None else rate):g}/MTok"


async def workload(config: object, report: Report) -> None:
    """The suite's workload 9: the table and the two targets."""
    price = resolve_price(MODEL)
    assert price is not None, MODEL
    runs = await measure()
    for run in (runs[ON], runs[OFF]):  # boundloop's own accounting agrees with the bill
        assert run.loop_cost is not None
        assert abs(run.loop_cost - run.cost(price)) < 1e-9
        assert run.loop_savings is not None
        assert abs(run.loop_savings - run.savings(price)) < 1e-9
    report.section(
        "9. Prompt caching: a 30-turn run over a 20,000-token prefix, billed by the cache rules",
        intro(runs, price),
        HEADER,
        rows(runs, price),
    )
    on, off = runs[ON], runs[OFF]
    report.target(
        f"prompt caching: ≥ {100 * READ_TARGET:.0f} % of the input after the first request read from "
        "the cache (section 9)",
        f"{100 * on.read_share:.1f} % ({sum(u.cache_read_input_tokens for u in on.usages[1:]):,} of "
        f"{sum(_all(u) for u in on.usages[1:]):,} tokens)",
        "met" if on.read_share >= READ_TARGET else "not met",
    )
    ratio = on.cost(price) / off.cost(price)
    report.target(
        f"prompt caching: the run costs ≤ {100 * COST_TARGET:.0f} % of the same run with caching off "
        "(section 9)",
        f"{100 * ratio:.1f} % (${on.cost(price):.4f} vs ${off.cost(price):.4f}; saved "
        f"${on.savings(price):.4f})",
        "met" if ratio <= COST_TARGET else "not met",
    )
    wide = await measure(WIDE_CALLS)
    report.section(
        f"9b. Prompt caching past the 20-block lookback: {WIDE_CALLS} tool calls a turn",
        f"Section 9's run with {WIDE_CALLS} parallel tool calls a turn instead of {CALLS}, each turn "
        f"opening with a sentence of text: a turn adds {2 * WIDE_CALLS + 1} blocks (its text, tool_use "
        "and tool_result blocks), more than the 20 the API looks back from a breakpoint for an earlier "
        "cache entry, so a breakpoint that only moves to the request's last block (automatic caching) "
        "no longer finds the previous request's entry, and each turn writes the transcript again. "
        "boundloop also marks the previous request's last user turn when a turn adds 20 blocks or "
        "more. The peer's rows are its defaults and its best settings, in the same run.",
        HEADER,
        rows(wide, price),
    )
    wide_on, best = wide[ON], wide[RUNNER_BEST]
    report.target(
        f"prompt caching at {WIDE_CALLS} tool calls a turn: ≥ {100 * READ_TARGET:.0f} % of the input after "
        "the first request read from the cache (section 9b)",
        f"{100 * wide_on.read_share:.1f} %; the SDK tool runner's best settings in the same run: "
        f"{100 * best.read_share:.1f} % (cost {100 * wide_on.cost(price) / best.cost(price):.1f} % of its)",
        "met" if wide_on.read_share >= READ_TARGET else "not met",
    )


if __name__ == "__main__":
    run_alone(workload)
