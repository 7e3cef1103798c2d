"""Server-side compaction in a run (`AgentLoop(compaction=...)`, docs/cost.md).

- A response whose `usage.iterations` holds `compaction` entries billed them on top of its
  top-level usage (which leaves them out): they are added to the run's usage and cost
  (`_core.pricing`, with the advisor's).
- A response holding a `compaction` block emits `Compacted` and the transcript keeps what the
  API reads next: the run's opening messages, then the turn holding the block, as received, and
  what follows (the API drops every block before the compaction block; the trace keeps all).
- `model_context_window_exceeded` with compaction on: the turn is dropped and retried once with
  the compaction trigger at the API's minimum, so the API compacts first; a second one in a row
  stops the run `context_exceeded`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from anthropic.types import Message, Usage

from ..compaction import MIN_TRIGGER_TOKENS, context_settings
from ..events import Compacted
from ..policy import Route, Verdict
from ..records import StopReason
from .blocks import field_of
from .context import RunContext


def compaction_usages(usage: object) -> list[Usage]:
    """The `compaction` entries of `usage.iterations`, each as the `Usage` it is billed as
    (at the response's speed, service tier and geography)."""
    iterations: Any = field_of(usage, "iterations") or []
    found: list[Usage] = []
    for entry in iterations:
        if field_of(entry, "type") != "compaction":
            continue
        found.append(
            Usage(
                input_tokens=int(cast(int, field_of(entry, "input_tokens") or 0)),
                output_tokens=int(cast(int, field_of(entry, "output_tokens") or 0)),
                cache_read_input_tokens=int(cast(int, field_of(entry, "cache_read_input_tokens") or 0)),
                cache_creation_input_tokens=int(
                    cast(int, field_of(entry, "cache_creation_input_tokens") or 0)
                ),
                service_tier=cast(Any, field_of(usage, "service_tier")),
                inference_geo=cast(Any, field_of(usage, "inference_geo")),
                speed=cast(Any, field_of(usage, "speed")),
            )
        )
    return found


def after_response(ctx: RunContext, response: Message, tokens_before: int) -> None:
    """On a `compaction` block, emit `Compacted` and keep the transcript from the block's turn on
    (its billed usage is counted with the response's, `_core.pricing`). `tokens_before`: the
    request's input as the loop estimated (or counted) it."""
    state = ctx.state
    # every content block has its `type` (a type the SDK does not model included: as an attribute)
    blocks = [block for block in response.content if getattr(block, "type", None) == "compaction"]
    if not blocks:
        return
    usages = compaction_usages(response.usage)  # counted in the run's usage by `_core.pricing`
    read = sum(
        u.input_tokens + (u.cache_read_input_tokens or 0) + (u.cache_creation_input_tokens or 0)
        for u in usages
    )
    summary = cast(str, field_of(blocks[-1], "content") or "")
    ctx.event(
        Compacted,
        tokens_before=max(tokens_before, read),
        tokens_after=sum(u.output_tokens for u in usages) if usages else len(summary) // 4,
    )
    messages = state.messages
    held = next(i for i in range(len(messages) - 1, -1, -1) if messages[i] is ctx.scratch.received)
    if held > state.opening:  # what lies between is dropped by the API: not sent again
        del messages[state.opening : held]


def request_settings(ctx: RunContext, settings: Mapping[str, Any]) -> Mapping[str, Any]:
    """The settings of the next request: a retry after a full context window compacts at the
    API's minimum trigger."""
    spec = ctx.config.spec
    if not ctx.scratch.compact_now or spec.compaction is None:
        return settings
    management = cast(Mapping[str, Any], settings.get("context_management") or {})
    edits = [edit for edit in management.get("edits") or () if edit.get("type") != "compact_20260112"]
    base = {**settings, "context_management": {**management, "edits": edits}}
    return context_settings(base, compaction=spec.compaction, trigger_tokens=MIN_TRIGGER_TOKENS)


def retry_compacted(ctx: RunContext, route: Route) -> Route:
    """A full context window with compaction on: retried once, compacting first."""
    state = ctx.state
    turn = state.turn
    if (
        route.stop_reason is not StopReason.CONTEXT_EXCEEDED
        or ctx.config.spec.compaction is None
        or ctx.scratch.compacted_retry
        or (turn is not None and turn.calls)
    ):
        return route
    messages = state.messages
    if messages and messages[-1]["role"] == "assistant" and messages[-1] is ctx.scratch.received:
        messages.pop()  # the cut-off turn leaves the transcript: the request is sent again
    ctx.scratch.compact_now = True
    return Route(verdict=Verdict.RESUME, detail="context window full: retried, compacting first")
