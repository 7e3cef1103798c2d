"""Assemble and propose: the budget check before a model call, then the model call itself."""

from __future__ import annotations

import time
from typing import Any, cast

import anthropic
from anthropic.types import Message, ToolUseBlock

from .._base.cache import add_breakpoints
from .._base.output import add_output_format
from .._base.server_tools import server_tool_uses
from ..errors import ConfigurationError, InvalidRequest, ScriptExhausted
from ..events import ModelRequest, Proposal
from ..model import TokenCounter
from ..records import StopReason, ToolCall, Turn
from ..signals import KNOWN_STOP_REASONS
from ..statemachine.table import Trigger
from ..transcript import append_user
from .answers import finish
from .blocks import field_of, received_turn, response_record
from .boundary import problem
from .budget import (
    call_spent,
    ceiling_spent,
    final_answer_note,
    input_estimate,
    output_allowance,
    spent,
    stop_at,
)
from .compaction import after_response, request_settings
from .connect import refresh_tools
from .context import RunContext
from .invariant import ResponseShape, drop_unfinished_server_turns
from .pricing import count_response
from .refusals import fallback
from .request import as_message, fit_thinking, for_count, messages_of, settings_params, uses_beta
from .reservation import around, ledgers
from .setup import setup_error
from .streaming import streamed
from .validation import FROM_CODE, canonical


async def assemble(ctx: RunContext) -> Trigger:
    """Check every budget before the next model call; at a spent one, stop or conclude.

    The next call's worst case (its input, estimated or counted, plus `max_tokens`) must fit
    in the token and cost budgets; `max_tokens` is clamped to what is left. A toolset that
    listed its tools again since the last request has the request offer the new list.
    """
    state = ctx.state
    if ctx.config.relisted is not None:  # a toolset that may list its tools again
        try:
            ctx.config = await refresh_tools(ctx.config)
        except ConfigurationError as exc:  # the run keeps the tools it has
            ctx.error("tools_list_changed", exc)
    if ctx.watch is not None and ctx.watch.after_turn and state.stop_reason is None:
        finish(ctx, StopReason.CANCELLED, "cancelled after the turn")  # the stream's cancel(after_turn=True)
        return Trigger.HALT
    if state.exceeded is None:
        # Steps, and the ceilings as they stand; a refusal's retry is the same step again.
        exceeded = spent(ctx) if ctx.scratch.fallback is None else ceiling_spent(ctx)
        if exceeded is not None:
            stop_at(ctx, exceeded)
    if state.exceeded is not None and not state.final_call_due:
        return Trigger.ASSEMBLED  # no call: nothing to count or clamp
    if state.final_call_due and state.exceeded is not None:
        drop_unfinished_server_turns(state.messages)
        append_user(state.messages, [{"type": "text", "text": final_answer_note(state.exceeded)}])
    await _count_input(ctx)
    worst = call_spent(ctx)
    if state.final_call_due and (worst or ceiling_spent(ctx)) is not None:
        state.final_call_due = False  # tokens, cost and time are ceilings: no final answer past them
    elif worst is not None and not state.final_call_due:
        stop_at(ctx, worst)
    return Trigger.ASSEMBLED


async def _count_input(ctx: RunContext) -> None:
    """With `Budget.count_tokens` and a token or cost budget (the run's, its delegation tree's,
    a budget pool's): the next request's exact input."""
    ctx.scratch.counted_input = None
    config = ctx.config
    budget = config.spec.budget
    if not budget.count_tokens or (
        budget.max_total_tokens is None
        and budget.max_cost_usd is None
        and ctx.tree is None
        and not config.pools
    ):
        return
    try:
        request = build_request(ctx, tools_allowed=not ctx.state.final_call_due)
    except InvalidRequest:
        return  # never sent: the model call that follows stops the run for it
    beta = uses_beta(ctx.state.model_settings)
    try:
        # Checked at construction: the client has messages.count_tokens.
        counter = cast(TokenCounter, messages_of(config.client, beta=beta))
        ctx.scratch.counted_input = (await counter.count_tokens(**for_count(request, beta=beta))).input_tokens
    except anthropic.APIError as exc:  # the estimate stands in: a count is a refinement, not a need
        ctx.error("count_tokens", exc)


def build_request(
    ctx: RunContext, *, tools_allowed: bool = True, max_tokens: int | None = None
) -> dict[str, Any]:
    """The Messages API request for the transcript so far, with the run's model settings.

    The final answer at a spent budget (`tools_allowed=False`) is asked with
    `tool_choice={"type": "none"}`, whatever the settings' `tool_choice`. `max_tokens`: what
    a delegation tree's ledger granted (default: what the run's budget allows).
    """
    config = ctx.config
    request: dict[str, Any] = {
        "model": config.spec.model,
        "max_tokens": max(1, output_allowance(ctx)) if max_tokens is None else max_tokens,
        "messages": list(ctx.state.messages),
    }
    if config.spec.system is not None:
        request["system"] = config.spec.system
    if ctx.state.model_settings:
        request.update(settings_params(request_settings(ctx, ctx.state.model_settings)))
        fit_thinking(request)
    tools = config.tools.params
    if tools:  # the loop's tools and the server tools
        request["tools"] = tools
        if not tools_allowed:
            request["tool_choice"] = {"type": "none"}
    add_output_format(request, config.output)  # merged into the settings' output_config, if any
    fallback(ctx, request)
    responses = ctx.state.responses
    container = responses[-1].container_id if responses else None
    if container is not None:  # code execution's pending calls continue in the same container
        request["container"] = container
    hour = add_breakpoints(
        request, ctx.config.cache, ctx.markers, automatic=ctx.config.automatic_cache
    )  # copies: the transcript stays as is
    ctx.request_checker.check(request, ctx.scratch.response, ctx.scratch.received, hour=hour)
    return request


async def propose(ctx: RunContext) -> Trigger:
    """Call the model; record its response as the run's current turn.

    In a delegation tree, or with budget pools, the call's worst case is reserved from the
    tree's ledger and each pool first, its `max_tokens` clamped to what they grant; a call they
    cannot cover is not sent (`_core/reservation.py`). The response settles the reservation; a
    failure or a cancellation releases it.
    """
    if not ledgers(ctx):  # nothing to reserve from: the call as it is, no wrapper around it
        return await _propose(ctx, None)
    return await around(ctx, lambda max_tokens: _propose(ctx, max_tokens))


async def _propose(ctx: RunContext, max_tokens: int | None) -> Trigger:
    state = ctx.state
    final = state.final_call_due
    try:
        request = build_request(ctx, tools_allowed=not final, max_tokens=max_tokens)
    except InvalidRequest as exc:  # a bug of the loop: the API would answer 400, so never sent
        ctx.error("invalid_request", exc)
        _failed(ctx, str(exc))
        state.final_call_due = False
        return Trigger.HALT
    ctx.scratch.response = None  # its request checked: held no longer
    ctx.emit(  # the request as sent: a refusal's retry names its fallback model
        ModelRequest(
            seq=ctx.next_seq(),
            task_id=state.task_id,
            at=ctx.epoch + time.perf_counter(),
            step=state.step,
            model=str(request["model"]),
            messages=len(request["messages"]),
            max_tokens=int(request["max_tokens"]),
        )
    )
    started = time.perf_counter()
    response = await _call_model(ctx, request)
    ctx.scratch.retried = (
        0 if ctx.scratch.fallback is None else ctx.scratch.fallback.position
    )  # once per model of the route
    ctx.scratch.fallback = None
    ctx.scratch.compacted_retry, ctx.scratch.compact_now = (
        ctx.scratch.compact_now,
        False,
    )  # and the compacting retry
    if response is None:
        state.final_call_due = False
        return Trigger.HALT
    # The final answer at a spent budget is not a step (max_steps stays a ceiling), nor a retry.
    if not final and not ctx.scratch.retried:
        state.step += 1
    _accept(ctx, response, time.perf_counter() - started, final=final, model=str(request["model"]))
    return Trigger.PROPOSED


async def _call_model(ctx: RunContext, request: dict[str, Any]) -> Message | None:
    """Call the model; a failure or an unusable response is recorded and stops the run (None)."""
    messages = messages_of(ctx.config.client, beta=uses_beta(ctx.state.model_settings))
    create = messages.create if ctx.watch is None else streamed(ctx, messages, ctx.watch)
    model_span = ctx.model_span
    try:
        if model_span is None:  # an untraced run
            response: Any = as_message(await create(**request))  # checked by `problem` below
        else:
            with model_span(request):  # the call's chat span is the current span (the SDK's is its child)
                response = as_message(await create(**request))
    except (anthropic.AuthenticationError, anthropic.NotFoundError, TypeError) as exc:
        wrong = setup_error(exc, ctx.config.client, str(request["model"]))
        if wrong is None:
            _unusable(ctx, exc)
            return None
        raise wrong from exc  # the driver records it, ends the run failed and lets it out
    except anthropic.APIError as exc:
        _unusable(ctx, exc)
        return None
    except ScriptExhausted:
        raise  # a test harness running out of script: the developer's error, raised as itself
    except Exception as exc:  # the boundary: whatever else the client raises ends the run as failed
        _unusable(ctx, exc)
        return None
    fault = problem(response)
    if fault is not None:
        ctx.error("model_response", ValueError(fault))
        _failed(ctx, f"the model's response is not usable: {fault}")
        return None
    usable: Message = response
    return usable


def _unusable(ctx: RunContext, exc: Exception) -> None:
    if isinstance(exc, anthropic.APIError):
        ctx.error("model_api", exc)
        _failed(ctx, f"model API error: {type(exc).__name__}: {exc}")
    else:
        ctx.error("model_response", exc)
        _failed(ctx, f"the model call failed: {type(exc).__name__}")


def _failed(ctx: RunContext, detail: str) -> None:
    state = ctx.state
    if state.stop_reason is None:
        finish(ctx, StopReason.FAILED, detail)
    else:  # the final-answer call failed: keep the budget's reason
        state.stop_detail = f"{state.stop_detail}; the final-answer call failed"


def _accept(ctx: RunContext, response: Message, duration_s: float, *, final: bool, model: str) -> None:
    """Record a response: transcript (exactly as received), turn, usage, cost (at `model`, the
    model the request went to), and its event."""
    state = ctx.state
    before = input_estimate(ctx)  # the request's input, before this response is counted
    # Exactly the JSON received (thinking signatures, server tool blocks), dumped once.
    received, shapes = received_turn(response.content)
    ctx.scratch.received = received
    state.messages.append(received)
    # The record keeps the envelope and the transcript's own blocks; the SDK objects go with the
    # next response (`Scratch.response`).
    record = response_record(response, received["content"])
    if state.responses and record.extra_json is not None:
        # The envelope's other fields (`container`, `stop_details`, ...) as the last response
        # sent them: that record's dict, one a run while they repeat, not one a response.
        earlier = state.responses[-1].extra_json
        if earlier == record.extra_json:
            record.extra_json = earlier
    state.responses.append(record)
    # Its blocks' shapes read in the same pass; the response itself held until its validation.
    ctx.scratch.response = ResponseShape(response, shapes, message=response)
    calls: list[ToolCall] = []
    keys: list[str] = []  # a call from code execution is never a repeat
    step = state.step
    for block in response.content:  # one pass: a call and its key per tool_use block
        if isinstance(block, ToolUseBlock):
            calls.append(ToolCall.of(id=block.id, name=block.name, input=block.input, step=step))
            keys.append(repeat_key(block))
    state.turn = turn = Turn.of(calls=calls, keys=keys, final=final)
    ctx.scratch.plan = None
    ctx.scratch.counted_input = None
    if final:
        state.final_call_due = False  # made: the run stops after its validation
    usage = response.usage
    cache_read = usage.cache_read_input_tokens or 0
    cache_creation = usage.cache_creation_input_tokens or 0
    totals = state.usage
    count_response(ctx, usage, model)  # its iterations too, each at its own model's price
    server_uses = server_tool_uses(usage)
    for kind, count in server_uses.items():
        totals.server_tool_uses[kind] = totals.server_tool_uses.get(kind, 0) + count
    # Built here (one a turn; not `ctx.event`'s keywords). Redacted first: a redact hook that
    # raises takes no `seq`.
    stop_reason: str | None = response.stop_reason
    if stop_reason not in KNOWN_STOP_REASONS and stop_reason is not None:
        stop_reason = ctx.redact(stop_reason)
    stop_sequence = None if response.stop_sequence is None else ctx.redact(response.stop_sequence)
    tools = [name for name, _ in ctx.recorded(turn)]
    ctx.emit(
        Proposal.of(
            seq=ctx.next_seq(),
            task_id=state.task_id,
            at=ctx.epoch + time.perf_counter(),
            step=state.step,
            stop_reason=stop_reason,
            stop_sequence=stop_sequence,
            tools=tools,
            duration_s=duration_s,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_input_tokens=cache_read,
            cache_creation_input_tokens=cache_creation,
            server_tool_uses=server_uses,
            final_answer=final,
            response=ctx.deferred(state.responses[-1]),
        )
    )
    after_response(ctx, response, before)  # a compaction's event and transcript


def repeat_key(block: ToolUseBlock) -> str:
    """A tool_use's key in the repeat history: `canonical`, or `FROM_CODE` for a call a program
    made (programmatic tool calling: `caller` set, not `direct`), which runs each time."""
    caller = block.caller
    if caller is None or field_of(caller, "type") == "direct":
        return canonical(block.name, block.input)
    return FROM_CODE
