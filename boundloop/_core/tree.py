"""A run's part in a delegation tree: which run is running, the node a child joins, and the
ledger's reservation around each model call (`_core/ledger.py`).

A run is its task's current run (`CURRENT`) while it is driven, so a delegation tool called
from its batch knows its parent. A child is started with the node it joins (`joining`), which
its driver takes when it begins (`enter`). A run outside any tree has no node and never
touches a ledger: a run that delegates opens its tree's ledger at its first delegation
(`open_tree`), from its own budget and what it has spent so far.
"""

from __future__ import annotations

import contextlib
from collections.abc import Generator, Mapping
from contextvars import ContextVar, Token
from types import MappingProxyType
from typing import TYPE_CHECKING, Final

import anyio

from ..events import ApprovalRequested, PendingCall
from ..policy import ApprovalDecision
from ..pools.ledger import Claim, Grant, Shortfall
from ..records import Exceeded, Limit, StopReason, Turn, Usage
from ..statemachine.table import Trigger
from .answers import finish
from .budget import next_input_estimate, output_allowance
from .context import RunContext
from .ledger import Node, TreeLedger
from .pricing import call_price, ceiling_price
from .results import refused

if TYPE_CHECKING:
    from ..state import LoopState

CURRENT: Final[ContextVar[RunContext | None]] = ContextVar("boundloop_current_run", default=None)
"""The run whose work is running in this task (its tool calls' tasks inherit it)."""

_JOINING: Final[ContextVar[Node | None]] = ContextVar("boundloop_joining", default=None)
"""The node the next run started in this task joins (set by a delegation, taken by the run)."""


_DECIDED: Final[ContextVar[Mapping[str, ApprovalDecision]]] = ContextVar(
    "boundloop_decided", default=MappingProxyType({})
)
"""A resumed run's human decisions for calls of the delegated runs below it (by tool_use_id):
read by its delegations, which resume the waiting runs with them."""


@contextlib.contextmanager
def deciding(decisions: Mapping[str, ApprovalDecision]) -> Generator[None]:
    """The run resumed inside this block passes `decisions` down to its delegated runs."""
    token = _DECIDED.set(decisions)
    try:
        yield
    finally:
        _DECIDED.reset(token)


def decided() -> Mapping[str, ApprovalDecision]:
    """The decisions the current resume passes down (empty: none)."""
    return _DECIDED.get()


def enter(ctx: RunContext) -> Token[RunContext | None]:
    """The run starts: it takes the node it was started to join, and is its task's current run."""
    node = _JOINING.get()
    if node is not None:
        _JOINING.set(None)  # its own tool calls start runs of their own, not of this node
        ctx.tree = node
        if ctx.state.parent_task_id is None:
            ctx.state.parent_task_id = node.parent_task_id
        if node.deadline is not None:  # the tree's deadline is the run's too
            ctx.deadline = node.deadline if ctx.deadline is None else min(ctx.deadline, node.deadline)
    return CURRENT.set(ctx)


def leave(token: Token[RunContext | None]) -> None:
    """The run has stopped: its task's current run is the one before it."""
    CURRENT.reset(token)


def joins_tree() -> bool:
    """Whether the run starting now in this task is a delegated child (it joins a node)."""
    return _JOINING.get() is not None


@contextlib.contextmanager
def joining(node: Node) -> Generator[None]:
    """The run started inside this block joins `node`."""
    token = _JOINING.set(node)
    try:
        yield
    finally:
        _JOINING.reset(token)


def open_tree(ctx: RunContext) -> Node:
    """The run's node, made at its first delegation: the root of a tree whose ledger holds the
    run's cost and token ceilings and what the run has spent so far."""
    if ctx.tree is not None:
        return ctx.tree
    budget = ctx.config.spec.budget
    usage = ctx.state.usage
    ctx.tree = Node(
        ledger=TreeLedger(
            max_cost_usd=budget.max_cost_usd,
            max_total_tokens=budget.max_total_tokens,
            spent_usd=usage.cost_usd or 0.0,
            spent_tokens=usage.total_tokens,
        ),
        depth=0,
        max_depth=budget.max_depth,
        deadline=ctx.deadline,
        parent_task_id=None,
    )
    return ctx.tree


async def reserve(ctx: RunContext, node: Node) -> Grant | Shortfall:
    """Reserve the next call's worst case from the tree's ledger: its input estimate (exact with
    `Budget.count_tokens`) and the `max_tokens` its own budget allows, at its model's price (a
    model without one at the highest known rates)."""
    estimate = next_input_estimate(ctx)
    price = call_price(ctx) or ceiling_price(ctx.config.prices)
    price = price.at(estimate)
    claim = Claim(
        input_tokens=estimate,
        output_tokens=max(1, output_allowance(ctx)),
        input_usd=price.input_per_mtok / 1_000_000,
        output_usd=price.output_per_mtok / 1_000_000,
    )
    return await node.ledger.reserve(claim)


async def settle(
    ctx: RunContext, node: Node, grant: Grant, before: tuple[float | None, int], *, billed: bool
) -> None:
    """Settle the call's reservation with what its response added to the run's cost and tokens
    (`before`: `marked(ctx)` before the call), or release it when no response was accepted;
    never cut short by a cancellation."""
    with anyio.CancelScope(shield=True):
        if not billed:
            await node.ledger.release(grant)
            return
        cost, tokens = marked(ctx)
        await node.ledger.settle(
            grant,
            # Not tracked (no price): the worst case stays spent.
            cost_usd=grant.cost_usd if cost is None or before[0] is None else cost - before[0],
            tokens=tokens - before[1],
        )


def marked(ctx: RunContext) -> tuple[float | None, int]:
    """The run's cost (None: not tracked) and tokens so far."""
    usage = ctx.state.usage
    return usage.cost_usd, usage.total_tokens


def uncovered(ctx: RunContext, shortfall: Shortfall) -> Trigger:
    """The tree cannot cover the next call: it is not sent, and the run stops at the ceiling
    (`cost_budget`, `token_budget`); a final-answer call is dropped, the stop's reason kept."""
    state = ctx.state
    detail = (
        f"the tree's {shortfall.limit}={shortfall.value:g} cannot cover the next call "
        f"(spent and reserved across the tree: {shortfall.used:g})"
    )
    if state.stop_reason is None:
        state.exceeded = Exceeded(limit=shortfall.limit, value=shortfall.value, used=shortfall.used)
        finish(ctx, Limit.of(shortfall.limit).stop, detail)
    else:
        state.stop_detail = f"{state.stop_detail}; the final-answer call was not made: {detail}"
    state.final_call_due = False
    return Trigger.HALT


def add_usage(total: Usage | None, usage: Usage) -> Usage:
    """`total` plus `usage` (a new `Usage`; cost None when either is not tracked)."""
    if total is None:
        total = Usage()
    kinds = dict(total.server_tool_uses)
    for kind, count in usage.server_tool_uses.items():
        kinds[kind] = kinds.get(kind, 0) + count
    return Usage(
        input_tokens=total.input_tokens + usage.input_tokens,
        output_tokens=total.output_tokens + usage.output_tokens,
        cache_read_input_tokens=total.cache_read_input_tokens + usage.cache_read_input_tokens,
        cache_creation_input_tokens=total.cache_creation_input_tokens + usage.cache_creation_input_tokens,
        cost_usd=None
        if total.cost_usd is None or usage.cost_usd is None
        else total.cost_usd + usage.cost_usd,
        cache_savings_usd=None
        if total.cache_savings_usd is None or usage.cache_savings_usd is None
        else total.cache_savings_usd + usage.cache_savings_usd,
        server_tool_uses=kinds,
    )


def waits_for_approvals(state: LoopState) -> bool:
    """The run stopped `needs_human` for calls waiting for approval (not for the model's question)."""
    return (
        state.stop_reason is StopReason.NEEDS_HUMAN
        and bool(state.pending_approvals)
        and state.escalation is None
        and state.turn is not None
        and state.turn.awaiting_human
    )


def hold_for_children(ctx: RunContext, turn: Turn) -> None:
    """Children of this batch wait for a human: the run stops `needs_human`, listing their waiting
    calls as its own pending approvals (`state.waiting_on` says whose). Their delegation calls'
    answers are provisional and the calls count as not run: `resume` runs them again, which
    resumes the children; the other calls of the batch keep their results."""
    node = ctx.tree
    assert node is not None
    waiting, node.waiting = node.waiting, {}
    state = ctx.state
    listed: list[str] = []
    for index, call in enumerate(turn.calls):
        child = waiting.get(call.id)
        if child is None:
            continue
        listed.append(child.task_id)
        turn.answers[index] = refused(
            call, "denied", f"not run: the delegated run {child.task_id} waits for a human"
        )
        if index in turn.invoked:
            turn.invoked.remove(index)
        for pending in child.pending_approvals:
            state.pending_approvals.append(pending)
            state.waiting_on[pending.tool_use_id] = child.waiting_on.get(pending.tool_use_id, child.task_id)
    turn.awaiting_human = True
    ctx.event(
        ApprovalRequested,
        calls=[
            PendingCall(tool=pending.tool, tool_use_id=pending.tool_use_id)
            for pending in state.pending_approvals
        ],
    )
    tools = ", ".join(pending.tool for pending in state.pending_approvals)
    finish(
        ctx, StopReason.NEEDS_HUMAN, f"approval required for {tools} in the delegated run {', '.join(listed)}"
    )
