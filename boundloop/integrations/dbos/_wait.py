"""A run waiting for a human inside its workflow, and the decisions sent to it.

A run that stops `needs_human` inside its workflow does not end the workflow: the workflow
publishes what it waits for (DBOS event `boundloop.waiting`), holds the task's store lease (so
`loop.resume`, `boundloop resume` and the inspector cannot continue the run outside DBOS
meanwhile: they get `TaskBusy`; a workflow that cannot take it within `LEASE_WAIT_S` ends) and
waits with DBOS's durable `recv` on topic `boundloop.decision`. A decision is
`{"id", "approvals", "reply"}`; the workflow applies it as `loop.resume` does (the core's
`prepare`, then the driver: policy, budget and approvals are checked again when the calls run)
and answers it with the DBOS event `boundloop.decision:{id}`. A decision that does not fit (an
unknown call id, a call left undecided, no reply to a question) is answered refused, and the
workflow goes on waiting. Once the wait's deadline (recorded as a step, so a recovered workflow
keeps it) passes, the workflow releases the lease and ends with the `needs_human` result, as
before: `loop.resume` continues the run outside DBOS.

Every DBOS operation here (the deadline step, `recv`, `set_event`) is recorded, so a workflow
recovered after a crash replays the decisions it received and waits on for the rest.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, cast

import anyio
from dbos import DBOS, DBOSClient

from ..._core import Decision, deciding, drive, passed_down, prepare
from ...checkpoint.store import lease_of
from ...errors import ApprovalMissing, NotResumable, TaskBusy
from ...records import StopReason
from ...statemachine.table import Phase
from ._steps import recorded

if TYPE_CHECKING:
    from ..._core import LoopConfig
    from ...state import LoopResult, LoopState

DECISION_TOPIC: Final = "boundloop.decision"
"""The topic of the messages that carry a human's decisions to a waiting workflow."""
WAITING_EVENT: Final = "boundloop.waiting"
"""The workflow's event saying what it waits for now (`waiting_for`), or None: it does not wait."""
WAIT_STEP: Final = "boundloop.wait"
"""The step recording the wait's deadline (seconds since the epoch)."""

LEASE_WAIT_S: Final = 30.0
"""How long a workflow about to wait tries to take the task's lease before it ends instead."""
LEASE_RETRY_S: Final = 0.2

log = logging.getLogger("boundloop.integrations.dbos")


def answer_key(decision_id: str) -> str:
    """The workflow event answering the decision `decision_id`."""
    return f"{DECISION_TOPIC}:{decision_id}"


def waits_for_human(state: LoopState) -> bool:
    """Whether the run stopped waiting for a decision (approvals, or a reply to the model)."""
    return (
        state.phase is Phase.STOPPED
        and state.stop_reason is StopReason.NEEDS_HUMAN
        and (bool(state.pending_approvals) or state.escalation is not None)
    )


def waiting_for(state: LoopState) -> dict[str, Any]:
    """What the workflow publishes while it waits: the step, the pending calls, the question."""
    return {
        "step": state.step,
        "pending": [
            {"tool_use_id": p.tool_use_id, "tool": p.tool, "input": p.input} for p in state.pending_approvals
        ],
        "question": None if state.escalation is None else state.escalation.reason,
    }


async def _deadline(wait_s: float) -> float:
    """The wait's end, recorded: a recovered workflow waits until the same moment."""

    async def now_plus() -> float:
        return time.time() + wait_s

    return await recorded(DBOS.run_step_async({"name": WAIT_STEP}, now_plus))


async def _decision(state: LoopState, wait_s: float) -> tuple[dict[str, object], dict[str, Decision]] | None:
    """Wait for a decision that fits; what the resume records and what it passes down to the
    delegated runs below (`passed_down`), or None when the wait ran out."""
    deadline = await _deadline(wait_s)
    await recorded(DBOS.set_event_async(WAITING_EVENT, waiting_for(state)))
    record: dict[str, object] | None = None
    below: dict[str, Decision] = {}
    while record is None:
        # Always called, also past the deadline (timeout 0): a replay meets each recorded `recv`.
        remaining = max(0.0, deadline - time.time())
        message: object = await recorded(DBOS.recv_async(DECISION_TOPIC, timeout_seconds=remaining))
        if message is None:
            break
        decision = _read(message)
        if decision is None:
            log.warning("task %r: a message that is no decision was ignored", state.task_id)
            continue
        decision_id, approvals, reply = decision
        try:
            below = passed_down(state, approvals, reply)  # read before `prepare` clears the wait
            record = prepare(state, approvals, reply)
        except (ApprovalMissing, NotResumable) as exc:
            log.warning("task %r: a decision was refused, the run keeps waiting: %s", state.task_id, exc)
            problem = str(exc).removeprefix(f"task {state.task_id!r} keeps waiting: ")
            answer: dict[str, object] = {"accepted": False, "error": problem}
        else:
            answer = {"accepted": True, "error": None}
            # No longer waiting before the answer says so: a second sender finds no waiting run.
            await recorded(DBOS.set_event_async(WAITING_EVENT, None))
        await recorded(DBOS.set_event_async(answer_key(decision_id), answer))
    if record is None:  # the wait ran out
        await recorded(DBOS.set_event_async(WAITING_EVENT, None))
        return None
    return record, below


def _read(message: object) -> tuple[str, Mapping[str, Decision] | None, str | None] | None:
    """A decision message's id, approvals and reply; None for a message that is no decision."""
    if not isinstance(message, dict):
        return None
    fields = cast(dict[str, Any], message)
    decision_id, approvals, reply = fields.get("id"), fields.get("approvals"), fields.get("reply")
    if not isinstance(decision_id, str) or not isinstance(approvals, dict | None):
        return None
    if not isinstance(reply, str | None):
        return None
    return decision_id, cast("Mapping[str, Decision] | None", approvals), reply


async def _leased(held: contextlib.AsyncExitStack, config: LoopConfig, task_id: str) -> bool:
    """Take the task's lease into `held`, retrying for `LEASE_WAIT_S`: a recovered workflow may
    start before the store saw its dead worker's lease go. False: another holder kept it."""
    with anyio.move_on_after(LEASE_WAIT_S):
        while True:
            try:
                await held.enter_async_context(lease_of(config.store, task_id))
            except TaskBusy:
                await anyio.sleep(LEASE_RETRY_S)
            else:
                return True
    return False


async def wait_and_continue(config: LoopConfig, result: LoopResult[Any], wait_s: float) -> LoopResult[Any]:
    """While the run waits for a human, wait in the workflow, under the task's lease, for a
    decision; continue the run with it. The result of the last session of the run."""
    while wait_s > 0 and waits_for_human(result.state):
        state = result.state
        async with contextlib.AsyncExitStack() as held:
            if not await _leased(held, config, state.task_id):
                log.warning(
                    "task %r: its lease is held outside its workflow (a resume): the workflow ends",
                    state.task_id,
                )
                return result
            decision = await _decision(state, wait_s)
            if decision is None:
                return result  # the wait ran out: the run goes on outside DBOS, with loop.resume
            record, below = decision
            with deciding(below):  # a delegation's call run again resumes its run with them
                result = await drive(config, state, resumed=record)
    return result


async def send_decision(
    sender: DBOSClient | type[DBOS],
    task_id: str,
    approvals: Mapping[str, Decision] | None,
    reply: str | None,
    timeout_s: float,
) -> None:
    """Send a decision to the workflow of `task_id` and wait for its answer (see `decide`)."""
    waiting: object = await sender.get_event_async(task_id, WAITING_EVENT, timeout_seconds=0)
    if waiting is None:
        raise NotResumable(task_id, "no wait", "its DBOS workflow waits for no decision now")
    decision_id = os.urandom(16).hex()
    message = {
        "id": decision_id,
        "approvals": None if approvals is None else dict(approvals),
        "reply": reply,
    }
    await sender.send_async(task_id, message, DECISION_TOPIC, idempotency_key=decision_id)
    answer: object = await sender.get_event_async(task_id, answer_key(decision_id), timeout_seconds=timeout_s)
    if answer is None:
        raise TimeoutError(
            f"task {task_id!r}: the workflow did not answer the decision within {timeout_s:g} s; it is "
            "delivered, and applied if the workflow takes it before its wait runs out"
        )
    fields = cast(dict[str, Any], answer)
    if not fields.get("accepted"):
        raise ApprovalMissing(task_id, str(fields.get("error")))
