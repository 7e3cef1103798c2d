"""The `boundloop` parser's `runs`, `serve` (docs/inspector.md) and `eval` (docs/evals.md) commands."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ._errors import EVAL_EXIT_CODES
from ._parser_base import add_app_dir, add_store, command, wrap


def add_inspector_commands(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
    """Add `runs` and `serve` (docs/inspector.md)."""
    runs_parser = add_parser(
        "runs",
        help="list every run in a store, newest first",
        description=wrap(
            "List the runs in a store (a SQLite file or a PostgreSQL database), newest save first: "
            "task id, status (running, waiting, stopped), stop reason, steps, cost, save time, goal."
        ),
    )
    add_store(runs_parser, required=True)
    runs_parser.add_argument("--status", choices=("running", "waiting", "stopped"), help="only these runs")
    runs_parser.add_argument("--stop-reason", metavar="REASON", help="only runs stopped for this reason")
    runs_parser.add_argument("--limit", type=int, default=50, metavar="N", help="runs listed (default: 50)")
    runs_parser.add_argument("--cursor", metavar="CURSOR", help="list the runs after this one (from `more:`)")
    runs_parser.add_argument("--json", action="store_true", help="print JSON instead")
    runs_parser.set_defaults(command=command("_serve", "runs_command"))

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


def add_eval_command(add_parser: Callable[..., argparse.ArgumentParser]) -> None:
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
    live.add_argument("--model", metavar="M", help="the live model (default: each case's model_name)")
    live.add_argument("--trials", type=int, metavar="N", help="trials per live case (default: 5)")
    live.add_argument(
        "--max-cost-usd", type=float, metavar="X", help="no trial starts once the trials cost this much"
    )
    live.add_argument("--seed", type=int, metavar="S", help="shuffle the order trials start in, reproducibly")
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
