"""A refusal retried on each model of `fallback_model` in turn, with the refusal's fallback credit token.

The API may answer a refusal with `stop_details.fallback_credit_token` (modelled by the SDK's
beta `BetaRefusalStopDetails`; the plain `RefusalStopDetails` of this SDK keeps it as an extra
field): sent as `fallback_credit_token` with the retry of the same request body on the fallback
model, it bills the retry's cache writes of the warm prefix at the cache-read rate. The plain
`messages.create` of this SDK has no such parameter, so it goes in `extra_body`.
"""

from __future__ import annotations

from typing import Any

from anthropic.types import Message

from ..policy import Route, SignalContext, Verdict
from ..records import StopReason
from .compaction import retry_compacted
from .context import Retry, RunContext


def credit_token(response: Message) -> str | None:
    """The refusal's `fallback_credit_token`, when the API gave one."""
    token = getattr(response.stop_details, "fallback_credit_token", None)
    return token if isinstance(token, str) and token else None


def retry_on_fallback(ctx: RunContext, response: Message) -> bool:
    """Set up the retry of a refused request on the fallback model; False when not to retry.

    Each model of the route (`fallback_model`) is tried once, in order, per refusal: the last
    one's refusal stops the run; a model that is the run's own is passed over. The refused turn
    leaves the transcript, so the retry's request body is the refused one's.
    """
    route = ctx.config.spec.fallback_model or ()
    turn = ctx.state.turn
    if turn is not None and turn.calls:
        return False  # a refused turn with client calls is answered and stops: it is not resent
    scratch, model = ctx.scratch, ctx.config.spec.model
    position = next((at for at in range(scratch.retried + 1, len(route) + 1) if route[at - 1] != model), None)
    if position is None:
        return False
    messages = ctx.state.messages
    if messages and messages[-1]["role"] == "assistant" and messages[-1] is scratch.received:
        messages.pop()
    scratch.fallback = Retry(
        model=route[position - 1], credit_token=credit_token(response), position=position
    )
    return True


def fallback(ctx: RunContext, request: dict[str, Any]) -> None:
    """The retry's request: the fallback model, and the credit token in the body."""
    retry = ctx.scratch.fallback
    if retry is None:
        return
    request["model"] = retry.model
    if retry.credit_token is not None:
        extra: dict[str, Any] = dict(request.get("extra_body") or {})
        extra["fallback_credit_token"] = retry.credit_token
        request["extra_body"] = extra


def after_stop(ctx: RunContext, route: Route, context: SignalContext) -> Route:
    """A refusal is retried on the route's next fallback model; a full context window keeps the
    answer so far (not a complete one: the stop reason says so)."""
    if route.stop_reason is None:  # tool calls, an answer: nothing to retry
        return route
    response = ctx.response()
    if route.stop_reason is StopReason.REFUSED and retry_on_fallback(ctx, response):
        detail = f"{route.detail}; " if route.detail else ""
        model = ctx.scratch.fallback.model if ctx.scratch.fallback is not None else ""
        return Route(verdict=Verdict.RESUME, detail=f"{detail}retried on {model}")
    retried = retry_compacted(ctx, route)  # with compaction on: once, compacting first
    if retried is not route:
        return retried
    if route.stop_reason is StopReason.CONTEXT_EXCEEDED:
        ctx.state.answer = context.answer(response) or None
    return route


def earlier_text(ctx: RunContext, response: Message, context: SignalContext) -> str:
    """The text of the turn so far, before a resumed response: a paused, cut-off or compacted
    turn goes on in the next response; a refusal retried keeps the turn before it."""
    if ctx.scratch.fallback is not None:
        return ctx.state.earlier_text
    resumed = response.stop_reason in ("pause_turn", "max_tokens", "compaction")
    return context.answer(response) if resumed else ""
