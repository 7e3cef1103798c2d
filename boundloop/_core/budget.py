"""The budget: which limit is spent, and what the run does at it.

`spent` is checked before every model call (in assemble) and after every tool round (in
observe); `breaker` after every tool round. A spent step or tool-call budget with
`Budget(on_exhausted="final_answer")` makes a final answer due: the table's
`answer_at_limit` edges take the run through one more model call, without tools.
"""

from __future__ import annotations

import math

import anyio

from ..records import Exceeded, Limit
from .answers import finish
from .context import RunContext
from .pricing import call_price


def spent(ctx: RunContext) -> Exceeded | None:
    """The first spent budget of steps, server tool uses, tokens, cost and time, or None."""
    state = ctx.state
    budget = ctx.config.spec.budget
    if state.step >= budget.max_steps:
        return Exceeded(limit="max_steps", value=budget.max_steps, used=state.step)
    if budget.max_server_tool_uses is not None:
        uses = state.usage.total_server_tool_uses
        if uses >= budget.max_server_tool_uses:
            return Exceeded(limit="max_server_tool_uses", value=budget.max_server_tool_uses, used=uses)
    return ceiling_spent(ctx)


def ceiling_spent(ctx: RunContext) -> Exceeded | None:
    """The first spent hard ceiling (tokens, cost, time), or None: checked before every batch
    and every model call, the final answer included."""
    state = ctx.state
    budget = ctx.config.spec.budget
    if budget.max_total_tokens is not None:
        tokens = state.usage.total_tokens
        if tokens >= budget.max_total_tokens:
            return Exceeded(limit="max_total_tokens", value=budget.max_total_tokens, used=tokens)
    if budget.max_cost_usd is not None:
        cost = state.usage.cost_usd or 0.0  # None only without a price, so without a cost budget
        if cost >= budget.max_cost_usd:
            return Exceeded(limit="max_cost_usd", value=budget.max_cost_usd, used=cost)
    if ctx.deadline is not None and anyio.current_time() >= ctx.deadline:
        return Exceeded(limit="timeout_s", value=budget.timeout_s or 0.0, used=ctx.elapsed_s)
    return None


def breaker(ctx: RunContext) -> Exceeded | None:
    """The circuit breaker: too many failing results in a row, or too many repeats."""
    state = ctx.state
    budget = ctx.config.spec.budget
    if state.consecutive_tool_errors >= budget.max_consecutive_tool_errors:
        return Exceeded(
            limit="max_consecutive_tool_errors",
            value=budget.max_consecutive_tool_errors,
            used=state.consecutive_tool_errors,
        )
    if state.repeated_calls > budget.max_repeated_calls:
        return Exceeded(
            limit="max_repeated_calls", value=budget.max_repeated_calls, used=state.repeated_calls
        )
    return None


def stop_at(ctx: RunContext, exceeded: Exceeded, detail: str | None = None) -> None:
    """Record the spent limit and stop the run for it; a final answer may become due."""
    state = ctx.state
    state.exceeded = exceeded
    limit = Limit.of(exceeded.limit)
    if limit is Limit.MAX_CONSECUTIVE_TOOL_ERRORS:
        finish(ctx, limit.stop, f"circuit breaker open: {exceeded.used:g} failing tool results in a row")
        return
    if limit is Limit.MAX_REPEATED_CALLS:
        finish(ctx, limit.stop, f"{exceeded.used:g} repeated tool calls")
        return
    finish(ctx, limit.stop, detail or f"{exceeded.limit}={exceeded.value:g} spent (used {exceeded.used:g})")
    state.final_call_due = (
        ctx.config.spec.budget.on_exhausted == "final_answer"
        and limit.final_answer
        and ceiling_spent(ctx) is None
        and output_allowance(ctx) >= 1
    )


def input_estimate(ctx: RunContext) -> int:
    """The next request's input: counted, else the previous call's input and output."""
    if ctx.scratch.counted_input is not None:
        return ctx.scratch.counted_input
    if not ctx.state.responses:
        return 0
    usage = ctx.state.responses[-1].usage_json  # as the API sent it: a count it left out is 0
    return (
        (usage.get("input_tokens") or 0)
        + (usage.get("cache_read_input_tokens") or 0)
        + (usage.get("cache_creation_input_tokens") or 0)
        + (usage.get("output_tokens") or 0)
    )


def next_input_estimate(ctx: RunContext) -> int:
    """The input tokens of the next call, at least: the previous call's input and its output,
    which is now part of the transcript (twice when it will compact). 0 before the first call."""
    estimate = input_estimate(ctx)
    compaction = ctx.config.spec.compaction
    if compaction is not None and (ctx.scratch.compact_now or estimate >= compaction.trigger_tokens):
        estimate *= 2  # the API's compaction reads the context once more before the answer
    return estimate


def output_allowance(ctx: RunContext) -> int:
    """`max_tokens` for the next call: the configured value, clamped so that the call's worst
    case (the estimated input plus all of its output) fits in the token and cost budgets, at
    the price of the model the call goes to (a refusal's retry: the fallback model's)."""
    config = ctx.config
    budget = config.spec.budget
    state = ctx.state
    allowance = config.spec.max_tokens
    if budget.max_total_tokens is None and budget.max_cost_usd is None:
        return allowance  # nothing to clamp it to
    estimate = next_input_estimate(ctx)
    if budget.max_total_tokens is not None:
        allowance = min(allowance, budget.max_total_tokens - state.usage.total_tokens - estimate)
    model_price = None if budget.max_cost_usd is None else call_price(ctx)
    price = None if model_price is None else model_price.at(estimate)
    if budget.max_cost_usd is not None and price is not None and price.output_per_mtok > 0:
        spent = state.usage.cost_usd or 0.0
        left = budget.max_cost_usd - spent - estimate * price.input_per_mtok / 1_000_000
        allowance = min(allowance, math.floor(left * 1_000_000 / price.output_per_mtok))
    return allowance


def call_spent(ctx: RunContext) -> Exceeded | None:
    """The token or cost budget cannot cover even one output token of the next call."""
    if output_allowance(ctx) >= 1:
        return None
    state = ctx.state
    budget = ctx.config.spec.budget
    estimate = next_input_estimate(ctx)
    if budget.max_total_tokens is not None and (
        state.usage.total_tokens + estimate + 1 > budget.max_total_tokens
    ):
        return Exceeded(
            limit="max_total_tokens", value=budget.max_total_tokens, used=state.usage.total_tokens
        )
    return Exceeded(limit="max_cost_usd", value=budget.max_cost_usd or 0.0, used=state.usage.cost_usd or 0.0)


def final_answer_note(exceeded: Exceeded) -> str:
    """The user turn before the final-answer call."""
    return (
        f"The budget of this run is spent ({exceeded.limit}). Do not call tools. "
        "Give your best final answer now from what you have gathered, and say what is uncertain."
    )


def take_tool_call(ctx: RunContext) -> bool:
    """Take one tool execution from `max_tool_calls`, or refuse when none is left."""
    state = ctx.state
    limit = ctx.config.spec.budget.max_tool_calls
    if limit is not None and state.tool_calls >= limit:
        return False
    state.tool_calls += 1
    return True
