"""Delegation: a loop as a tool of another loop, its run a child of the run that calls it.

`AgentLoop.as_tool` makes the `Tool`; its tool function starts the child run here. The call
passes the parent's gate like any tool's (policy, approval, repeats, timeouts, the tool-call
budget). Then the tree's own limits: a child deeper than `Budget.max_depth` or past the
parent's `Budget.max_children` is denied before it starts, as an error result. The child runs
as its own run (its task id, state, events, checkpoint in its loop's store), linked to its
parent (`state.parent_task_id`, the parent's `state.children`), on the tree's ledger and
deadline (`_core/tree.py`); its events reach the parent's `on_event` hooks and stream. A
completed child answers the call with its answer (its validated output as JSON); any other
stop answers it with an error naming the stop reason and the child's task id.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import pydantic

from ..records import StopReason
from ..state import LoopResult
from ..statemachine.table import Phase
from ..tools import Tool, ToolContext
from .checkpointing import SAVING
from .context import RunContext, Watch
from .ledger import Node
from .output import output_of
from .results import Failure
from .sessions import resume, start_new
from .tree import CURRENT, Delegated, decided, joining, open_tree, tree_total, waits_for_human

if TYPE_CHECKING:
    from ..events import Event
    from .config import EventHook, LoopConfig

TASK_SCHEMA: Final = {
    "type": "object",
    "properties": {
        "task": {
            "type": "string",
            "description": "The task for the delegated agent: everything it needs to know, in full.",
        }
    },
    "required": ["task"],
    "additionalProperties": False,
}
"""The input of a delegation tool: the child's task."""

ALONE: Final[ToolContext[Any]] = ToolContext(
    task_id="", trace_id="", step=0, tool_use_id="", idempotency_key=""
)
"""The context of a delegation tool called as its function, outside any run."""


def delegation_tool(
    config_of: Callable[[], LoopConfig],
    name: str,
    description: str,
    *,
    timeout_s: float | None = None,
    requires_approval: bool = False,
) -> Tool:
    """A tool whose call runs the loop `config_of()` returns as a child of the calling run.

    Raises:
        ConfigurationError: a name the API rejects, an empty description, a bad timeout.
    """

    async def delegate(task: str, context: ToolContext = ALONE) -> object:
        return await run_child(config_of(), task, context)

    return Tool(
        name=name,
        description=description,
        input_schema=TASK_SCHEMA,
        handler=delegate,
        timeout_s=timeout_s,
        requires_approval=requires_approval,
    )


async def run_child(config: LoopConfig, task: str, context: ToolContext = ALONE) -> str | Failure | Delegated:
    """Run `task` on `config`'s loop as a child of the current run (a run alone when the tool is
    called outside any run), and answer with its outcome.

    The child's task id is derived from the call's idempotency key, so the call run again (its
    parent resumed after a crash, or after a human decided) finds its child in the child loop's
    store: one killed mid-run continues, one waiting for a human is resumed with the decisions
    its parent's resume was given, one that stopped answers as it stopped. The outcome comes
    back as a `Delegated` value, which the parent takes in as the call is answered (`joined`):
    a child that stops waiting for a human (and can be resumed: its loop has a store) makes the
    parent stop `needs_human` after its batch (`hold_for_children`).
    """
    parent = CURRENT.get()
    if parent is None or context is ALONE:  # the tool called as its function, outside a run
        return outcome(await start_new(config, task), config)
    node = open_tree(parent)
    task_id = child_task_id(context.idempotency_key)
    if task_id not in parent.state.children:
        denied = _denied(parent, node)
        if denied is not None:
            return Failure(denied)
        parent.state.children.append(task_id)  # before it starts: a checkpoint names it
        saving = SAVING.get()
        if saving is not None:  # the link is in the store before the child is
            await saving.save_now()
    own = config.spec.budget.max_depth
    depth = node.depth + 1
    child = Node(
        ledger=node.ledger,
        depth=depth,
        max_depth=_tightest(node.max_depth, None if own is None else depth + own),
        deadline=parent.deadline,
        parent_task_id=parent.state.task_id,
        pools=parent.config.pools,  # the tree's and the parent's own: the child reserves from them too
    )
    with joining(child):
        result = await _start_or_continue(_counted_with(config, parent.config), task, task_id, parent)
    waiting = result.state if config.store is not None and waits_for_human(result.state) else None
    return Delegated(outcome(result, config), task_id, result.usage, waiting)


def child_task_id(key: str) -> str:
    """The task id of the child a delegation's call runs: the same for the same call."""
    return hashlib.sha256(key.encode()).hexdigest()[:32]


async def _start_or_continue(
    config: LoopConfig, task: str, task_id: str, parent: RunContext
) -> LoopResult[Any]:
    """Start the child, or continue the one its call started before (found in its store)."""
    wiring: dict[str, Any] = {
        "on_event": _relay(parent),
        "watch": None if parent.watch is None else Watch(parent.watch.deliver, parent.watch.delta),
        "deps": parent.deps,
    }
    store = config.store
    stored = None if store is None else await store.load(task_id)
    if stored is None:
        return await start_new(
            config,
            task,
            task_id=task_id,
            trace_id=parent.state.trace_id,
            **wiring,  # one trace for the tree
        )
    if stored.phase is not Phase.STOPPED:  # killed mid-run: the same run continues
        return await resume(config, task_id, approvals=None, reply=None, cancel=None, **wiring)
    if waits_for_human(stored):
        decisions = decided()
        mine = {
            p.tool_use_id: decisions[p.tool_use_id]
            for p in stored.pending_approvals
            if p.tool_use_id in decisions
        }
        question = stored.escalation
        reply = None if question is None else decisions.get(question.tool_use_id)
        if len(mine) == len(stored.pending_approvals) and (question is None or isinstance(reply, str)):
            return await resume(
                config,
                task_id,
                approvals=mine,
                reply=reply if isinstance(reply, str) else None,
                cancel=None,
                **wiring,
            )
    return LoopResult(  # it stopped: it answers as it stopped, nothing of it runs again
        stop_reason=stored.stop_reason or StopReason.FAILED,
        answer=stored.answer,
        state=stored,
        events=[],
        output=output_of(config.output, stored.answer),
        tree_usage=tree_total(stored),
    )


def _counted_with(config: LoopConfig, parent: LoopConfig) -> LoopConfig:
    """The child's loop, counted on its parent's metrics registry when it has no metrics of its
    own (`metrics=` not given) and its parent's loop has."""
    mine, theirs = config.metrics, parent.metrics
    if not config.metrics_default or parent.metrics_default or mine is None or theirs is None:
        return config
    return dataclasses.replace(config, metrics=mine.on(theirs))


def _denied(parent: RunContext, node: Node) -> str | None:
    """Why the parent may not start one more child, or None."""
    depth = node.depth + 1
    if node.max_depth is not None and depth > node.max_depth:
        return (
            f"delegation denied: the child would run at depth {depth} of the tree, deeper than "
            f"max_depth={node.max_depth} (the first run is depth 0); do the task yourself"
        )
    limit = parent.config.spec.budget.max_children
    if limit is not None and len(parent.state.children) >= limit:
        return (
            f"delegation denied: this run has started its max_children={limit} delegated runs; "
            "do the task yourself"
        )
    return None


def _tightest(first: int | None, second: int | None) -> int | None:
    if first is None:
        return second
    return first if second is None else min(first, second)


def _relay(parent: RunContext) -> EventHook | None:
    """The child's events told to the parent's `on_event` hooks (the loop's and the run's; a
    child's run hook relays to its own parent in turn)."""
    hooks = parent.relay
    if not hooks:
        return None

    def relay(event: Event) -> None:
        for hook in hooks:
            hook(event)

    return relay


def outcome(result: LoopResult[Any], config: LoopConfig) -> str | Failure:
    """A child's result as its tool result: its answer (its output as JSON, with an output
    type) when it completed, else an error naming its stop reason and task id."""
    state = result.state
    if result.stop_reason is StopReason.COMPLETED:
        if config.output is None:
            return result.answer or ""
        value = result.output
        if isinstance(value, pydantic.BaseModel):
            return value.model_dump_json()
        return json.dumps(value, ensure_ascii=False)
    detail = f": {state.stop_detail}" if state.stop_detail else ""
    return Failure(f"the delegated run {state.task_id} stopped {result.stop_reason}{detail}")
