"""The final answer's check: never blank, and valid against `AgentLoop(output_type=...)`.

It runs on every FINAL route of validate, whatever signal handler chose it. An answer that
fails gets a corrective turn (a user message saying what is wrong, like the evidence nudge),
up to `Budget.max_corrections` in a run (default one); the next failing answer stops the run
with `invalid_output`, the problem in the stop detail and in `state.errors`. The corrective
turn is a model call like any other: budgets apply to it. `LoopResult.output` is derived from
the stored answer (`output_of`), so a resumed or replayed run gives the same output.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._base.output import EMPTY_ANSWER, OutputCheck, answer_problem
from ..policy import Route, SignalContext, Verdict
from ..records import ErrorRecord, StopReason
from ..signals import stop
from .context import RunContext

if TYPE_CHECKING:
    from anthropic.types import Message


def checked_final(ctx: RunContext, route: Route, response: Message, context: SignalContext) -> Route:
    """A FINAL route whose answer passes; else a corrective turn, or the `invalid_output` stop.

    Any other route is returned as it is.
    """
    if route.verdict is not Verdict.FINAL:
        return route
    state = ctx.state
    text = context.answer(response)
    _, problem = answer_problem(ctx.config.output, text)
    if problem is None:
        return route
    state.errors.append(ErrorRecord(kind="invalid_output", step=state.step, message=ctx.redact(problem)))
    if state.corrections < ctx.config.spec.budget.max_corrections:
        state.corrections += 1
        return Route(verdict=Verdict.RESUME, nudge=_nudge(problem, ctx.config.output is not None))
    state.answer = text or None  # kept for the reader: the answer that was not accepted
    if problem.startswith(EMPTY_ANSWER):
        return stop(StopReason.INVALID_OUTPUT, problem)
    return stop(StopReason.INVALID_OUTPUT, f"the answer does not match the output type: {problem}")


def _nudge(problem: str, typed: bool) -> str:
    if problem.startswith(EMPTY_ANSWER):
        return "Your answer is empty. Reply with your final answer" + (
            ": only the JSON value the output format asks for." if typed else "."
        )
    return (
        f"Your answer is not accepted: it does not match the required output format ({problem}). "
        "Reply again with only the corrected JSON value."
    )


def output_of(check: OutputCheck | None, answer: str | None) -> Any:
    """`LoopResult.output` of an answer: validated against the output type (the answer's text
    without one); None for a blank answer, or one that does not validate."""
    if answer is None:
        return None
    value, problem = answer_problem(check, answer)
    return value if problem is None else None
