"""The `boundloop` command's argument parser: every subcommand, its options and exit codes."""

from __future__ import annotations

import argparse
import importlib
import textwrap
from collections.abc import Callable
from typing import Any, NoReturn

from .. import __version__
from ._defaults import DEMO_MODEL, DIAGRAM_FORMATS, SIMULATED_MODEL
from ._errors import (
    CHECK_EXIT_CODES,
    COMPILE_EXIT_CODES,
    DEMO_EXIT_CODES,
    DIAGRAM_EXIT_CODES,
    EVAL_EXIT_CODES,
    EXIT_CODES,
    LINT_EXIT_CODES,
    PENDING_EXIT_CODES,
    READY_EXIT_CODES,
    REPLAY_EXIT_CODES,
    RESUME_EXIT_CODES,
    RUN_EXIT_CODES,
    CommandError,
)
from ._platform import LIVE_PLATFORMS
from ._scenarios import SCENARIO_NAMES

Command = Callable[[argparse.Namespace], int]
"""A subcommand: its parsed arguments in, the exit code out."""


def command(module: str, name: str) -> Command:
    """The subcommand `name` of `boundloop.cli.<module>`, imported only when it runs.

    Building the parser imports no command: `--help`, `--version` and a usage error never load
    the loop, the Anthropic SDK, pydantic or rich.
    """

    def run(args: argparse.Namespace) -> int:
        found: Command = getattr(importlib.import_module(f"{__package__}.{module}"), name)
        return found(args)

    run.__name__ = run.__qualname__ = name
    return run


def wrap(text: str) -> str:
    return textwrap.fill(text, width=79)


def add_store(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    parser.add_argument(
        "--store",
        required=required,
        metavar="PATH",
        help="the store: a SQLite file or a postgresql:// URI (a file must exist)",
    )


def add_app_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--app-dir", default=".", help="directory to import SPEC's module from (default: .)")


class _Parser(argparse.ArgumentParser):
    """argparse, with errors raised as `CommandError` so they print as one line, and the
    descriptions and exit-code epilogs printed as written."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise CommandError(f"{message} (see `{self.prog} --help`)")


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of the `boundloop` command and its subcommands.

    Returns:
        The parser; `parse_args` sets `command` to the subcommand's function.
    """
    parser = _Parser(
        prog="boundloop",
        description="A bounded, explicit, observable agent loop for Claude.",
        epilog=EXIT_CODES,
    )
    parser.add_argument("--version", action="version", version=f"boundloop {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True, parser_class=_Parser)

    demo_parser = commands.add_parser(
        "demo",
        help="run the refund-investigation demo (no API key needed)",
        description=wrap(
            "Run the refund-investigation demo on the embedded ScriptedClient: no API key, "
            "no network. Shows each transition, the parallel tool calls, the validation decisions "
            "and the budget left as they happen, then the stop reason, the answer and the totals."
        ),
        epilog=DEMO_EXIT_CODES,
    )
    demo_parser.add_argument(
        "--live", action="store_true", help="use the real API (AsyncAnthropic, ANTHROPIC_API_KEY)"
    )
    demo_parser.add_argument(
        "--scenario",
        choices=SCENARIO_NAMES,
        default="completed",
        help="which ending the scripted model plays: one per refund stop reason (default: completed)",
    )
    demo_parser.add_argument(
        "--model",
        default=DEMO_MODEL,
        help=f"model name (default: {DEMO_MODEL}); with --live, the model used ({SIMULATED_MODEL}: the "
        "simulated model, offline, no key)",
    )
    demo_parser.add_argument(
        "--platform",
        choices=LIVE_PLATFORMS,
        default="anthropic",
        help="with --live, where Claude runs: the Claude API (default), Amazon Bedrock, Google Vertex "
        "AI or Microsoft Foundry, the SDK's client for it built from the platform's environment "
        "variables (docs/platforms.md)",
    )
    _add_run_options(demo_parser)
    demo_parser.set_defaults(command=command("_demo", "demo_command"))

    run_parser = commands.add_parser(
        "run",
        help="run your own loop: SPEC is module:factory returning an AgentLoop",
        description=wrap(
            "Run an AgentLoop of your own. SPEC is `module:factory`, where `factory()` "
            "returns an AgentLoop (it may be async; `module:loop` naming an AgentLoop works too). "
            "The module is imported from the current directory (or --app-dir)."
        ),
        epilog=RUN_EXIT_CODES,
    )
    run_parser.add_argument("spec", metavar="SPEC", help="module:factory, e.g. myapp.agents:build_loop")
    run_parser.add_argument("--goal", required=True, help="the task: the first user message")
    add_app_dir(run_parser)
    _add_run_options(run_parser)
    run_parser.set_defaults(command=command("_run", "run_command"))
    _add_store_commands(commands.add_parser)
    _add_inspector_commands(commands.add_parser)

    diagram_parser = commands.add_parser(
        "diagram",
        help="draw the state machine (mermaid, dot, svg, png), optionally with a run's path",
        description=wrap(
            "Draw the loop's state machine from its transition table. Guards are on the "
            "edges and the final state is marked. With --trace, the path one run took is "
            "highlighted and each edge is labelled with how often it was taken. svg and png need "
            "graphviz (`apt-get install graphviz`). The format is --format's, else the one "
            "--output's suffix names (.mmd, .mermaid, .md: mermaid; .dot, .gv: dot; .svg; .png), "
            "else mermaid; a --format the suffix contradicts (--format dot -o x.svg) is refused. "
            "An --output ending in .md updates the mermaid block of that markdown file in place "
            "(docs/state-machine.md)."
        ),
        epilog=DIAGRAM_EXIT_CODES,
    )
    diagram_parser.add_argument(
        "--format",
        choices=DIAGRAM_FORMATS,
        help="output format (default: from --output's suffix, else mermaid); it must agree with the suffix",
    )
    diagram_parser.add_argument("--output", "-o", metavar="FILE", help="write here instead of stdout")
    diagram_parser.add_argument(
        "--trace", metavar="FILE", help="a JSON-lines trace (from --trace) whose path to highlight"
    )
    diagram_parser.set_defaults(command=command("_diagram", "diagram_command"))
    _add_eval_command(commands.add_parser)
    _add_contract_commands(commands.add_parser)
    return parser


def _add_store_commands(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
    """Add `pending`, `resume` and `replay`, the commands on stored runs, with `add_parser`."""
    pending_parser = add_parser(
        "pending",
        help="list the runs in a store waiting for a human",
        description=wrap(
            "List the runs in a store (a SQLite file or a PostgreSQL database) that stopped with "
            "needs_human and wait for a human: their calls waiting for approval (id, tool, input, "
            "step), or the question the model asked. Newest first, each with the `boundloop "
            "resume` command that continues it."
        ),
        epilog=PENDING_EXIT_CODES,
    )
    add_store(pending_parser, required=True)
    pending_parser.add_argument("--json", action="store_true", help="print a JSON list instead")
    pending_parser.set_defaults(command=command("_pending", "pending_command"))

    resume_parser = add_parser(
        "resume",
        help="continue a stored run: approve or deny its calls, or answer the model",
        description=wrap(
            "Continue TASK_ID from a store (a SQLite file or a PostgreSQL database) through the "
            "loop SPEC names (module:factory, as for `run`; its store is replaced by --store), "
            "with the same view. A run waiting for approval needs one --approve or --deny for "
            "each waiting call; a run stopped by the model's question needs --reply. A run "
            "interrupted mid-run goes on where it was saved. See `boundloop pending` for what "
            "each run waits for."
        ),
        epilog=RESUME_EXIT_CODES,
    )
    resume_parser.add_argument("spec", metavar="SPEC", help="module:factory, e.g. myapp.agents:build_loop")
    resume_parser.add_argument("task_id", metavar="TASK_ID", help="the stored run to continue")
    add_store(resume_parser, required=True)
    add_app_dir(resume_parser)
    resume_parser.add_argument(
        "--approve", action="append", metavar="ID", help="run this waiting call (repeatable)"
    )
    resume_parser.add_argument(
        "--deny",
        action="append",
        metavar="ID[=REASON]",
        help="refuse this waiting call; the model sees the reason (repeatable)",
    )
    resume_parser.add_argument("--reply", metavar="TEXT", help="the answer to the model's question")
    _add_run_options(resume_parser)
    resume_parser.set_defaults(command=command("_resume", "resume_command"))

    replay_parser = add_parser(
        "replay",
        help="re-drive a recorded run and report whether it takes the same path",
        description=wrap(
            "Replay a recorded run: SOURCE is a task id (with --store), or a trace (.jsonl, "
            "from --trace) or a state file (.json, LoopState.to_json()). The recorded model "
            "responses are driven through the configuration recorded with the run, or through "
            "the loop --loop SPEC names (its tools, policy and budget), and the two trajectories "
            "are compared."
        ),
        epilog=REPLAY_EXIT_CODES,
    )
    replay_parser.add_argument(
        "source", metavar="SOURCE", help="a task id (with --store), a trace .jsonl or a state .json"
    )
    add_store(replay_parser)
    replay_parser.add_argument(
        "--loop", metavar="SPEC", help="replay through this loop (module:factory) instead of the recorded one"
    )
    add_app_dir(replay_parser)
    replay_parser.add_argument(
        "--diff", action="store_true", help="show both trajectories around the first divergence"
    )
    replay_parser.add_argument("--json", action="store_true", help="print the report as JSON instead")
    replay_parser.set_defaults(command=command("_replay", "replay_command"))


def _add_contract_commands(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
    """Add `check`, `compile`, `lint` and `ready`."""
    check_parser = add_parser(
        "check",
        help="check a loop contract (JSON) against its schemas and the loop's rules",
        description=wrap(
            "Validate a loop contract against the shipped JSON Schemas (loop-contract and "
            "loop-policy) and the loop's rules: a budget with max_steps, no control by the "
            "model's text, a handler for every API stop_reason, tools with schemas and names the "
            "API accepts, tool results only in user messages, no tool both allowed and "
            "forbidden. One line per problem: `FILE: RULE: FIELD: message`. See docs/contracts.md."
        ),
        epilog=CHECK_EXIT_CODES,
    )
    _add_contract_inputs(check_parser)
    check_parser.set_defaults(command=command("_contract", "check_command"))

    compile_parser = add_parser(
        "compile",
        help="write the Python module that builds a contract's loop, and a review report",
        description=wrap(
            "Check CONTRACT, then write --output: a Python module that builds the AgentLoop from "
            "the contract (inlined), with a typed handler stub per tool that raises "
            "NotImplementedError until you fill it in; and --report: a markdown review with the "
            "state diagram of the table the runtime executes, the signal/handler table, the "
            "budget, the tools, the policy and the checks passed."
        ),
        epilog=COMPILE_EXIT_CODES,
    )
    _add_contract_inputs(compile_parser)
    compile_parser.add_argument("--output", "-o", required=True, metavar="FILE", help="the module to write")
    compile_parser.add_argument("--report", metavar="FILE", help="the markdown report to write")
    compile_parser.set_defaults(command=command("_contract", "compile_command"))

    lint_parser = add_parser(
        "lint",
        help="flag the anti-patterns of hand-written agent loops in Python files",
        description=wrap(
            "Read Python files (their syntax tree, not text) and flag what makes a hand-written "
            "agent loop unbounded or unreliable: control by the model's text, `while True` "
            "with no bound, swallowed tool errors, only content[0] handled, tool results in "
            "the assistant role or without their tool_use_id, one message per tool result. "
            "Each finding with file:line:col and a one-line fix; `# boundloop: ignore[BL001]` "
            "on the line silences one. PATH is a file or a folder (its *.py, recursively)."
        ),
        epilog=LINT_EXIT_CODES,
    )
    lint_parser.add_argument("paths", nargs="+", metavar="PATH", help="Python files or folders")
    lint_parser.add_argument("--json", action="store_true", help="print the findings as a JSON list")
    lint_parser.set_defaults(command=command("_contract", "lint_command"))

    ready_parser = add_parser(
        "ready",
        help="check, compile, lint and strictly type-check a contract's loop: one exit code",
        description=wrap(
            "Every step a contract goes through before it ships, in one command: check CONTRACT, "
            "compile it (to a temporary folder), lint the module and type-check it with mypy "
            "--strict. The module is the one --module names (your loop, built from the contract "
            "or not), else the compiled one. One line per step, its findings under it."
        ),
        epilog=READY_EXIT_CODES,
    )
    _add_contract_inputs(ready_parser)
    ready_parser.add_argument(
        "--module", metavar="FILE", help="lint and type-check this module, not the compiled one"
    )
    ready_parser.set_defaults(command=command("_ready", "ready_command"))


def _add_contract_inputs(parser: argparse.ArgumentParser) -> None:
    """CONTRACT, --policy and --allow-outside: what `check` and `compile` read."""
    parser.add_argument("contract", metavar="CONTRACT", help="the contract's JSON file")
    parser.add_argument(
        "--policy", metavar="POLICY", help="a loop-policy.json used instead of the contract's"
    )
    parser.add_argument(
        "--allow-outside",
        action="store_true",
        help="read the files the contract names (policy, system prompt) even when one is an absolute "
        "path or outside the contract's folder (refused by default)",
    )


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


def _add_inspector_commands(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
    """Add `runs`, `pools` and `serve` (docs/inspector.md, docs/pools.md)."""
    runs_parser = add_parser(
        "runs",
        help="list every run in a store, newest first",
        description=wrap(
            "List the runs in a store (a SQLite file or a PostgreSQL database), newest save first: "
            "task id, status (running, waiting, stopped), stop reason, steps, cost, save time, goal; "
            "a delegated run indented under its parent."
        ),
    )
    add_store(runs_parser, required=True)
    runs_parser.add_argument("--status", choices=("running", "waiting", "stopped"), help="only these runs")
    runs_parser.add_argument("--stop-reason", metavar="REASON", help="only runs stopped for this reason")
    runs_parser.add_argument("--limit", type=int, default=50, metavar="N", help="runs listed (default: 50)")
    runs_parser.add_argument("--cursor", metavar="CURSOR", help="list the runs after this one (from `more:`)")
    runs_parser.add_argument("--json", action="store_true", help="print JSON instead")
    runs_parser.set_defaults(command=command("_serve", "runs_command"))

    pools_parser = add_parser(
        "pools",
        help="list the budget pools of a pool store: spent, reserved, ceiling",
        description=wrap(
            "List the budget pools in a pool store (a SQLite file of SQLitePoolStore or a PostgreSQL "
            "database of PostgresPoolStore), each pool's latest period: name, period, spent, "
            "reserved by calls running now, and the ceiling its latest reservation was held under."
        ),
    )
    add_store(pools_parser, required=True)
    pools_parser.add_argument("--json", action="store_true", help="print JSON instead")
    pools_parser.set_defaults(command=command("_pools", "pools_command"))

    serve_parser = add_parser(
        "serve",
        help="serve the inspector: the runs, each run's page, and the approvals",
        description=wrap(
            "Serve the inspector over a store in the browser (the web extra). With --loop SPEC "
            "(module:factory, your application's loop), Approve and Deny resume waiting runs "
            "through it, in this process; without it the pages are read-only. Bound to "
            "127.0.0.1 unless --host says otherwise, which needs --token."
        ),
    )
    add_store(serve_parser, required=True)
    serve_parser.add_argument("--loop", metavar="SPEC", help="resume approved runs through this loop")
    serve_parser.add_argument(
        "--pools",
        metavar="STORE",
        help="the budget pools' store (a SQLite file or a postgresql:// URI): /pools lists them",
    )
    serve_parser.add_argument(
        "--dbos-url",
        metavar="URL",
        help="the DBOS system database of your workers: a run waiting in its DBOS workflow gets the "
        "decision sent there (the dbos extra)",
    )
    add_app_dir(serve_parser)
    serve_parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    serve_parser.add_argument("--port", type=int, default=8321, help="port (default: 8321)")
    serve_parser.add_argument("--token", metavar="T", help="require this token (bearer, or the login form)")
    serve_parser.set_defaults(command=command("_serve", "serve_command"))


def _add_eval_command(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
    eval_parser = add_parser(
        "eval",
        help="run trajectory eval fixtures (JSON cases) and report; --export a stored run as one",
        description=wrap(
            "Run eval cases: JSON fixtures with a goal, the model's turns, mocked tool results "
            "and what the run must do (stop reason, tools that ran or must not, trace events, "
            "answer). Every case runs in process on the scripted model, concurrently; each is "
            "then replayed from its own trace. Prints a line per case and the aggregate figures. "
            "A case without model turns is a live case: with --live it runs --trials times on "
            "the live model (ANTHROPIC_API_KEY; the tools are still the fixture's mocks) and the "
            "report gives its rates with 95% confidence intervals; without --live it is skipped. "
            "PATH is a fixture file or a folder of them. See docs/evals.md for the format."
        ),
        epilog=EVAL_EXIT_CODES,
    )
    eval_parser.add_argument("paths", nargs="*", metavar="PATH", help="fixture files or folders")
    eval_parser.add_argument("--check", action="store_true", help="validate the fixtures only; run nothing")
    eval_parser.add_argument("--case", action="append", metavar="ID", help="run only this case (repeatable)")
    eval_parser.add_argument(
        "--concurrency",
        type=int,
        default=8,
        metavar="N",
        help="cases (and live trials) run at once (default: 8)",
    )
    live = eval_parser.add_argument_group("live cases (no model turns)")
    live.add_argument("--live", action="store_true", help="run live cases on the model (ANTHROPIC_API_KEY)")
    live.add_argument(
        "--model",
        metavar="M",
        help=f"the live model (default: each case's model_name; {SIMULATED_MODEL}: the simulated model, "
        "offline, no key)",
    )
    live.add_argument("--trials", type=int, metavar="N", help="trials per live case (default: 5)")
    live.add_argument(
        "--max-cost-usd", type=float, metavar="X", help="no trial starts once the trials cost this much"
    )
    live.add_argument(
        "--seed",
        type=int,
        metavar="S",
        help=f"shuffle the order trials start in, reproducibly (and seed --model {SIMULATED_MODEL})",
    )
    live.add_argument(
        "--min-pass-rate",
        type=float,
        default=1.0,
        metavar="R",
        help="a live case passes when this share of its trials pass (default: 1.0)",
    )
    live.add_argument(
        "--require-live", action="store_true", help="a live case that does not run fails the eval (exit 1)"
    )
    eval_parser.add_argument("--junit", metavar="FILE", help="write JUnit XML here")
    eval_parser.add_argument("--json", metavar="FILE", help="write the report as JSON here")
    eval_parser.add_argument("--html", metavar="FILE", help="write a self-contained HTML report here")
    eval_parser.add_argument(
        "--export", metavar="TASK_ID", help="print the stored run TASK_ID (with --store) as a fixture"
    )
    eval_parser.add_argument(
        "--loop",
        metavar="SPEC",
        help="run every case through your loop (module:factory): its model, prompt, policy, budget and "
        "settings; the fixture's mocks replace the tools they name, its model turns the model",
    )
    add_app_dir(eval_parser)
    add_store(eval_parser)
    eval_parser.set_defaults(command=command("_eval", "eval_command"))
