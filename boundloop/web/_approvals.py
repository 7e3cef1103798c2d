"""The approvals page: the runs waiting for a human, each waiting call, and the form whose POST
resumes the run through the application's loop in the server process."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from .. import (
    AgentLoop,
    ApprovalMissing,
    CheckpointCorrupt,
    ConfigurationError,
    NotResumable,
    TaskBusy,
    TaskExists,
    TaskNotFound,
)
from .._core import event_log_of, follow
from ..checkpoint.store import CheckpointStore, status_of
from ..events import Event, redact_strings
from ..records import StopReason, ToolCall
from ..state import LoopState
from ..tools import idempotency_key
from ._html import Html, as_json, csrf_field, e, join
from ._runs import run_link

if TYPE_CHECKING:
    from ._durable import Durable

Redact = Callable[[str], str]
Decision = bool | str


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """What a POST of decisions did: the HTTP status, and the sentence saying so."""

    status: int
    message: str
    resumed: bool = False


def waiting_card(
    state: LoopState, reasons: dict[str, str], redact: Redact, csrf: str, can_resume: bool
) -> Html:
    """One waiting run: its calls (tool, input, why, idempotency key) and the decision form."""
    task_link = run_link(state.task_id)
    calls: list[Html] = []
    for pending in state.pending_approvals:
        name = pending.tool_use_id
        owner = state.waiting_on.get(name, state.task_id)  # a delegated run's call runs under its key
        where = (
            Html(f' in the delegated run <a class="task" href="{e(run_link(owner))}">{e(owner)}</a>')
            if owner != state.task_id
            else Html("")
        )
        choice = (
            Html(
                f'<label><input type="radio" name="decision:{e(name)}" value="approve" required>'
                " Approve</label> "
                f'<label><input type="radio" name="decision:{e(name)}" value="deny"> Deny</label> '
                f'<input type="text" name="reason:{e(name)}" size="40" '
                'placeholder="reason for a denial (the model sees it)">'
            )
            if can_resume
            else Html("")
        )
        calls.append(
            Html(
                f'<div class="card call" data-call="{e(name)}"><b>'
                f"{e(pending.tool)}</b> [{e(name)}] at step {e(pending.step)}{where}"
                f"<pre>{e(as_json(redact_strings(pending.input, redact)))}</pre>"
                f"<div>why: {e(redact(reasons.get(name, 'the policy requires approval')))}</div>"
                "<div>idempotency key: <code>"
                f"{e(redact(idempotency_key_of(owner, pending.step, name)))}</code></div>"
                f"{choice}</div>"
            )
        )
    escalation = state.escalation
    if escalation is not None:
        reply = (
            Html('<textarea name="reply" rows="3" cols="60" required></textarea>') if can_resume else Html("")
        )
        calls.append(
            Html(
                '<div class="card"><b>The model asks</b><pre>'
                f"{e(redact(escalation.reason))}</pre>{reply}</div>"
            )
        )
    form_open = (
        Html(f'<form method="post" action="{e(task_link)}/decide">{csrf_field(csrf)}')
        if can_resume
        else Html("")
    )
    submit = (
        Html('<button type="submit" class="decide">Resume the run with these decisions</button></form>')
        if can_resume
        else Html("")
    )
    return Html(
        f'<section class="waiting" id="{e(state.task_id)}"><h2>'
        f'<a href="{e(task_link)}">{e(state.task_id)}</a></h2>'
        f'<pre class="goal">{e(redact(state.goal))}</pre>{form_open}{join(calls)}{submit}</section>'
    )


def idempotency_key_of(task_id: str, step: int, tool_use_id: str) -> str:
    """The key the call runs under once approved (`boundloop.tools.idempotency_key`)."""
    return idempotency_key(task_id, ToolCall(id=tool_use_id, name="", input={}, step=step))


def read_decisions(form: dict[str, Any], state: LoopState) -> tuple[dict[str, Decision], str | None]:
    """`approvals=` and `reply=` from the form's fields (`decision:ID`, `reason:ID`, `reply`)."""
    approvals: dict[str, Decision] = {}
    for key, value in form.items():
        if not key.startswith("decision:"):
            continue
        tool_use_id = key.removeprefix("decision:")
        reason = str(form.get(f"reason:{tool_use_id}", "")).strip()
        approvals[tool_use_id] = True if value == "approve" else (reason or False)
    reply = form.get("reply")
    return approvals, (str(reply) if reply and state.escalation is not None else None)


def not_decidable(
    state: LoopState | None, task_id: str, approvals: Mapping[str, Decision], *, busy: bool
) -> Outcome | None:
    """Why decisions on `task_id` cannot be taken (404: no such run; 409: a stale decision), or
    None. Every front end that resumes a run checks its decisions here: the inspector's form,
    the AI SDK's chat, the AG-UI endpoint's answers."""
    if state is None:
        return Outcome(404, f"No run {task_id!r} in the store: nothing changed.")
    pending = {p.tool_use_id for p in state.pending_approvals}
    # A waiting run takes decisions on its calls; a cancelled one, none (it goes on as it was).
    resumable = status_of(state) == "waiting" or state.stop_reason is StopReason.CANCELLED
    if busy or not resumable or not set(approvals) <= pending:
        return Outcome(
            409,
            "These calls are no longer pending (decided already, or the run moved on): nothing changed.",
        )
    return None


class Resumer:
    """Resumes waiting runs through the application's loop, in the server's task group; a run
    waiting inside its DBOS workflow gets the decision sent there (`durable`)."""

    def __init__(
        self, loop: AgentLoop[Any] | None, store: CheckpointStore, durable: Durable | None = None
    ) -> None:
        self.loop = None if loop is None else loop.with_store(store)
        self.store = store
        self.durable = durable
        self.task_group: TaskGroup | None = None
        self.resuming: set[str] = set()
        """The runs a resume of this server drives now."""

    async def decide(self, task_id: str, approvals: dict[str, Decision], reply: str | None) -> Outcome:
        """Resume `task_id` with the decisions (a cancelled run: none), once: it answers when the
        resume has taken the run (its first event) or was refused; the run goes on in the background.
        A run whose DBOS workflow waits for the decision is continued by its workflow."""
        if (self.loop is None and self.durable is None) or self.task_group is None:
            return Outcome(403, "This inspector is read-only (no --loop): nothing changed.")
        state = await self.store.load(task_id)
        if state is not None:  # a delegated run's calls are decided at its tree's root
            state = await self.waiting_root(state)
            task_id = state.task_id
        stale = not_decidable(state, task_id, approvals, busy=task_id in self.resuming)
        if stale is not None:
            return stale
        if self.durable is not None:
            sent = await self.send(self.durable, task_id, approvals, reply)
            if sent is not None:
                return sent
        if self.loop is None:  # decided already, or its wait ran out: `loop.resume` continues it
            return Outcome(
                409,
                "The run's DBOS workflow waits for no decision now (decided already, or its wait ran out: "
                "an inspector with --loop continues it): nothing changed.",
            )
        taken = anyio.Event()
        refused: list[BaseException] = []
        loop = self.loop

        def on_event(_: Event) -> None:
            taken.set()

        async def run() -> None:
            self.resuming.add(task_id)
            try:
                await loop.resume(task_id, approvals=approvals, reply=reply, on_event=on_event)
            except (TaskBusy, NotResumable, ApprovalMissing, TaskNotFound, CheckpointCorrupt) as exc:
                refused.append(exc)
            except Exception as exc:  # the application's loop failed: shown on the page, not a crash
                refused.append(exc)
            finally:
                self.resuming.discard(task_id)
                taken.set()

        self.task_group.start_soon(run)
        await taken.wait()
        if not refused:
            return Outcome(303, "Resumed.", resumed=True)
        return refusal(refused[0])

    async def waiting_root(self, state: LoopState) -> LoopState:
        """The run a decision on `state`'s calls resumes: a delegated run's tree waits for them at
        its root (each parent lists them in `waiting_on`), and the root's resume reaches it."""
        seen = {state.task_id}
        while state.parent_task_id is not None and state.parent_task_id not in seen:
            parent = await self.store.load(state.parent_task_id)
            asked = [p.tool_use_id for p in state.pending_approvals]
            if state.escalation is not None:
                asked.append(state.escalation.tool_use_id)
            if parent is None or status_of(parent) != "waiting" or not set(asked) & set(parent.waiting_on):
                break
            seen.add(parent.task_id)
            state = parent
        return state

    async def send(
        self, durable: Durable, task_id: str, approvals: dict[str, Decision], reply: str | None
    ) -> Outcome | None:
        """Send the decision to the run's waiting workflow; once accepted, wait for the run's
        next event (the workflow continues it), so that its page follows it from there. None:
        no workflow of the run waits for a decision (it is no DBOS run, or its wait ran out)."""
        log = event_log_of(self.store)
        last = -1 if log is None else await log.last_seq(task_id)
        self.resuming.add(task_id)
        try:
            await durable.decide(task_id, approvals, reply)
        except NotResumable:
            return None
        except TimeoutError:
            return Outcome(
                504,
                "The run's DBOS workflow did not answer (is its worker down?): the decision is delivered, "
                "and applied if the workflow takes it before its wait runs out.",
            )
        except Exception as exc:  # refused (ApprovalMissing, NotResumable), or DBOS failed
            return refusal(exc)
        finally:
            self.resuming.discard(task_id)
        if log is not None:
            with anyio.move_on_after(durable.answer_s):
                async for _ in follow(self.store, task_id, after=last):
                    break
        return Outcome(303, "Resumed in its DBOS workflow.", resumed=True)


def refusal(exc: BaseException) -> Outcome:
    """The answer to a resume the loop refused (`TaskBusy`, `NotResumable`: 409; `ApprovalMissing`: 400)."""
    if isinstance(exc, TaskBusy):
        return Outcome(409, "Another decision is resuming this run now: nothing changed.")
    if isinstance(exc, NotResumable):
        return Outcome(409, f"The run no longer waits ({exc}): nothing changed.")
    if isinstance(exc, ApprovalMissing):
        return Outcome(400, f"Decide every waiting call: {exc}. Nothing changed.")
    if isinstance(exc, TaskExists):
        return Outcome(409, f"This run has started already ({exc}): nothing changed.")
    if isinstance(exc, TaskNotFound):
        return Outcome(404, f"No such run ({exc}): nothing changed.")
    if isinstance(exc, ConfigurationError):
        return Outcome(400, f"Refused: {exc}. Nothing changed.")
    return Outcome(500, f"The resume failed: {type(exc).__name__}: {exc}")
