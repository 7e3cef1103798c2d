"""The `boundloop` command: `demo`, `run` and `diagram`.

`main(argv) -> int` is the whole command, so tests call it in-process; `python -m boundloop`
and the `boundloop` console script both call it. Errors are one line on stderr
(`boundloop: error: ...`) with a non-zero exit code, never a traceback:

- 0: the run completed (or the diagram was written);
- 1: the run stopped for another reason (`max_steps`, `policy_blocked`, ...) or failed;
- 2: a usage or setup error (bad arguments, unreadable file, missing API key or graphviz);
- 130: interrupted with Ctrl-C.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final, NoReturn

import anyio
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from . import __version__, demo
from .errors import ConfigurationError, GraphvizMissing, LoopError
from .loop import AgentLoop
from .metrics import MetricsServer, serve
from .state import Budget, LoopResult, StopReason
from .statemachine import diagram
from .trace import TraceEvent, read_trace, write_trace

EXIT_OK: Final = 0
EXIT_NOT_COMPLETED: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130

EXIT_CODES: Final = """\
exit codes:
  0    the run completed (diagram: the diagram was written)
  1    the run stopped otherwise (max_steps, policy_blocked, ...) or failed
  2    usage or setup error: bad arguments, a file, the API key, graphviz
  130  interrupted (Ctrl-C) during a run; with --hold, Ctrl-C ends
       the hold and the exit code is the run's"""


class CommandError(Exception):
    """A failure reported as one line on stderr with an exit code; never a traceback."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        self.code = code
        super().__init__(" ".join(message.split()))


class _Parser(argparse.ArgumentParser):
    """argparse, with errors raised as `CommandError` so they print as one line."""

    def error(self, message: str) -> NoReturn:
        raise CommandError(f"{message} (see `{self.prog} --help`)")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `boundloop` command.

    Args:
        argv: the arguments after the program name; default: `sys.argv[1:]`.

    Returns:
        The exit code (0, 1, 2 or 130; see `boundloop --help`).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        command: Callable[[argparse.Namespace], int] = args.command
        return command(args)
    except SystemExit as exit_:  # --help and --version
        return exit_.code if isinstance(exit_.code, int) else EXIT_OK
    except CommandError as exc:
        _error(str(exc))
        return exc.code
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED


def _error(message: str) -> None:
    print(f"boundloop: error: {message}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `boundloop` command and its subcommands."""
    parser = _Parser(
        prog="boundloop",
        description="A bounded, explicit, observable agent loop for Claude.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"boundloop {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True, parser_class=_Parser)

    demo_parser = commands.add_parser(
        "demo",
        help="run the refund-investigation demo (no API key needed)",
        description=_wrap(
            "Run the refund-investigation demo on the embedded ScriptedClient: no API key, "
            "no network. Shows each transition, the parallel tool calls, the validation decisions "
            "and the budget left as they happen, then the stop reason, the answer and the totals."
        ),
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo_parser.add_argument(
        "--live", action="store_true", help="use the real API (AsyncAnthropic, ANTHROPIC_API_KEY)"
    )
    demo_parser.add_argument(
        "--model", default=demo.MODEL, help=f"model name (default: {demo.MODEL}); with --live, the model used"
    )
    _add_run_options(demo_parser)
    demo_parser.set_defaults(command=_demo)

    run_parser = commands.add_parser(
        "run",
        help="run your own loop: SPEC is module:factory returning an AgentLoop",
        description=_wrap(
            "Run an AgentLoop of your own. SPEC is `module:factory`, where `factory()` "
            "returns an AgentLoop (it may be async; `module:loop` naming an AgentLoop works too). "
            "The module is imported from the current directory (or --app-dir)."
        ),
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run_parser.add_argument("spec", metavar="SPEC", help="module:factory, e.g. myapp.agents:build_loop")
    run_parser.add_argument("--goal", required=True, help="the task: the first user message")
    run_parser.add_argument(
        "--app-dir", default=".", help="directory to import SPEC's module from (default: .)"
    )
    _add_run_options(run_parser)
    run_parser.set_defaults(command=_run)

    diagram_parser = commands.add_parser(
        "diagram",
        help="draw the state machine (mermaid, dot, svg, png), optionally with a run's path",
        description=_wrap(
            "Draw the loop's state machine from its transition table. Guards are on the "
            "edges and the final state is marked. With --trace, the path one run took is "
            "highlighted and each edge is labelled with how often it was taken. svg and png need "
            "graphviz (`apt-get install graphviz`). An --output ending in .md updates the mermaid "
            "block of that markdown file in place (docs/state-machine.md)."
        ),
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    diagram_parser.add_argument(
        "--format",
        choices=diagram.FORMATS,
        help="output format (default: from --output's suffix, else mermaid)",
    )
    diagram_parser.add_argument("--output", "-o", metavar="FILE", help="write here instead of stdout")
    diagram_parser.add_argument(
        "--trace", metavar="FILE", help="a JSON-lines trace (from --trace) whose path to highlight"
    )
    diagram_parser.set_defaults(command=_diagram)
    return parser


def _wrap(text: str) -> str:
    return textwrap.fill(text, width=79)


def _add_run_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", metavar="FILE", help="write the run's trace here as JSON lines")
    parser.add_argument(
        "--metrics-port", type=int, metavar="N", help="serve Prometheus metrics on this port while running"
    )
    parser.add_argument(
        "--metrics-addr",
        default="127.0.0.1",
        metavar="ADDR",
        help="address for --metrics-port (default: 127.0.0.1)",
    )
    parser.add_argument(
        "--hold", action="store_true", help="keep serving metrics after the run ends, until Ctrl-C"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the LoopResult as JSON instead of the live view"
    )


# -- demo and run ----------------------------------------------------------------------------


def _demo(args: argparse.Namespace) -> int:
    model: str = args.model
    client: Any = None
    if args.live:
        if not os.environ.get("ANTHROPIC_API_KEY"):
            raise CommandError(
                "--live needs an API key: set ANTHROPIC_API_KEY (or run the demo without --live)"
            )
        from anthropic import AsyncAnthropic

        client = AsyncAnthropic()

    async def build(on_event: Callable[[TraceEvent], None] | None) -> AgentLoop:
        return demo.demo_loop(client, model=model, on_event=on_event)

    return _execute(args, build, demo.GOAL)


def _run(args: argparse.Namespace) -> int:
    spec: str = args.spec
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise CommandError(f"SPEC must be module:factory, e.g. myapp.agents:build_loop; got {spec!r}")
    app_dir = str(Path(args.app_dir).resolve())
    if app_dir not in sys.path:
        sys.path.insert(0, app_dir)
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # ImportError, SyntaxError, or whatever the module raises on import
        raise CommandError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from exc
    try:
        target = getattr(module, attribute)
    except AttributeError as exc:
        raise CommandError(f"module {module_name!r} has no attribute {attribute!r}") from exc

    async def build(on_event: Callable[[TraceEvent], None] | None) -> AgentLoop:
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
        return made

    goal: str = args.goal
    return _execute(args, build, goal)


LoopBuilder = Callable[[Callable[[TraceEvent], None] | None], Any]


def _execute(args: argparse.Namespace, build: LoopBuilder, goal: str) -> int:
    if not goal.strip():
        raise CommandError("--goal must not be empty")
    trace_path: str | None = args.trace
    if trace_path is not None:
        _check_writable(trace_path)  # before the run: a --live run costs money
    console = Console(file=sys.stdout, highlight=False)
    server = _start_metrics(args)
    events: list[TraceEvent] = []
    try:
        code = anyio.run(_run_loop, args, build, goal, console, events)
        if server is not None and args.hold:
            # Operational notices go to stderr only: stdout is the view or the JSON result.
            print(f"metrics: {server.url} (holding until Ctrl-C)", file=sys.stderr, flush=True)
            try:
                threading.Event().wait()
            except KeyboardInterrupt:
                pass
        return code
    finally:
        # Also after a failure or Ctrl-C: the trace of an interrupted run is what one wants.
        if trace_path is not None and events:
            _write_events(events, trace_path)
        if server is not None:
            server.close()


def _check_writable(path: str) -> None:
    target = Path(path)
    if target.is_dir():
        raise CommandError(f"--trace {path} is a directory")
    if not target.parent.is_dir():
        raise CommandError(f"--trace {path}: the directory {str(target.parent)!r} does not exist")
    if not os.access(target.parent, os.W_OK):
        raise CommandError(f"--trace {path}: the directory is not writable")


def _start_metrics(args: argparse.Namespace) -> MetricsServer | None:
    port: int | None = args.metrics_port
    if port is None:
        if args.hold:
            raise CommandError("--hold keeps the metrics server up: it needs --metrics-port N")
        return None
    if not 0 <= port <= 65535:
        raise CommandError(f"--metrics-port must be 0-65535, got {port}")
    try:
        server = serve(port, addr=args.metrics_addr)
    except OSError as exc:
        raise CommandError(
            f"cannot serve metrics on {args.metrics_addr}:{port}: {exc.strerror or exc}"
        ) from exc
    print(f"metrics: {server.url}", file=sys.stderr, flush=True)  # stdout is the view or the JSON
    return server


async def _run_loop(
    args: argparse.Namespace, build: LoopBuilder, goal: str, console: Console, events: list[TraceEvent]
) -> int:
    view = None if args.json else RunView(console)
    loop: AgentLoop = await build(None)
    if view is not None:
        view.start(loop, goal)

    def record(event: TraceEvent) -> None:
        events.append(event)
        if view is not None:
            view(event)

    try:
        result = await loop.run(goal, on_event=record)
    except ConfigurationError as exc:
        raise CommandError(str(exc)) from exc
    except LoopError as exc:
        raise CommandError(f"the run failed: {exc}", EXIT_NOT_COMPLETED) from exc
    except Exception as exc:  # raised by the user's tools or callbacks: one line, no traceback
        raise CommandError(f"the run failed: {type(exc).__name__}: {exc}", EXIT_NOT_COMPLETED) from exc
    finally:
        client_close = getattr(loop.client, "close", None)
        if args.command is _demo and args.live and client_close is not None:
            await client_close()
    if args.json:
        print(result.to_json(indent=2))
    elif view is not None:
        view.summary(result)
    return EXIT_OK if result.stop_reason is StopReason.COMPLETED else EXIT_NOT_COMPLETED


def _write_events(events: list[TraceEvent], path: str) -> None:
    try:
        write_trace(events, path)
    except OSError as exc:
        raise CommandError(f"cannot write the trace to {path}: {exc.strerror or exc}") from exc


# -- the live view ---------------------------------------------------------------------------


class RunView:
    """A readable terminal view of a run as it happens, fed by `AgentLoop(on_event=...)`.

    Shows each transition, the model's proposal, the validation decisions, the tool calls
    running in parallel with their outcomes, and the budget left before every model call.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.budget: Budget | None = None
        self.started = time.perf_counter()
        self.tool_calls = 0
        self.batch_durations: list[float] = []

    def start(self, loop: AgentLoop, goal: str) -> None:
        """Print the run's header: the loop, the model, the goal and the budget."""
        self.budget = loop.budget
        self.started = time.perf_counter()
        self.console.print(
            Panel(
                f"[bold]{escape(goal)}[/]\n"
                f"[dim]loop[/]  {escape(loop.name)}    [dim]model[/]  {escape(loop.model)}\n"
                f"[dim]tools[/] {escape(', '.join(loop.tools))}",
                title="boundloop",
                title_align="left",
            )
        )

    def __call__(self, event: TraceEvent) -> None:
        """Show one trace event."""
        handler = getattr(self, f"_on_{event.kind}", None)
        if handler is not None:
            handler(event)

    def _print(self, text: str) -> None:
        self.console.print(text)

    def _on_transition(self, event: TraceEvent) -> None:
        if event.source == "assemble" and event.dest == "propose":
            self.console.rule(f"step {event.step + 1}  [dim]{self._budget_left(event.step)}[/]", align="left")
        extra = ""
        if event.source == "act" and event.duration_s is not None and len(self.batch_durations) > 1:
            serial = sum(self.batch_durations)
            extra = (
                f"  [dim]{len(self.batch_durations)} tools took {_ms(event.duration_s)}"
                f" (one by one: {_ms(serial)})[/]"
            )
        if event.source == "act":
            self.batch_durations = []
        trigger = f"  [dim]on {escape(str(event.trigger))}[/]" if event.trigger else ""
        self._print(f"  [cyan]{event.source}[/] → [cyan]{event.dest}[/]{trigger}{extra}")

    def _on_proposal(self, event: TraceEvent) -> None:
        data = event.data
        tools = data.get("tools") or []
        what = f": {escape(', '.join(map(str, tools)))}" if tools else ""
        tokens = ""
        if "input_tokens" in data:
            tokens = f"  [dim]({data.get('input_tokens')}+{data.get('output_tokens')} tokens)[/]"
        self._print(f"    [bold]model[/] {escape(str(data.get('stop_reason')))}{what}{tokens}")

    def _on_validation(self, event: TraceEvent) -> None:
        data = event.data
        calls = data.get("calls")
        decisions: list[dict[str, Any]] = list(calls) if isinstance(calls, list) else []
        if not decisions and "tool" in data:
            decisions = [data]
        for call in decisions:
            self._print("    " + _decision(call))
        if not decisions or data.get("stop_reason"):
            reason = f" ({escape(str(data['reason']))})" if data.get("reason") else ""
            outcome = escape(str(data.get("decision")))
            if data.get("stop_reason"):
                outcome += f" → {escape(str(data['stop_reason']))}"
            self._print(f"    [bold]validate[/] {outcome}{reason}")

    def _on_tool_call(self, event: TraceEvent) -> None:
        calls = event.data.get("calls")
        names = (
            [str(call.get("tool")) for call in calls]
            if isinstance(calls, list)
            else [str(event.data.get("tool"))]
        )
        how = f"{len(names)} tools in parallel" if len(names) > 1 else "1 tool"
        self._print(f"    [bold]act[/] running {how}: {escape(', '.join(names))}")

    def _on_tool_result(self, event: TraceEvent) -> None:
        data = event.data
        attempts = data.get("attempts")
        self.tool_calls += attempts if isinstance(attempts, int) else 1
        outcome = str(data.get("outcome"))
        duration = data.get("duration_s")
        if outcome == "ok":
            mark = "[green]✓[/]"
            if isinstance(duration, int | float):
                self.batch_durations.append(float(duration))
        elif outcome == "denied":
            mark = "[red]⊘ blocked[/]"
        else:
            mark = f"[red]✗ {escape(outcome)}[/]"
        took = f"  [dim]{_ms(float(duration))}[/]" if isinstance(duration, int | float) and duration else ""
        self._print(f"      {mark} {escape(str(data.get('tool')))}{took}")

    def _on_stop(self, event: TraceEvent) -> None:
        reason = str(event.data.get("stop_reason"))
        colour = "green" if reason == StopReason.COMPLETED else "red"
        detail = f" ({escape(str(event.data['detail']))})" if event.data.get("detail") else ""
        self._print(f"  [bold {colour}]stopped: {reason}[/]{detail}")

    def _on_error(self, event: TraceEvent) -> None:
        self._print(f"    [red]error[/] {escape(str(event.data))}")

    def _budget_left(self, steps_used: int) -> str:
        budget = self.budget
        if budget is None:
            return ""
        parts = [f"budget left: {budget.max_steps - steps_used}/{budget.max_steps} steps"]
        if budget.max_tool_calls is not None:
            parts.append(f"{budget.max_tool_calls - self.tool_calls}/{budget.max_tool_calls} tool calls")
        if budget.timeout_s is not None:
            left = budget.timeout_s - (time.perf_counter() - self.started)
            parts.append(f"{max(left, 0.0):.1f} s")
        return " · ".join(parts)

    def summary(self, result: LoopResult) -> None:
        """Print the stop reason, the answer and the run's totals."""
        state = result.state
        colour = "green" if result.ok else "red"
        table = Table.grid(padding=(0, 2))
        table.add_row("[bold]stop reason[/]", f"[bold {colour}]{result.stop_reason}[/]")
        if state.stop_detail:
            table.add_row("detail", escape(state.stop_detail))
        steps = f"{state.step}" + (f" of {self.budget.max_steps}" if self.budget else "")
        table.add_row("model calls", steps)
        calls = f"{state.tool_calls}"
        if self.budget is not None and self.budget.max_tool_calls is not None:
            calls += f" of {self.budget.max_tool_calls}"
        blocked = sum(1 for obs in state.observations if obs.get("outcome") == "denied")
        if blocked:
            calls += f" ({blocked} blocked by policy)"
        table.add_row("tool calls", calls)
        usage = result.usage
        table.add_row("tokens", f"{usage.input_tokens} in / {usage.output_tokens} out")
        if usage.cost_usd:
            table.add_row("cost", f"${usage.cost_usd:.4f}")
        stop_events = [event for event in result.trace if event.kind == "stop"]
        if stop_events and isinstance(stop_events[-1].data.get("duration_s"), int | float):
            table.add_row("duration", _ms(float(stop_events[-1].data["duration_s"])))
        self.console.print()
        self.console.print(table)
        if result.answer:
            self.console.print(Panel(escape(result.answer), title="answer", title_align="left"))


def _decision(call: dict[str, Any]) -> str:
    decision = str(call.get("decision"))
    tool = escape(str(call.get("tool")))
    reason = f" [dim]({escape(str(call['reason']))})[/]" if call.get("reason") else ""
    if decision == "execute":
        return f"[bold]validate[/] [green]allow[/] {tool}"
    return f"[bold]validate[/] [red]{escape(decision)}[/] {tool}{reason}"


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


# -- diagram ---------------------------------------------------------------------------------

_SUFFIX_FORMATS: Final[dict[str, diagram.DiagramFormat]] = {
    ".mmd": "mermaid",
    ".mermaid": "mermaid",
    ".md": "mermaid",
    ".dot": "dot",
    ".gv": "dot",
    ".svg": "svg",
    ".png": "png",
}


def _diagram(args: argparse.Namespace) -> int:
    output: Path | None = None if args.output is None else Path(args.output)
    chosen: diagram.DiagramFormat | None = args.format
    if chosen is None:
        chosen = _SUFFIX_FORMATS.get(output.suffix.lower(), "mermaid") if output is not None else "mermaid"
    trace: list[TraceEvent] | None = None
    if args.trace is not None:
        try:
            trace = read_trace(args.trace)
        except OSError as exc:
            raise CommandError(f"cannot read the trace {args.trace}: {exc.strerror or exc}") from exc
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
    if output is not None and output.suffix.lower() == ".md":
        if chosen != "mermaid":
            raise CommandError(f"a markdown --output holds a mermaid diagram, not {chosen}")
        _update_markdown(output, diagram.render_mermaid(trace))
        return EXIT_OK
    if chosen == "png" and output is None:
        raise CommandError("png is binary: pass --output FILE")
    try:
        image = diagram.render(chosen, trace)
    except GraphvizMissing as exc:
        raise CommandError(f"{chosen} needs graphviz: {exc}") from exc
    except ValueError as exc:
        raise CommandError(str(exc)) from exc
    if output is None:
        sys.stdout.write(image.decode())
        sys.stdout.flush()
        return EXIT_OK
    try:
        output.write_bytes(image)
    except OSError as exc:
        raise CommandError(f"cannot write {output}: {exc.strerror or exc}") from exc
    return EXIT_OK


def _update_markdown(path: Path, mermaid: str) -> None:
    try:
        before = path.read_text(encoding="utf-8") if path.exists() else ""
        path.write_text(diagram.replace_mermaid_block(before, mermaid), encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot update {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise CommandError(f"{path}: {exc}") from exc
