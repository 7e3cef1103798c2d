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
import dataclasses
from collections.abc import Generator, Mapping
from contextvars import ContextVar, Token
from types import MappingProxyType
from typing import TYPE_CHECKING, Final, final

from ..events import ApprovalRequested, PendingCall
from ..policy import ApprovalDecision
from ..records import StopReason, Turn, Usage
from .answers import finish
from .context import RunContext
from .ledger import Node, TreeLedger
from .results import Failure, refused

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


def passed_down(
    state: LoopState, approvals: Mapping[str, ApprovalDecision] | None, reply: str | None
) -> dict[str, ApprovalDecision]:
    """What a resume of `state` (read before `prepare` clears its wait) passes down its tree: the
    decisions on calls of the runs below it (`state.waiting_on`), and the reply to a question one
    of them asked, under that question's tool_use_id."""
    below = {key: value for key, value in (approvals or {}).items() if key in state.waiting_on}
    escalation = state.escalation
    if escalation is not None and reply is not None and escalation.tool_use_id in state.waiting_on:
        below[escalation.tool_use_id] = reply
    return below


def enter(ctx: RunContext) -> Token[RunContext | None]:
    """The run starts: it takes the node it was started to join, and is its task's current run."""
    node = _JOINING.get()
    if node is not None:
        _JOINING.set(None)  # its own tool calls start runs of their own, not of this node
        ctx.tree = node
        if ctx.state.parent_task_id is None:
            ctx.state.parent_task_id = node.parent_task_id
        if node.pools:  # the tree's pools, then the child's own others: its configuration's
            names = {pool.name for pool in node.pools}
            own = tuple(pool for pool in ctx.config.pools if pool.name not in names)
            ctx.config = dataclasses.replace(ctx.config, pools=node.pools + own)
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
    usage = tree_total(ctx.state) or ctx.state.usage  # a resumed run: what its tree spent before
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
        pools=ctx.config.pools,
    )
    return ctx.tree


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


def tree_total(state: LoopState) -> Usage | None:
    """What the run and every run below it spent, over all their sessions (`state.below`); None
    for a run that delegated nothing."""
    if not state.below:
        return None
    total = state.usage
    for usage in state.below.values():
        total = add_usage(total, usage)
    return total


def waits_for_human(state: LoopState) -> bool:
    """The run stopped `needs_human` for calls waiting for approval or for a reply to the model's
    question: a resume with the human's decisions continues it."""
    return (
        state.stop_reason is StopReason.NEEDS_HUMAN
        and (bool(state.pending_approvals) or state.escalation is not None)
        and state.turn is not None
        and state.turn.awaiting_human
    )


def hold_for_children(ctx: RunContext, turn: Turn) -> None:
    """Children of this batch wait for a human: the run stops `needs_human`, listing their waiting
    calls as its own pending approvals and the first question one of them asked as its own
    escalation (`state.waiting_on` says whose). Their delegation calls' answers are provisional
    and the calls count as not run (nor against `max_tool_calls`): `resume` runs them again,
    which resumes the children; the other calls of the batch keep their results."""
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
        if index in turn.invoked:  # the same call runs again on resume, counted then
            turn.invoked.remove(index)
            state.tool_calls -= 1
        for pending in child.pending_approvals:
            state.pending_approvals.append(pending)
            state.waiting_on[pending.tool_use_id] = child.waiting_on.get(pending.tool_use_id, child.task_id)
        question = child.escalation
        if question is not None and state.escalation is None:  # one question at a time
            state.escalation = question
            state.waiting_on[question.tool_use_id] = child.waiting_on.get(question.tool_use_id, child.task_id)
    turn.awaiting_human = True
    if state.pending_approvals:
        ctx.event(
            ApprovalRequested,
            calls=[
                PendingCall(tool=pending.tool, tool_use_id=pending.tool_use_id)
                for pending in state.pending_approvals
            ],
        )
    runs = ", ".join(listed)
    if state.escalation is not None and not state.pending_approvals:
        detail = f"the delegated run {runs} asked for a human: {state.escalation.reason}"
    else:
        tools = ", ".join(pending.tool for pending in state.pending_approvals)
        detail = f"approval required for {tools} in the delegated run {runs}"
    finish(ctx, StopReason.NEEDS_HUMAN, detail)


@final
class Delegated:
    """A delegated run's outcome, as its delegation tool's value: the answer to the call, and what
    the calling run takes in when the call is answered (`joined`): the child's task id, the usage
    of its tree, and its state when it waits for a human. A plain value, so that a durable step
    (DBOS) records it whole, and a workflow replaying the step takes in what the live call did."""

    __slots__ = ("answer", "task_id", "usage", "waiting")

    def __init__(self, answer: str | Failure, task_id: str, usage: Usage, waiting: LoopState | None) -> None:
        self.answer = answer
        self.task_id = task_id
        self.usage = usage
        self.waiting = waiting


def joined(ctx: RunContext, call_id: str, delegated: Delegated) -> str | Failure:
    """The run takes in its delegation's outcome (the child listed, its usage added, a child that
    waits for a human noted for `hold_for_children`); the answer to the call."""
    node = open_tree(ctx)
    state = ctx.state
    if delegated.task_id not in state.children:  # a replayed step: its child was not started here
        state.children.append(delegated.task_id)
    state.below[delegated.task_id] = delegated.usage  # its tree's total so far: replaces the last
    if delegated.waiting is not None:
        node.waiting[call_id] = delegated.waiting
    return delegated.answer
