"""Validate: route on the typed stop_reason, then decide every proposed call before any runs.

The order of the checks is the policy's: forbidden, registry, allow-list, JSON schema, the
run's history (repeats of a successful call), approval, and what is left of
`max_tool_calls`. A call that will not run is answered with a result saying why, so the
transcript stays valid. A spent token, cost or time ceiling stops the batch before it waits
for a human. Only when nothing blocks the batch is an in-process approver asked.

A run continued from a checkpoint (a crash in `act`, or a resume after a human decided) comes
back here before anything runs: the calls of its turn still without an answer are decided
again, by the same checks, against the continuing loop's registry, policy and budget. A
human's approval recorded on resume (`HUMAN_APPROVED`) lifts the approval requirement only.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, Final, Literal

import anyio
import anyio.lowlevel

from ..errors import ConfigurationError, UnhandledStop
from ..events import ApprovalRequested, CallDecision, PendingCall, Validation
from ..policy import Route, SignalContext, Verdict, answer_text
from ..records import (
    CallResult,
    Decision,
    ErrorRecord,
    Escalation,
    Exceeded,
    Limit,
    PendingApproval,
    StopReason,
    ToolCall,
    Turn,
    call_digest,
)
from ..statemachine.table import Trigger
from ..tools import ToolInputError
from ..transcript import append_user
from .answers import answer_open_calls, finish
from .budget import ceiling_spent, stop_at
from .context import YIELD_EVERY, Planned, RunContext
from .invariant import drop_unfinished_server_turns, unfinished_server_call
from .output import checked_final
from .refusals import after_stop, earlier_text
from .results import refused

if TYPE_CHECKING:
    from anthropic.types import Message, MessageParam

_CANONICAL_JSON: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), default=str, check_circular=False
).encode
"""Built once (`json.dumps` builds one per call); unchecked for cycles: the boundary bounds inputs."""
FROM_CODE: Final = ""
"""The repeat key of a call made from code execution: none (a program calling `roll_die()`
seven times wants seven rolls; the repeat history is for the model repeating itself)."""
REPEAT_NOTE: Final = "\n[repeated call: this is the result of the identical earlier call]"
HUMAN_APPROVED: Final = "human_approved"
"""A call a human approved on resume: it runs without asking again, once every other check passes."""
_DECISIONS: Final[dict[Verdict, Literal["execute", "resume", "final", "stop"]]] = {
    Verdict.TOOL_CALLS: "execute",
    Verdict.RESUME: "resume",
    Verdict.FINAL: "final",
    Verdict.STOP: "stop",
}


def canonical(name: str, tool_input: object) -> str:
    """The identity of a call for repeat detection: the digest of its tool name and canonical
    JSON input (`call_digest`), which a checkpoint may hold without holding the input."""
    return call_digest(name + "\x00" + _CANONICAL_JSON(tool_input))


def _nudge(messages: list[MessageParam], response: Message, nudge: str) -> None:
    """Append a resumed turn's nudge. An earlier paused server call its continuation left open
    (it answered nothing) may not be followed by it, so that turn goes; a handler nudging right
    after the paused call itself is a bug the request invariant reports."""
    if not unfinished_server_call(response.content):
        drop_unfinished_server_turns(messages)
    append_user(messages, [{"type": "text", "text": nudge}])


async def validate(ctx: RunContext) -> Trigger:
    """Route the response by its stop_reason; for tool calls, decide every call of the batch.

    Raises:
        UnhandledStop: the stop_reason has no signal handler.
    """
    state = ctx.state
    turn = state.turn
    response = ctx.response()
    assert turn is not None  # propose always records the turn before validate
    if turn.final:  # the final-answer call at a spent budget: the stop reason stays the budget's
        state.answer = answer_text(response) or None
        _validated(ctx, "final_answer", str(state.stop_reason), None, [])
        answer_open_calls(ctx, "denied", "not run: the budget is spent")
        return Trigger.VALIDATED
    context = SignalContext(ctx.config.spec.policy, state, state.earlier_text)  # policy, state, earlier_text
    again = bool(turn.decisions)  # decided before (a continued run): its open calls are decided again
    if again:
        route = Route(verdict=Verdict.TOOL_CALLS)
    else:
        handler = ctx.config.signal_handlers.get(str(response.stop_reason))
        if handler is None:
            raise UnhandledStop(response.stop_reason)
        route = after_stop(ctx, handler(response, context), context)  # a refusal's retry
        route = checked_final(ctx, route, response, context)  # a FINAL's answer
    decisions: list[CallDecision] = []
    exceeded: Exceeded | None = None
    if route.verdict is Verdict.TOOL_CALLS:
        decisions, stop, exceeded = await _plan(ctx, turn, again=again)
        if stop is not None:
            route = Route(verdict=Verdict.STOP, stop_reason=stop[0], detail=stop[1])
    _validated(
        ctx,
        _DECISIONS[route.verdict],
        None if route.stop_reason is None else str(route.stop_reason),
        None if route.detail is None else ctx.redact(route.detail),
        decisions,
    )
    if route.verdict is Verdict.RESUME:
        if route.continuation:
            state.continuations += 1
        state.earlier_text = earlier_text(ctx, response, context)
        # Client tool_use blocks do not come with a resumable turn; if one does, answer it so
        # the transcript stays valid (the model continues after the answers).
        answer_open_calls(ctx, "denied", f"not run: the response stopped with {response.stop_reason}")
        if route.nudge is not None:
            _nudge(state.messages, response, route.nudge)
    elif route.verdict is Verdict.FINAL:
        state.answer = context.answer(response) or None
        finish(ctx, StopReason.COMPLETED, None)
    elif route.verdict is Verdict.STOP:
        assert route.stop_reason is not None  # Route.__post_init__ guarantees it
        if exceeded is not None:
            stop_at(ctx, exceeded, route.detail)
        else:
            finish(ctx, route.stop_reason, route.detail)
    ctx.validated()  # the response's SDK objects go before its calls run
    return Trigger.VALIDATED


def _validated(
    ctx: RunContext,
    decision: Literal["execute", "resume", "final", "stop", "final_answer"],
    stop_reason: str | None,
    reason: str | None,
    calls: list[CallDecision],
) -> None:
    """Record the turn's `Validation` event (built by its factory: one a turn; `reason` redacted
    before, so a redact hook that raises takes no `seq`)."""
    state = ctx.state
    events = ctx.events
    if events.numbers and events and decision == "execute" and stop_reason is None and reason is None:
        # Nothing hears it as it happens (the metrics count nothing of it).
        events.validated(ctx.next_seq(), state.step, ctx.epoch + time.perf_counter(), calls)
        return
    ctx.emit(
        Validation.of(
            seq=ctx.next_seq(),
            task_id=state.task_id,
            at=ctx.epoch + time.perf_counter(),
            step=state.step,
            decision=decision,
            stop_reason=stop_reason,
            reason=reason,
            calls=calls,
        )
    )


async def _plan(
    ctx: RunContext, turn: Turn, *, again: bool = False
) -> tuple[list[CallDecision], tuple[StopReason, str] | None, Exceeded | None]:
    """Decide every call: execute, deny, repeat or escalate; answers go into `turn.answers`.

    With `again` (a turn continued from a checkpoint), only the calls without an answer are
    decided, each again; a copy of an identical call follows the call it copies.

    Returns:
        The decision of each call for the trace, `(stop_reason, detail)` when the batch must
        not run at all, and the spent limit when that is `max_tool_calls`.
    """
    plan: list[Planned] = []
    decisions: dict[int, CallDecision] = {}
    blocked: list[str] = []
    escalated: list[str] = []
    to_approve: list[Planned] = []
    first_of: dict[str, int] = {}
    recorded = ctx.recorded(turn)  # each call as the events record it, read once for the batch
    if again:  # a decision per call, whatever the checkpoint holds: each is decided below
        turn.decisions.extend(["execute"] * (len(turn.calls) - len(turn.decisions)))
    for index, (call, key) in enumerate(zip(turn.calls, turn.keys, strict=True)):
        if index and index % YIELD_EVERY == 0:  # a huge batch: the run's deadline can cut in
            await anyio.lowlevel.checkpoint()
        decided = (
            _decide_again(ctx, turn, index, call, key)
            if again
            else _decide_first(ctx, turn, index, call, key, first_of)
        )
        if decided is None:  # answered already (a result, a human's denial), or a copy
            continue
        decision, planned = decided
        decisions[index] = _record(ctx, turn, index, decision, recorded[index])
        if decision == "block":
            blocked.append(call.name)
        elif decision == "escalate":
            escalated.append(call.name)
        elif planned is not None:
            (to_approve if decision == "approve" else plan).append(planned)
    stop, exceeded = _batch_stop(ctx, _uncounted(turn, plan, to_approve), blocked, escalated)
    if stop is not None:
        _hold(ctx, turn, to_approve, stop)
        return list(decisions.values()), stop, exceeded
    approve = ctx.config.spec.policy.approve
    for planned in to_approve:
        assert approve is not None  # "approve" is only decided when there is an approver
        call = turn.calls[planned.index]
        record = decisions[planned.index]
        answer = _approver_answer(call, await approve(call))
        if answer is None:
            plan.append(planned)
            decisions[planned.index] = CallDecision.of(
                tool=record.tool, tool_use_id=record.tool_use_id, decision="execute"
            )
        else:
            turn.answers[planned.index] = answer
            decisions[planned.index] = CallDecision.of(
                tool=record.tool,
                tool_use_id=record.tool_use_id,
                decision="deny",
                reason=ctx.redact(str(answer.content)),
            )
    if to_approve:  # approved calls joined the plan after the others
        plan.sort(key=lambda planned: planned.index)
    ctx.scratch.plan = plan
    calls = list(decisions.values())
    # Every decided call runs (the usual batch): `ToolStarted` lists the validation's own list,
    # one list a turn in the trace, not two equal ones. The plan holds decided calls only, in
    # block order as the decisions are: as many of them are the same ones.
    ctx.scratch.plan_records = (
        calls if len(plan) == len(calls) else [decisions[planned.index] for planned in plan]
    )
    fill_copies(turn)
    return calls, None, None


def _uncounted(turn: Turn, plan: list[Planned], to_approve: list[Planned]) -> int:
    """The calls to run that take a tool call: in a continued turn, a call run again was
    counted when it first ran (`turn.invoked`)."""
    if not turn.invoked:
        return len(plan) + len(to_approve)
    counted = set(turn.invoked)
    return sum(planned.index not in counted for planned in (*plan, *to_approve))


def _decide_again(
    ctx: RunContext, turn: Turn, index: int, call: ToolCall, key: str
) -> tuple[Decision, Planned | None] | None:
    """A call of a continued turn decided again; None for one that needs no decision."""
    if turn.answers[index] is not None or index in turn.same_as:
        return None
    approved = turn.decisions[index] == HUMAN_APPROVED
    decision, planned = _decide(ctx, turn, index, call, key, human_approved=approved)
    turn.decisions[index] = decision
    return decision, planned


def _decide_first(
    ctx: RunContext, turn: Turn, index: int, call: ToolCall, key: str, first_of: dict[str, int]
) -> tuple[Decision, Planned | None]:
    """A call of a new turn; the same call twice in one batch runs once, and repeats."""
    decision, planned = _decide(ctx, turn, index, call, key)
    if planned is not None:
        if key in first_of:
            turn.same_as[index] = first_of[key]
            ctx.state.repeated_calls += 1
            decision, planned = "repeat", None
        elif key:  # a call from code (FROM_CODE) is never a copy of another
            first_of[key] = index
    turn.decisions.append(decision)
    return decision, planned


def _approver_answer(call: ToolCall, verdict: object) -> CallResult | None:
    """None when the approver approved the call (`True`, nothing else); else its denial.

    Raises:
        ConfigurationError: the approver returned neither a bool nor a string.
    """
    if verdict is True:
        return None
    if verdict is False:
        return refused(call, "denied", f"{call.name} was denied by the approver: not run")
    if isinstance(verdict, str):
        return refused(call, "denied", f"{call.name} was denied by the approver: {verdict}; not run")
    raise ConfigurationError(
        f"Policy.approve returned {verdict!r} for {call.name} ({call.id}): return True to approve, "
        "False or a reason string to deny"
    )


def _hold(ctx: RunContext, turn: Turn, to_approve: list[Planned], stop: tuple[StopReason, str]) -> None:
    """The batch does not run: answer every call not yet answered, saying why."""
    # Waiting for a human: these answers are provisional until `resume` decides.
    turn.awaiting_human = stop[0] is StopReason.NEEDS_HUMAN
    if turn.awaiting_human:  # calls waiting for the approver wait for the human instead
        for planned in to_approve:
            call = turn.calls[planned.index]
            ctx.state.pending_approvals.append(
                PendingApproval(tool_use_id=call.id, tool=call.name, input=call.input, step=call.step)
            )
        recorded = ctx.recorded(turn)
        waiting = {pending.tool_use_id for pending in ctx.state.pending_approvals}
        ctx.event(
            ApprovalRequested,
            calls=[
                PendingCall(tool=name, tool_use_id=call_id)
                for call, (name, call_id) in zip(turn.calls, recorded, strict=True)
                if call.id in waiting
            ],
        )
    else:  # a block or a spent budget: the run waits for nobody
        ctx.state.pending_approvals.clear()
    for index, call in enumerate(turn.calls):
        if turn.answers[index] is None:
            turn.answers[index] = refused(call, "denied", f"not run: {stop[1]}")
    ctx.scratch.plan = []
    ctx.scratch.plan_records = []


def fill_copies(turn: Turn) -> None:
    """Answer each copy of an identical call in the batch from the call that ran for it."""
    for copy, first in turn.same_as.items():
        source = turn.answers[first]
        if source is None or turn.answers[copy] is not None:
            continue
        call = turn.calls[copy]
        if source.outcome == "ok":
            turn.answers[copy] = CallResult.of(
                call=call, outcome="repeated", content=_with_note(source.content)
            )
        else:
            turn.answers[copy] = CallResult.of(call=call, outcome=source.outcome, content=source.content)


def _batch_stop(
    ctx: RunContext, runnable: int, blocked: list[str], escalated: list[str]
) -> tuple[tuple[StopReason, str] | None, Exceeded | None]:
    if blocked:  # forbidden; or unknown, with on_unknown_tool="stop": a failure
        unknown = [name for name in blocked if not ctx.config.spec.policy.is_forbidden(name)]
        reason, what = (StopReason.FAILED, "unknown") if unknown else (StopReason.POLICY_BLOCKED, "forbidden")
        return (reason, f"{what} tool proposed: {', '.join(unknown or blocked)}"), None
    state, ceiling = ctx.state, ceiling_spent(ctx)
    if ceiling is not None and (runnable or escalated or state.escalation is not None):
        # No batch runs, nor waits for a human, once tokens, cost or time are spent.
        detail = f"{ceiling.limit}={ceiling.value:g} spent (used {ceiling.used:g}) before the batch"
        return (Limit.of(ceiling.limit).stop, detail), ceiling
    if state.escalation is not None:
        return (StopReason.NEEDS_HUMAN, f"the model asked for a human: {state.escalation.reason}"), None
    if escalated:
        return (StopReason.NEEDS_HUMAN, f"approval required for {', '.join(escalated)}"), None
    limit = ctx.config.spec.budget.max_tool_calls
    if limit is not None and state.tool_calls + runnable > limit:
        left = limit - state.tool_calls
        detail = f"{runnable} tool calls proposed, {left} left of max_tool_calls={limit}"
        return (StopReason.MAX_TOOL_CALLS, detail), Exceeded(
            limit="max_tool_calls", value=limit, used=state.tool_calls
        )
    return None, None


def _decide(
    ctx: RunContext, turn: Turn, index: int, call: ToolCall, key: str, *, human_approved: bool = False
) -> tuple[Decision, Planned | None]:
    """One call against the policy, the registry, the schema and the run's history.

    `human_approved`: a human approved this call on resume, which answers its approval only.
    """
    state = ctx.state
    policy = ctx.config.spec.policy
    tools = ctx.config.tools
    name = call.name
    answers = turn.answers
    if policy.is_forbidden(name):
        answers[index] = refused(call, "denied", f"{name} is forbidden by policy: not run")
        return ("block" if policy.on_forbidden == "stop" else "deny"), None
    if name == policy.escalation_tool:
        return _escalate(ctx, turn, index, call)
    tool = tools.get(name)
    if tool is None:
        known = ", ".join(tools) or "none"
        answers[index] = refused(call, "invalid", f"unknown tool {name!r}; known tools: {known}")
        return ("block" if policy.on_unknown_tool == "stop" else "deny"), None
    if not policy.is_allowed(name):
        answers[index] = refused(call, "denied", f"{name} is not allowed in this run: not run")
        return "deny", None
    try:
        arguments = tool.validate(call.input)
    except ToolInputError as exc:
        answers[index] = refused(call, "invalid", f"invalid input for {name}: {exc}")
        return "deny", None
    earlier = state.succeeded.get(key)
    if earlier is not None:
        state.repeated_calls += 1
        content = _with_note(state.observations[earlier].content)
        answers[index] = CallResult.of(call=call, outcome="repeated", content=content)
        return "repeat", None
    planned = Planned(index, tool, arguments)  # positional: no keyword dict built per call
    if policy.needs_approval(name, requires_approval=tool.requires_approval, side_effect=tool.side_effect):
        if human_approved:
            return "human_approved", planned
        if policy.approve is None:
            state.pending_approvals.append(
                PendingApproval(tool_use_id=call.id, tool=name, input=call.input, step=call.step)
            )
            answers[index] = refused(call, "denied", f"{name} awaits human approval: not run")
            return "escalate", None
        return "approve", planned
    return "execute", planned


def _escalate(ctx: RunContext, turn: Turn, index: int, call: ToolCall) -> tuple[Decision, Planned | None]:
    """The model asks for a human: the run will stop for it, with the model's reason."""
    tool = ctx.config.tools[call.name]
    try:
        tool.validate(call.input)
    except ToolInputError as exc:
        turn.answers[index] = refused(call, "invalid", f"invalid input for {call.name}: {exc}")
        return "deny", None
    if ctx.state.escalation is not None:  # the first request of the batch is the one a human answers
        turn.answers[index] = refused(call, "denied", "a human is already asked in this turn: not sent")
        return "deny", None
    reason = ctx.redact(str(call.input.get("reason", "")))
    ctx.state.escalation = Escalation(tool_use_id=call.id, reason=reason, step=call.step)
    turn.answers[index] = refused(call, "denied", "waiting for a human: not answered yet")
    return "escalate", None


def _record(
    ctx: RunContext, turn: Turn, index: int, decision: Decision, recorded: tuple[str, str]
) -> CallDecision:
    """The event's record of one decision (`recorded`: the call's name and id as the events
    record them); an invalid action is also recorded as an error."""
    call = turn.calls[index]
    answer = turn.answers[index]
    name, call_id = recorded
    if answer is None:
        return CallDecision.of(tool=name, tool_use_id=call_id, decision=decision)
    reason = ctx.redact(str(answer.content))
    if answer.outcome == "invalid":
        ctx.state.errors.append(ErrorRecord(kind="invalid_action", step=call.step, tool=name, message=reason))
    return CallDecision.of(tool=name, tool_use_id=call_id, decision=decision, reason=reason)


def _with_note(content: str | list[dict[str, Any]]) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content + REPEAT_NOTE
    return [*content, {"type": "text", "text": REPEAT_NOTE.strip()}]
