"""`boundloop eval PATH...`: run trajectory eval fixtures; `--check` them; `--export` a stored run."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

import anyio

from .. import AgentLoop, CheckpointStore, LoopState
from ..errors import FixtureError, SetupError
from ..evals import Case, EvalReport, export_case, load_cases, render_html, run_cases, run_trials
from ..prices import resolve_price
from ._defaults import SIMULATED_MODEL
from ._errors import EXIT_NOT_COMPLETED, EXIT_OK, EXIT_USAGE, CommandError
from ._json import dumps
from ._run import load_target, make_loop
from ._store import closing, load_state, open_store


def eval_command(args: argparse.Namespace) -> int:
    """Run, check or export eval cases.

    Args:
        args: the parsed arguments of `boundloop eval`.

    Returns:
        0 when every case passed (or every fixture is valid, with `--check`), 1 when a case
        failed, 2 when a fixture is invalid.

    Raises:
        CommandError: a usage error: no PATH, an unwritable output, a missing store or task; a
            setup error of the live model (a refused key, no such model), at the first trial.
    """
    if args.export is not None:
        return _export(args)
    paths: list[str] = args.paths
    if args.concurrency < 1:
        raise CommandError(f"--concurrency must be at least 1, got {args.concurrency}")
    if not paths:
        raise CommandError("give the fixture files or folders to run (or --export TASK_ID)")
    try:
        cases = _selected(load_cases(*paths), args.case)
    except FixtureError as exc:
        if exc.unreadable:  # as for every input file: a setup error, one line
            raise CommandError(exc.unreadable[0]) from exc
        for problem in exc.problems:
            print(f"invalid: {problem}", file=sys.stderr)
        print(f"{len(exc.problems)} problem(s) in the fixtures", file=sys.stderr)
        return EXIT_USAGE
    if args.check:
        print(f"{len(cases)} case(s) valid")
        return EXIT_OK
    live = _live_options(args)
    target = None if args.loop is None else load_target(args.loop, args.app_dir)
    try:
        report = anyio.run(
            _run, cases, args.concurrency, live, None if args.loop is None else (args.loop, target)
        )
    except SetupError as exc:  # the first trial told it: the others were stopped
        raise CommandError(f"the live model: {exc}") from exc
    print(report.table())
    _write(args.junit, report.junit())
    _write(args.json, dumps(report.to_dict()) + "\n")
    _write(args.html, render_html(report))
    if report.has_errors:
        return EXIT_USAGE
    if args.require_live and report.skipped_live:
        print(f"--require-live: {report.skipped_live} live case(s) did not run", file=sys.stderr)
        return EXIT_NOT_COMPLETED
    return EXIT_OK if report.passed else EXIT_NOT_COMPLETED


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Live:
    model: str | None
    trials: int | None
    """None: run_trials' default."""
    max_cost_usd: float | None
    seed: int | None
    min_pass_rate: float


def _live_options(args: argparse.Namespace) -> _Live | None:
    """The live run's options (None without --live); usage errors named."""
    if not args.live:
        given = [
            option
            for option, value in (
                ("--model", args.model),
                ("--trials", args.trials),
                ("--max-cost-usd", args.max_cost_usd),
                ("--seed", args.seed),
            )
            if value is not None
        ]
        if given:
            raise CommandError(f"{', '.join(given)} only apply to live cases: add --live")
        return None
    has_key = os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("ANTHROPIC_AUTH_TOKEN")
    simulated = args.model == SIMULATED_MODEL
    if (
        args.loop is None and not has_key and not simulated
    ):  # with --loop, the live cases run on the app's client
        raise CommandError("--live runs the live cases on the API: set ANTHROPIC_API_KEY")
    trials: int | None = args.trials
    if trials is not None and trials < 1:
        raise CommandError(f"--trials must be at least 1, got {trials}")
    if args.max_cost_usd is not None:
        if not args.max_cost_usd >= 0:
            raise CommandError(f"--max-cost-usd must be 0 or more, got {args.max_cost_usd}")
        if args.model is not None and not simulated and resolve_price(args.model) is None:
            raise CommandError(f"--max-cost-usd: no price is known for {args.model}, so its cost is unknown")
    if not 0.0 <= args.min_pass_rate <= 1.0:
        raise CommandError(f"--min-pass-rate must be between 0 and 1, got {args.min_pass_rate}")
    return _Live(
        model=args.model,
        trials=trials,
        max_cost_usd=args.max_cost_usd,
        seed=args.seed,
        min_pass_rate=args.min_pass_rate,
    )


def _selected(cases: list[Case], wanted: list[str] | None) -> list[Case]:
    if not wanted:
        return cases
    known = {case.case_id for case in cases}
    unknown = sorted(set(wanted) - known)
    if unknown:
        raise CommandError(f"--case {', '.join(unknown)}: no such case in the fixtures given")
    return [case for case in cases if case.case_id in wanted]


async def _run(
    cases: list[Case], concurrency: int, live: _Live | None, loop: tuple[str, object] | None
) -> EvalReport:
    app = None if loop is None else await make_loop(*loop)
    if live is None:
        return EvalReport(await run_cases(cases, concurrency=concurrency, app=app))
    simulated = live.model == SIMULATED_MODEL
    model = None if simulated else live.model  # the simulated model answers as each case's model
    if live.max_cost_usd is not None:  # before any billed call
        unpriced = _unpriced(cases, model, app)
        if unpriced:
            raise CommandError(
                f"--max-cost-usd: no price is known for {', '.join(unpriced)}, which the live "
                "cases call, so their cost is unknown: give the loop prices= for them (--loop)"
            )
    scripted = await run_cases([case for case in cases if not case.live], concurrency=concurrency, app=app)
    options: dict[str, Any] = {
        "model": model,
        "concurrency": concurrency,
        "max_cost_usd": live.max_cost_usd,
        "seed": live.seed,
        "min_pass_rate": live.min_pass_rate,
        "app": app,
    }
    if live.trials is not None:
        options["trials"] = live.trials
    if simulated:  # offline: the real SDK client, answered by the simulated model
        from ..testing import SimulatedClient

        async with SimulatedClient(seed=live.seed or 0) as client:
            trials = await run_trials(cases, client, **options)
        return EvalReport(scripted, live=dataclasses.replace(trials, model=SIMULATED_MODEL))
    if app is not None:  # the application's own client
        return EvalReport(scripted, live=await run_trials(cases, app.client, **options))
    from anthropic import AsyncAnthropic  # only a live run loads the SDK

    async with AsyncAnthropic() as client:  # ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL
        return EvalReport(scripted, live=await run_trials(cases, client, **options))


def _unpriced(cases: list[Case], model: str | None, app: AgentLoop[Any] | None) -> list[str]:
    """The models the live cases may call that have no price: each case's (`--model`, else the
    fixture's `model_name`; with `--loop`, the application's), and with `--loop` the
    application's fallback and advisor models, priced as the application prices them."""
    from .._core import other_models  # a live run builds loops: loaded by then

    if app is None:
        named = [model or case.model_name for case in cases if case.live]
        return [name for name in dict.fromkeys(named) if resolve_price(name) is None]
    config = app.config
    own = config.spec.model if model is None else model
    prices = dict(config.prices or {})
    if config.price is not None:
        prices.setdefault(config.spec.model, config.price)
    named = [own, *other_models(config.spec.model_copy(update={"model": own}), config.tools)]
    return [name for name in dict.fromkeys(named) if resolve_price(name, prices) is None]


def _write(path: str | None, text: str) -> None:
    if path is None:
        return
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _export(args: argparse.Namespace) -> int:
    store_path: str | None = args.store
    if store_path is None:
        raise CommandError(
            "--export needs --store PATH, the store the run is in (a SQLite file or a postgresql:// URI)"
        )
    if args.paths:
        raise CommandError("--export takes no fixture PATH: it prints one case")
    store = open_store(store_path)
    state = anyio.run(_load, store, store_path, args.export)
    try:
        fixture = export_case(state)
    except ValueError as exc:  # a run that has not stopped has no outcome to expect
        raise CommandError(f"cannot export {args.export}: {exc}") from exc
    print(json.dumps(fixture, indent=2, ensure_ascii=False))
    return EXIT_OK


async def _load(store: CheckpointStore, store_path: str, task_id: str) -> LoopState:
    async with closing(store):  # a PostgresStore's pool
        return await load_state(store, store_path, task_id)
