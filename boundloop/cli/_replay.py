"""`boundloop replay SOURCE`: re-drive a recorded run and say whether it takes the same path."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import anyio

from .. import AgentLoop, CheckpointCorrupt, CheckpointStore, LoopError, LoopState, ReplayReport, replay
from ._errors import EXIT_NOT_COMPLETED, EXIT_OK, CommandError
from ._run import load_target, make_loop
from ._store import closing, load_state, open_store

CONTEXT_LINES = 3
"""Lines of both trajectories shown around the first divergence with `--diff`."""


def replay_command(args: argparse.Namespace) -> int:
    """Replay a stored task, a trace file or a state file, and report whether it diverged.

    Args:
        args: the parsed arguments of `boundloop replay`.

    Returns:
        0 when the replay is identical, 1 when it diverged (or failed).

    Raises:
        CommandError: a usage error: a missing file or task, a corrupt checkpoint, a trace with
            no state in it, a SPEC that leads to no AgentLoop.
    """
    source: str = args.source
    store_path: str | None = args.store
    spec: str | None = args.loop
    app_dir: str = args.app_dir
    store = None if store_path is None else open_store(store_path)
    if store is None:
        _check_file(source)
    target = None if spec is None else load_target(spec, app_dir)
    report = anyio.run(_replay, source, store, store_path, spec, target)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        print(report.describe())
        if args.diff and report.divergence is not None:
            print()
            print("\n".join(first_divergence(report)))
    return EXIT_OK if report.identical else EXIT_NOT_COMPLETED


def _check_file(source: str) -> None:
    path = Path(source)
    if path.is_dir():
        raise CommandError(f"{source} is a directory: give a trace (.jsonl) or a state (.json) file")
    if not path.exists():
        raise CommandError(
            f"{source}: no such file (a trace .jsonl or a state .json; a task id needs --store PATH)"
        )


async def _replay(
    source: str, store: CheckpointStore | None, store_path: str | None, spec: str | None, target: object
) -> ReplayReport:
    async with closing(store):  # a PostgresStore's pool, once the state is read or the replay fails
        return await _replay_from(source, store, store_path, spec, target)


async def _replay_from(
    source: str, store: CheckpointStore | None, store_path: str | None, spec: str | None, target: object
) -> ReplayReport:
    loop: AgentLoop | None = None
    if spec is not None:
        loop = await make_loop(spec, target)
    recorded: LoopState | str = source
    if store is not None:
        assert store_path is not None
        recorded = await load_state(store, store_path, source)
    try:
        return await replay(recorded, loop=loop, store=store)  # with the runs it delegated to
    except UnicodeDecodeError as exc:
        raise CommandError(f"{source} is not a trace or a state file: it is not UTF-8 text") from exc
    except (CheckpointCorrupt, LoopError) as exc:  # TaskNotFound is a LoopError
        raise CommandError(str(exc)) from exc
    except ValueError as exc:  # not a state or trace, or one that records too little
        raise CommandError(str(exc) if store is not None else f"{source}: {exc}") from exc
    except OSError as exc:
        raise CommandError(f"cannot read {source}: {exc.strerror or exc}") from exc
    except Exception as exc:  # the user's tools or callbacks: one line, no traceback
        raise CommandError(f"the replay failed: {type(exc).__name__}: {exc}", EXIT_NOT_COMPLETED) from exc


def first_divergence(report: ReplayReport, context: int = CONTEXT_LINES) -> list[str]:
    """Where the two trajectories part, with a few lines of context of each.

    The lines both share before the divergence are shown once; then the recorded trajectory
    (the diverging line marked `-`) and the replayed one (marked `+`), each for `context`
    lines on.

    Args:
        report: a report with a divergence.
        context: lines of context before the divergence, and of each trajectory after it.

    Returns:
        The lines to print; none when the report has no divergence.
    """
    divergence = report.divergence
    if divergence is None:
        return []
    index = divergence.index
    width = len(str(max(len(report.expected), len(report.got), 1)))

    def numbered(lines: list[str], start: int, stop: int, mark: str) -> list[str]:
        return [
            f"  {mark if n == index else ' '} {n:>{width}}  {lines[n]}"
            for n in range(start, min(stop, len(lines)))
        ]

    shown = [f"first divergence at step {index}:"]
    shown += numbered(report.expected, max(0, index - context), index, " ")
    for name, lines, mark in (("recorded", report.expected, "-"), ("replayed", report.got, "+")):
        after = numbered(lines, index, index + context + 1, mark)
        shown.append(f" {name}:" if after else f" {name}: (ends before step {index})")
        shown += after
    return shown
