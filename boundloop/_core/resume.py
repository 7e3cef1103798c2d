"""Resume: turn a stored state into one the driver can continue, with the human's decisions.

A run interrupted mid-run (a crash: its phase is not `stopped`) continues where its last
checkpoint was: calls with a recorded result never run again; calls saved as intents without
one run again under the same idempotency key, once validation decided them again. A run
stopped with `needs_human` for approvals or for the model's question goes back to `validate`:
the provisional answers the transcript got at the stop are replaced by the human's decisions,
and the calls left to run are decided again against the resuming loop's registry, policy and
budget before any runs. A run that waits for a delegated run's calls (`state.waiting_on`) runs
its delegation's call again, which resumes that run with their decisions
(`_core/delegation.py`). A human's approval answers the approval requirement only; a call the
resuming loop forbids, does not know or has no budget for does not run.

A run stopped at a ceiling before a model call (`cost_budget`, `token_budget`, `max_steps`:
its own budget's, its tree's, a budget pool's) goes on to `assemble` too, where the budget it
is resumed with (or a pool's raised ceiling) is checked before the next call.

A run stopped `cancelled` (a person stopped it) goes on to `assemble`: its transcript as the
cancel left it (every open call answered `cancelled`, never run again as such), its budget
checked before the next model call, and every call the model proposes then decided as any
call is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias, cast

from ..errors import ApprovalMissing, NotResumable
from ..policy import ApprovalDecision
from ..records import CallResult, StopReason, Turn
from ..state import LoopState, at_ceiling
from ..statemachine.table import Phase
from .results import refused
from .validation import HUMAN_APPROVED

Decision: TypeAlias = ApprovalDecision
"""True: approved; False: denied; a string: denied, with the reason the model sees."""


def prepare(
    state: LoopState, approvals: Mapping[str, Decision] | None, reply: str | None
) -> dict[str, object]:
    """Make `state` continuable, applying the decisions; returns what the resume event records.

    Raises:
        NotResumable: the run's stop is final.
        ApprovalMissing: a waiting call has no decision, or a decision names no waiting call.
    """
    if state.phase is not Phase.STOPPED:
        if approvals or reply is not None:
            raise ApprovalMissing(state.task_id, "it was interrupted mid-run and waits for no decision")
        return {"from_phase": str(state.phase), "interrupted": True}
    if state.stop_reason is StopReason.CANCELLED:
        return _uncancel(state, approvals, reply)
    if at_ceiling(state):
        return _past_ceiling(state, approvals, reply)
    turn = state.turn
    waiting = state.stop_reason is StopReason.NEEDS_HUMAN and turn is not None and turn.awaiting_human
    if not waiting or turn is None:
        raise NotResumable(state.task_id, str(state.stop_reason), state.stop_detail)
    decided = _check_decisions(state, approvals or {}, reply)
    _reopen(state, turn)
    for index, call in enumerate(turn.calls):
        decision = turn.decisions[index] if index < len(turn.decisions) else "deny"
        if state.escalation is not None and call.id == state.escalation.tool_use_id:
            assert reply is not None  # checked above
            turn.answers[index] = CallResult.of(call=call, outcome="ok", content=reply)
        elif decision in ("escalate", "approve"):
            turn.answers[index] = _approval(call.name, decided[call.id], turn, index)
            if turn.answers[index] is None:  # recorded: a crash before it ran does not ask again
                turn.decisions[index] = HUMAN_APPROVED
        elif decision in ("execute", HUMAN_APPROVED) and index not in turn.invoked:
            # Held back because the batch waited (or its delegated run did): decided again. A
            # call that ran beside a waiting delegation keeps its result.
            turn.answers[index] = None
    record: dict[str, object] = {"from_phase": "stopped", "from_stop": "needs_human"}
    record["approvals"] = dict(decided)
    if state.escalation is not None:
        record["escalation"] = state.escalation.tool_use_id
    state.pending_approvals.clear()
    state.waiting_on.clear()  # their decisions go down the tree with the delegation's call
    state.escalation = None
    state.phase = Phase.VALIDATE  # nothing runs before validation decided it again
    return record


def _uncancel(
    state: LoopState, approvals: Mapping[str, Decision] | None, reply: str | None
) -> dict[str, object]:
    """Continue a cancelled run at `assemble`: the budget first, then the next model call.

    The cancel answered every open call (`cancelled`: not run, or interrupted with its effect
    unknown) and recorded the answers; the model reads them and proposes again. Nothing of the
    cancelled turn runs without being proposed and decided anew.
    """
    if approvals or reply is not None:
        raise ApprovalMissing(state.task_id, "it was cancelled and waits for no decision")
    if (
        state.pending_approvals
        or state.escalation is not None
        or (state.turn is not None and state.turn.open)
    ):
        raise NotResumable(state.task_id, str(state.stop_reason), "its last turn is still open")
    state.stop_reason = None
    state.stop_detail = None
    state.phase = Phase.ASSEMBLE
    return {"from_phase": "stopped", "from_stop": "cancelled"}


def _past_ceiling(
    state: LoopState, approvals: Mapping[str, Decision] | None, reply: str | None
) -> dict[str, object]:
    """Continue a run stopped at a ceiling at `assemble`: the (raised) budget checked first,
    then the next model call, from the transcript as it stopped (every call it made answered;
    none runs again). A ceiling still spent stops it again, without a call."""
    if approvals or reply is not None:
        raise ApprovalMissing(state.task_id, "it stopped at a ceiling and waits for no decision")
    record: dict[str, object] = {"from_phase": "stopped", "from_stop": str(state.stop_reason)}
    state.stop_reason = None
    state.stop_detail = None
    state.exceeded = None
    state.final_call_due = False
    state.phase = Phase.ASSEMBLE
    return record


def _check_decisions(
    state: LoopState, approvals: Mapping[str, Decision], reply: str | None
) -> dict[str, Decision]:
    waiting = [pending.tool_use_id for pending in state.pending_approvals]
    unknown = sorted(set(approvals) - set(waiting))
    if unknown:
        raise ApprovalMissing(state.task_id, f"no call waiting for approval has the id {', '.join(unknown)}")
    missing = [tool_use_id for tool_use_id in waiting if tool_use_id not in approvals]
    if missing:
        names = {pending.tool_use_id: pending.tool for pending in state.pending_approvals}
        listed = ", ".join(f"{tool_use_id} ({names[tool_use_id]})" for tool_use_id in missing)
        raise ApprovalMissing(
            state.task_id, f"no decision for {listed}: pass approvals={{id: True | False | reason}}"
        )
    bad = sorted(k for k, v in approvals.items() if not isinstance(cast(object, v), bool | str))
    if bad:
        raise ApprovalMissing(
            state.task_id, f"a decision is True, False or a reason string, not for {', '.join(bad)}"
        )
    if state.escalation is not None and not isinstance(reply, str):
        raise ApprovalMissing(
            state.task_id, f"the model asked a human: {state.escalation.reason!r}; pass reply='...'"
        )
    if state.escalation is None and reply is not None:
        raise ApprovalMissing(state.task_id, "the model asked no question: reply= has nothing to answer")
    return dict(approvals)


def _reopen(state: LoopState, turn: Turn) -> None:
    """Take back the provisional answers: the transcript ends with the assistant's calls again."""
    last = state.messages[-1] if state.messages else None
    if last is not None and last["role"] == "user" and turn.answered:
        state.messages.pop()
    turn.answered = False
    turn.awaiting_human = False
    state.stop_reason = None
    state.stop_detail = None


def _approval(name: str, decision: Decision, turn: Turn, index: int) -> CallResult | None:
    call = turn.calls[index]
    if decision is True:
        return None
    reason = "" if decision is False else f": {decision}"
    answer = refused(call, "denied", f"{name} was denied by a human{reason}; not run")
    answer.by_human = True
    answer.reason = None if decision is False else decision
    return answer
