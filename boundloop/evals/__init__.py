"""Trajectory evals: JSON fixtures, a runner that checks the path a run took, and its report.

See docs/evals.md for the fixture format. In short::

    cases = load_cases("examples/evals")
    results = await run_cases(cases)
    report = EvalReport(results)
"""

from .._lazy import claim as _claim
from ._build import build_loop, load_cases, parse_case
from ._export import export_case
from ._fixture import Case, Decision, Expected, api_name, schema, schema_problems
from ._html import STOP_EDGES, render_html
from ._live import CaseTrials, LiveRun, Rates, run_trials
from ._report import EvalReport, Figures
from ._runner import CaseResult, Status, run_case, run_cases
from ._stats import Rate, Spread, wilson

__all__ = [
    "Case",
    "CaseResult",
    "CaseTrials",
    "Decision",
    "EvalReport",
    "Expected",
    "Figures",
    "LiveRun",
    "Rate",
    "Rates",
    "STOP_EDGES",
    "Spread",
    "Status",
    "api_name",
    "build_loop",
    "export_case",
    "load_cases",
    "parse_case",
    "render_html",
    "run_case",
    "run_cases",
    "run_trials",
    "schema",
    "schema_problems",
    "wilson",
]

_claim(__name__, *(globals()[name] for name in __all__))
