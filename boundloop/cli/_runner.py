"""Running one loop for `demo`, `run` and `resume`: the live view or JSON, `--trace` and metrics."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType

import anyio
import anyio.abc
from rich.console import Console

from .. import AgentLoop, ConfigurationError, LoopError, LoopResult, StopReason
from ..events import Event, Stop, write_events
from ..metrics import MetricsServer, serve
from ._app import exit_now
from ._errors import EXIT_INTERRUPTED, EXIT_NOT_COMPLETED, EXIT_OK, CommandError
from ._json import dumps
from ._view import RunView

LoopBuilder = Callable[[], Awaitable[AgentLoop]]
"""Makes the loop to run, inside the command's event loop (a factory may be async)."""

Cleanup = Callable[[], Awaitable[object]]
"""Called inside the event loop once the run is over, e.g. a client's `close`."""

EventHook = Callable[[Event], None]
"""Gets every trace event of the run as it is recorded."""

Start = Callable[[AgentLoop, RunView | None, EventHook, anyio.Event], Awaitable[LoopResult]]
"""Runs the built loop (`loop.run(goal)`, `loop.resume(task_id)`) with the event hook and the
cancel event (set by Ctrl-C), after telling the view (None with `--json`) what it shows; may
raise `CommandError`."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """What `demo`, `run` and `resume` share: --trace, --metrics-port, --metrics-addr, --hold, --json."""

    trace: str | None = None
    metrics_port: int | None = None
    metrics_addr: str = "127.0.0.1"
    hold: bool = False
    json: bool = False

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunOptions:
        """Read the shared options from parsed arguments.

        Args:
            args: what `build_parser().parse_args` returned for `demo`, `run` or `resume`.

        Returns:
            The options, typed.
        """
        trace: str | None = args.trace
        port: int | None = args.metrics_port
        addr: str = args.metrics_addr
        hold: bool = args.hold
        as_json: bool = args.json
        return cls(trace=trace, metrics_port=port, metrics_addr=addr, hold=hold, json=as_json)


def run_goal(goal: str) -> Start:
    """How `demo` and `run` start the loop: `loop.run(goal)`, the goal in the view's header.

    Args:
        goal: the task, the first user message.

    Returns:
        The start function for `execute`.

    Raises:
        CommandError: the goal is empty.
    """
    if not goal.strip():
        raise CommandError("--goal must not be empty")

    async def start(
        loop: AgentLoop, view: RunView | None, on_event: EventHook, cancel: anyio.Event
    ) -> LoopResult:
        if view is not None:
            view.start(loop, goal)
        return await loop.run(goal, on_event=on_event, cancel=cancel)

    return start


def execute(options: RunOptions, build: LoopBuilder, start: Start, *, cleanup: Cleanup | None = None) -> int:
    """Run a loop with the live view (or `--json`), writing the trace and serving metrics.

    Ctrl-C sets the run's cancel event: the run stops `cancelled` at once (a tool running in a
    worker thread is abandoned, and its result says so), its checkpoint and trace are written,
    and the command exits 130. A second Ctrl-C ends the process at once.

    Args:
        options: the shared run options.
        build: makes the loop, inside the event loop.
        start: runs it (see `run_goal`), returning its result.
        cleanup: awaited after the run, whatever its outcome (e.g. closing the client).

    Returns:
        0 when the run completed, 1 for any other stop reason.

    Raises:
        CommandError: a usage or setup error (code 2), the run failed (code 1), or it was
            interrupted (code 130).
    """
    # Before the event loop and the run: a failure found after the run comes after the model calls.
    created = options.trace is not None and _open_trace(options.trace)
    console = Console(file=sys.stdout, highlight=False)
    server: MetricsServer | None = None
    events: list[Event] = []
    interrupted: list[bool] = []
    previous: object = None
    try:
        server = _start_metrics(options)
        code = anyio.run(_run_loop, options, build, start, console, events, cleanup, interrupted)
        if interrupted:
            # What is left (the trace, the metrics server) is quick; another Ctrl-C ends it now.
            previous = signal.signal(signal.SIGINT, _exit_on_signal)
            raise CommandError("interrupted", EXIT_INTERRUPTED)
        if server is not None and options.hold:
            # Operational notices go to stderr only: stdout is the view or the JSON result.
            print(f"metrics: {server.url} (holding until Ctrl-C)", file=sys.stderr, flush=True)
            try:
                threading.Event().wait()
            except KeyboardInterrupt:
                pass
        return code
    finally:
        try:
            # Also after a failure or Ctrl-C: the trace of an interrupted run is what one wants.
            if options.trace is not None:
                if events:
                    _write_events(events, options.trace)
                elif created:  # nothing ran (a setup error): leave no empty file behind
                    with contextlib.suppress(OSError):
                        Path(options.trace).unlink(missing_ok=True)
        finally:
            if server is not None:
                server.close()
            if previous is not None:
                signal.signal(signal.SIGINT, previous)  # type: ignore[arg-type]


def _exit_on_signal(signum: int, frame: FrameType | None) -> None:
    """A second Ctrl-C: say so and end the process at once."""
    print("boundloop: error: interrupted again: exiting at once", file=sys.stderr)
    exit_now(EXIT_INTERRUPTED)


def _open_trace(path: str) -> bool:
    """Open `--trace` for writing now, so an unusable path fails before any model call.

    A permission check (`os.access`) is not enough: root passes it for a path that cannot be
    written all the same, and it says nothing of a parent that is a file. The file is opened,
    created if missing, but not truncated: a run that fails before its first event leaves an
    existing trace as it was.

    Args:
        path: the `--trace` argument.

    Returns:
        Whether the file was created (so it can be removed if the run records nothing).

    Raises:
        CommandError: the file cannot be opened for writing (code 2).
    """
    try:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            created = True
        except FileExistsError:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT)
            created = False
    except OSError as exc:
        raise _trace_error(path, exc) from exc
    os.close(fd)
    return created


def _trace_error(path: str, exc: OSError) -> CommandError:
    return CommandError(f"cannot write the trace {path}: {exc.strerror or exc}")


def _start_metrics(options: RunOptions) -> MetricsServer | None:
    port = options.metrics_port
    if port is None:
        if options.hold:
            raise CommandError("--hold keeps the metrics server up: it needs --metrics-port N")
        return None
    if not 0 <= port <= 65535:
        raise CommandError(f"--metrics-port must be 0-65535, got {port}")
    try:
        server = serve(port, addr=options.metrics_addr)
    except OSError as exc:
        raise CommandError(
            f"cannot serve metrics on {options.metrics_addr}:{port}: {exc.strerror or exc}"
        ) from exc
    print(f"metrics: {server.url}", file=sys.stderr, flush=True)  # stdout is the view or the JSON
    return server


async def _run_loop(
    options: RunOptions,
    build: LoopBuilder,
    start: Start,
    console: Console,
    events: list[Event],
    cleanup: Cleanup | None,
    interrupted: list[bool],
) -> int:
    view = None if options.json else RunView(console)
    cancel = anyio.Event()

    def record(event: Event) -> None:
        events.append(event)
        if view is not None:
            view(event)

    async def run() -> LoopResult:
        return await start(await build(), view, record, cancel)

    try:
        result = await _interruptible(run, cancel, interrupted)
    except CommandError:
        raise
    except ConfigurationError as exc:
        raise CommandError(str(exc)) from exc
    except Exception as exc:  # a LoopError, or raised by the user's tools or callbacks: one line
        raise CommandError(f"the run failed: {_failure(exc, events)}", EXIT_NOT_COMPLETED) from exc
    finally:
        if cleanup is not None:
            await cleanup()
    if view is None:
        print(dumps(result.to_dict()))
    else:
        view.summary(result)
    return EXIT_OK if result.stop_reason is StopReason.COMPLETED else EXIT_NOT_COMPLETED


def _failure(exc: Exception, events: list[Event]) -> str:
    """What failed, as the run recorded it: its stop's detail, redacted as every event is (a
    tool's exception may name a secret), without the type's name for boundloop's own errors."""
    named = f"{type(exc).__name__}: "
    stops = [event for event in events if isinstance(event, Stop) and event.stop_reason == "failed"]
    detail = stops[-1].detail if stops and stops[-1].detail else f"{named}{exc}"
    return detail.removeprefix(named) if isinstance(exc, LoopError) else detail


async def _interruptible(
    run: Callable[[], Awaitable[LoopResult]], cancel: anyio.Event, interrupted: list[bool]
) -> LoopResult:
    """`run()`, with Ctrl-C setting `cancel` (in the main thread: signals reach no other)."""
    if threading.current_thread() is not threading.main_thread():
        return await run()
    results: list[LoopResult] = []
    try:
        async with anyio.create_task_group() as group:
            await group.start(_watch_interrupts, cancel, interrupted)
            results.append(await run())
            group.cancel_scope.cancel()
    except BaseExceptionGroup as group_error:  # the run's own failure, as itself
        if len(group_error.exceptions) == 1:
            raise group_error.exceptions[0] from None
        raise
    return results[0]


async def _watch_interrupts(
    cancel: anyio.Event, interrupted: list[bool], *, task_status: anyio.abc.TaskStatus[None]
) -> None:
    """Ctrl-C: the first sets the run's cancel event, a second ends the process at once."""
    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        task_status.started()
        async for _ in signals:
            if interrupted:
                _exit_on_signal(signal.SIGINT, None)
            interrupted.append(True)
            cancel.set()


def _write_events(events: list[Event], path: str) -> None:
    try:
        write_events(events, path)
    except OSError as exc:
        raise _trace_error(path, exc) from exc
