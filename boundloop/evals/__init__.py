"""Trajectory evals: JSON fixtures, a runner that checks the path a run took, and its report.

See docs/evals.md for the fixture format. In short::

    cases = load_cases("examples/evals")
    results = await run_cases(cases)
    report = EvalReport(results)
"""

import typing

from .._lazy import moved_getattr
from ._build import build_loop, load_cases, parse_case
from ._export import export_case
from ._fixture import Case, Decision, Expected, api_name, schema, schema_problems
from ._html import STOP_EDGES, render_html
from ._report import EvalReport, Figures
from ._runner import CaseResult, Status, run_case, run_cases

__all__ = [
    "Case",
    "CaseResult",
    "Decision",
    "EvalReport",
    "Expected",
    "Figures",
    "STOP_EDGES",
    "Status",
    "api_name",
    "build_loop",
    "export_case",
    "load_cases",
    "parse_case",
    "render_html",
    "run_case",
    "run_cases",
    "schema",
    "schema_problems",
]

if not typing.TYPE_CHECKING:  # type checkers see no deprecated name
    # `FixtureError` was re-exported here until it got one home (docs/api.md): kept one release.
    __getattr__ = moved_getattr(__name__, {"FixtureError": ("boundloop.errors", "boundloop")})
