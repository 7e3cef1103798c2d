"""`boundloop run SPEC --goal TEXT`: run the user's own loop, found as `module:factory`."""

from __future__ import annotations

import argparse
import importlib
import inspect
import shlex
import sys
from pathlib import Path
from typing import Any

import anyio

from .. import (
    AgentLoop,
    CheckpointStore,
    ConfigurationError,
    LoopResult,
    MemoryStore,
    SQLiteStore,
    StopReason,
)
from ..checkpoint.signed import SignedStore
from ..checkpoint.store import status_of
from ._errors import CommandError
from ._runner import EventHook, RunOptions, execute, run_goal
from ._view import RunView


def run_command(args: argparse.Namespace) -> int:
    """Run the loop SPEC names on `--goal`, with the shared run options.

    Args:
        args: the parsed arguments of `boundloop run`.

    Returns:
        The exit code: 0 when the run completed, 1 otherwise.

    Raises:
        CommandError: SPEC does not lead to an AgentLoop, or the run failed.
    """
    spec: str = args.spec
    app_dir: str = args.app_dir
    goal: str = args.goal
    inner = run_goal(goal)
    target = load_target(spec, app_dir)
    finished: list[tuple[AgentLoop[Any], LoopResult[Any]]] = []

    async def build() -> AgentLoop:
        return await make_loop(spec, target)

    async def start(
        loop: AgentLoop, view: RunView | None, on_event: EventHook, cancel: anyio.Event
    ) -> LoopResult:
        result = await inner(loop, view, on_event, cancel)
        finished.append((loop, result))
        return result

    options = RunOptions.from_args(args)
    try:
        return execute(options, build, start)
    finally:  # also after Ctrl-C (exit 130): an interrupted run can be resumed by its id
        if finished and not options.json:  # --json: the task id is in the result's state
            print("\n".join(next_steps(spec, *finished[0])), flush=True)


def next_steps(spec: str, loop: AgentLoop[Any], result: LoopResult[Any]) -> list[str]:
    """The run's task id, and the commands that continue it, when they would.

    Only a run waiting for a human (calls to approve, a question to answer) or cancelled can be
    resumed: a circuit breaker's `needs_human` stop waits for nobody, so it gets no commands.
    A run the loop kept nowhere, or only in memory, cannot be resumed from another process: it
    gets a sentence saying so instead of commands that would fail.
    """
    state = result.state
    task_id = state.task_id
    lines = [f"task id: {task_id}"]
    waiting = status_of(state) == "waiting"
    if not waiting and result.stop_reason is not StopReason.CANCELLED:
        return lines
    path = _store_argument(loop.store)
    if path is None:
        lines.append(
            "not resumable from the shell: the loop saves its runs in no store (AgentLoop(store=...))"
        )
        return lines
    resume = f"boundloop resume {shlex.quote(spec)} {shlex.quote(task_id)} --store {path}"
    if not waiting:
        lines.append(f"continue it: {resume}")
        return lines
    flags = [f"--approve {shlex.quote(p.tool_use_id)}" for p in state.pending_approvals]
    if state.escalation is not None:
        flags.append("--reply TEXT")
    lines.append(f"waiting for a human: boundloop pending --store {path}")
    lines.append(f"then: {' '.join([resume, *flags])}  (or --deny ID[=REASON])")
    return lines


def _store_argument(store: CheckpointStore | None) -> str | None:
    """`--store`'s argument for the loop's store: a SQLite file's path; `STORE` for another
    store (a PostgreSQL URI may hold a password); None for no store or one in memory."""
    if isinstance(store, SignedStore):
        store = store.inner
    if store is None or isinstance(store, MemoryStore):
        return None
    return shlex.quote(str(store.path)) if isinstance(store, SQLiteStore) else "STORE"


def load_target(spec: str, app_dir: str) -> object:
    """Import SPEC's module from `app_dir` and return the attribute SPEC names.

    Args:
        spec: `module:attribute`, e.g. `myapp.agents:build_loop`.
        app_dir: the directory put first on `sys.path` to import the module from.

    Returns:
        The attribute: a factory, or an AgentLoop.

    Raises:
        CommandError: SPEC is malformed, the module cannot be imported, or has no such attribute.
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise CommandError(f"SPEC must be module:factory, e.g. myapp.agents:build_loop; got {spec!r}")
    path = str(Path(app_dir).resolve())
    if path not in sys.path:
        sys.path.insert(0, path)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, SyntaxError, or whatever the module raises on import
        raise CommandError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from exc
    try:
        target: object = getattr(module, attribute)
    except AttributeError as exc:
        raise CommandError(f"module {module_name!r} has no attribute {attribute!r}") from exc
    return target


async def make_loop(spec: str, target: object) -> AgentLoop[Any]:
    """The AgentLoop `target` is, or the one it returns when called (and awaited, if async).

    Args:
        spec: SPEC as given, for the error messages.
        target: what `load_target` returned.

    Returns:
        The loop to run.

    Raises:
        CommandError: the factory raised, or what SPEC names is not an AgentLoop.
    """
    made: object = target
    if not isinstance(made, AgentLoop) and callable(made):
        try:
            made = made()
            if inspect.isawaitable(made):
                made = await made
        except ConfigurationError as exc:
            raise CommandError(f"{spec}: {exc}") from exc
        except Exception as exc:  # the user's factory: report it, never a traceback
            raise CommandError(f"{spec}: the factory raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(made, AgentLoop):
        raise CommandError(f"{spec} must be an AgentLoop or return one, got {type(made).__name__}")
    return made  # pyright: ignore[reportUnknownVariableType]  # an AgentLoop of any output type
