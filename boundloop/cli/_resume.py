"""`boundloop resume SPEC TASK_ID --store PATH`: continue a stored run, with a human's decisions."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence

import anyio

from .. import (
    AgentLoop,
    ApprovalMissing,
    CheckpointCorrupt,
    CheckpointStore,
    LoopResult,
    NotResumable,
    TaskBusy,
    TaskNotFound,
)
from ._errors import CommandError
from ._run import load_target, make_loop
from ._runner import EventHook, RunOptions, Start, execute
from ._store import close_store, load_state, open_store
from ._view import RunView

Decision = bool | str
"""True: approved; False: denied; a string: denied, with the reason the model sees."""


def resume_command(args: argparse.Namespace) -> int:
    """Resume TASK_ID from `--store` through the loop SPEC names, with the shared run options.

    Args:
        args: the parsed arguments of `boundloop resume`.

    Returns:
        The exit code: 0 when the resumed run completed, 1 otherwise.

    Raises:
        CommandError: a usage error (the store, SPEC, an unknown or finished task, a call left
            undecided), or the run failed.
    """
    spec: str = args.spec
    app_dir: str = args.app_dir
    task_id: str = args.task_id
    path: str = args.store
    reply: str | None = args.reply
    approvals = decisions(args.approve, args.deny)
    store = open_store(path)
    target = load_target(spec, app_dir)

    async def build() -> AgentLoop:
        return (await make_loop(spec, target)).with_store(store)

    async def cleanup() -> None:  # a PostgresStore's pool and lease session
        await close_store(store)

    start = resume_start(store, path, task_id, approvals, reply)
    return execute(RunOptions.from_args(args), build, start, cleanup=cleanup)


def decisions(approve: Sequence[str] | None, deny: Sequence[str] | None) -> dict[str, Decision]:
    """The `approvals=` mapping from `--approve ID` and `--deny ID[=REASON]`.

    Args:
        approve: the ids given to `--approve`.
        deny: the `ID` or `ID=REASON` values given to `--deny`.

    Returns:
        `{tool_use_id: True | False | reason}`.

    Raises:
        CommandError: an empty id, or one call decided twice.
    """
    decided: dict[str, Decision] = {}

    def add(tool_use_id: str, decision: Decision) -> None:
        if not tool_use_id:
            raise CommandError("--approve and --deny need a tool_use id (see `boundloop pending`)")
        if tool_use_id in decided:
            raise CommandError(f"{tool_use_id} is decided twice: give each call one --approve or --deny")
        decided[tool_use_id] = decision

    for tool_use_id in approve or ():
        add(tool_use_id.strip(), True)
    for value in deny or ():
        tool_use_id, _, reason = value.partition("=")
        add(tool_use_id.strip(), reason.strip() or False)
    return decided


def resume_start(
    store: CheckpointStore, path: str, task_id: str, approvals: dict[str, Decision], reply: str | None
) -> Start:
    """How `resume` starts the loop: `loop.resume(task_id, approvals=..., reply=...)`.

    Args:
        store: the store the loop was pointed at.
        path: the `--store` argument, for the error messages.
        task_id: the run to continue.
        approvals: the decisions on its waiting calls.
        reply: the answer to the model's question.

    Returns:
        The start function for `execute`; it reports an unknown, finished or unreadable task,
        or a call left undecided, as a usage error.
    """

    async def start(
        loop: AgentLoop, view: RunView | None, on_event: EventHook, cancel: anyio.Event
    ) -> LoopResult:
        pending = f"boundloop pending --store {shlex.quote(path)}"
        state = await load_state(store, path, task_id, hint=f" (see `{pending}`)")
        if view is not None:
            view.start(loop, state.goal, resumed=state)
        try:
            return await loop.resume(
                task_id, approvals=approvals, reply=reply, on_event=on_event, cancel=cancel
            )
        except ApprovalMissing as exc:
            hint = "decide with --approve ID, --deny ID[=REASON] or --reply TEXT"
            raise CommandError(f"{exc} ({hint}; see `{pending}`)") from exc
        except (TaskNotFound, NotResumable, TaskBusy, CheckpointCorrupt) as exc:  # TaskBusy: a lease
            raise CommandError(str(exc)) from exc

    return start
