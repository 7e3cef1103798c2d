"""Run eval cases: each on its own loop, scripted model and mocked tools; check the trajectory."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Sequence
from typing import Any, Final, Literal, cast, final

import anyio

from .._base.recorded import redact_strings
from .._core import Cut, resume_stored, start_new
from .._replay import ReplayReport, replay
from ..errors import ApprovalMissing, NotResumable, ScriptExhausted, SetupError, UnhandledStop
from ..events import Event, Validation
from ..loop import AgentLoop
from ..model import Model
from ..records import StopReason
from ..state import LoopResult
from ._build import build_loop
from ._fixture import Case
from ._mocks import Mocks
from ._text import redact

Status = Literal["passed", "failed", "error", "skipped"]
"""`error`: the fixture is at fault (a script or mocked results too short, a bad decision);
`skipped`: a live case (no model turns) run without a live model."""

NEEDS_LIVE: Final = "needs a live model (--live)"
"""Why a live case run without a live model was skipped."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class CaseResult:
    """What one case did, and which expectations it failed."""

    case: Case
    status: Status
    failures: tuple[str, ...]
    """Failed expectations (status `failed`) or fixture problems (status `error`), in order."""
    stop_reason: StopReason | None
    answer: str | None
    steps: int
    tool_calls: int
    """Tool invocations, retries included."""
    tokens: int
    """Input and output tokens of every model call."""
    cost_usd: float
    duration_s: float
    proposed: int
    """Tool calls the model proposed (every answered `tool_use`)."""
    refused: int
    """Proposed calls the loop refused: `invalid`, or `denied` by the loop (not a human)."""
    repeated: int
    replay_identical: bool | None
    """The run, replayed from its own trace, took the same path (None: not replayed)."""
    replay_detail: str
    tools_run: tuple[str, ...]
    """The tools that ran, in order, as the fixture names them."""
    trace: tuple[Event, ...]
    raised: str | None = None
    """The exception the run raised (`UnhandledStop: ...`), if it did not stop by itself."""

    @property
    def passed(self) -> bool:
        """Every expectation held."""
        return self.status == "passed"

    @property
    def first_failure(self) -> str:
        """The first failed expectation or problem ("" for a passed case)."""
        return self.failures[0] if self.failures else ""

    def check(self) -> None:
        """Raise unless the case passed (for a test suite).

        Raises:
            AssertionError: the case failed or its fixture is invalid; every failure listed.
        """
        if not self.passed:
            lines = "\n".join(f"  - {failure}" for failure in self.failures)
            raise AssertionError(redact(f"eval case {self.case.case_id} {self.status}:\n{lines}"))

    def to_dict(self) -> dict[str, Any]:
        """The result as a JSON object (without the trace), every string redacted."""
        plain: dict[str, Any] = {
            "case_id": self.case.case_id,
            "source": None if self.case.source is None else str(self.case.source),
            "status": self.status,
            "failures": list(self.failures),
            "expected_stop_reason": str(self.case.expected.stop_reason),
            "stop_reason": None if self.stop_reason is None else str(self.stop_reason),
            "answer": self.answer,
            "steps": self.steps,
            "tool_calls": self.tool_calls,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "duration_s": self.duration_s,
            "proposed": self.proposed,
            "refused": self.refused,
            "repeated": self.repeated,
            "replay_identical": self.replay_identical,
            "tools_run": list(self.tools_run),
        }
        return cast(dict[str, Any], redact_strings(plain, redact))


@final
@dataclasses.dataclass(slots=True)
class _Run:
    """What running a case produced, before the expectations are checked."""

    result: LoopResult | None = None
    events: list[Event] = dataclasses.field(default_factory=list[Event])
    problems: list[str] = dataclasses.field(default_factory=list[str])
    """Fixture errors."""
    raised: str | None = None
    """An exception the run ended with."""
    replayed: ReplayReport | None = None
    task_id: str = ""
    beyond_mocks: list[str] = dataclasses.field(default_factory=list[str])
    """Calls past a tool's mocked results on a live model (failures, not fixture errors)."""


async def run_case(
    case: Case,
    *,
    client: Model | None = None,
    model: str | None = None,
    task_id: str | None = None,
    app: AgentLoop[Any] | None = None,
) -> CaseResult:
    """Run one case on a fresh loop and check its expectations.

    A script case runs its `goal` through the scripted model and mocked tools, then the
    `resume` decisions; a `state` case replays the saved run through the case's tools,
    policy and budget; a live case (no model turns) runs its goal on `client`, the mocked
    tools answering. Either way the run is then replayed from its own trace.

    Args:
        case: the case.
        client: the live model a live case runs on (an `AsyncAnthropic`); without it a live
            case is `skipped`. A script or `state` case never uses it.
        model: the live model's name (default: the case's `model_name`).
        task_id: the run's task id (default: the case id).
        app: run the case through the application's loop (`build_loop(app=...)`); a live
            case still needs `client` (`app.client` for the application's own model).

    Returns:
        The case's result: passed, failed (the failed expectations), error (the fixture's
        faults: a script or mocked results too short, a decision the run cannot take) or
        skipped (a live case without a live model). On a live model a call beyond a tool's
        mocked results is the agent's doing: a failure, not an error.

    Raises:
        SetupError: the live model's setup is wrong (no API key, a refused key, no such
            model): no case can pass until it is fixed, so it is not one case's failure.
    """
    live = case.live and client is not None
    if case.live and not live:
        return _skipped(case)
    started = time.perf_counter()
    cut = None if case.cut is None or case.live or case.state is not None else Cut(reason=case.cut)
    mocks = Mocks(case.mocked, case.names, cut)
    loop = build_loop(case, mocks, client=client if live else None, model=model if live else None, app=app)
    run = _Run(task_id=case.case_id if task_id is None else task_id)
    try:
        if case.state is not None:
            run.replayed = await replay(case.state, loop)
            run.result = run.replayed.result
            run.events = [] if run.result is None else list(run.result.events)
        else:
            await _script(case, loop, mocks, run)
    except ScriptExhausted:
        run.problems.append(
            f"model: the run asked for turn {len(case.turns) + 1}; the script has {len(case.turns)}"
        )
    except UnhandledStop as exc:
        run.result = exc.result
        run.events += [] if exc.result is None else exc.result.events
        run.raised = f"UnhandledStop: {exc}"
    except SetupError:  # no key, a refused key, no such model: no case can pass until it is fixed
        raise
    except Exception as exc:  # the report says what broke; other cases go on
        run.raised = f"{type(exc).__name__}: {exc}"
    duration = time.perf_counter() - started
    run.problems += mocks.problems
    if case.state is None and run.result is not None and run.raised is None and not run.problems:
        run.replayed = await replay(run.events, build_loop(case, model=model if live else None, app=app))
    if live:  # the model went past the mocks: the agent's doing, judged as a failure
        run.beyond_mocks, run.problems = run.problems, []
    return _judge(case, run, duration)


def _skipped(case: Case) -> CaseResult:
    return CaseResult(
        case=case,
        status="skipped",
        failures=(NEEDS_LIVE,),
        stop_reason=None,
        answer=None,
        steps=0,
        tool_calls=0,
        tokens=0,
        cost_usd=0.0,
        duration_s=0.0,
        proposed=0,
        refused=0,
        repeated=0,
        replay_identical=None,
        replay_detail="",
        tools_run=(),
        trace=(),
    )


async def _script(case: Case, loop: AgentLoop, mocks: Mocks, run: _Run) -> None:
    cut = mocks.cut
    # A cut case runs as the loop's `run` and `resume` do, its cut in the configuration: the
    # call where the fixture ends sets the cancel event, and the run stops as the cut says.
    config = None if cut is None else dataclasses.replace(loop.config, cut=cut)
    cancel = None if cut is None else cut.event
    if config is None:
        run.result = await loop.run(case.goal, task_id=run.task_id, on_event=mocks.on_event)
    else:
        run.result = await start_new(
            config, case.goal, task_id=run.task_id, cancel=cancel, on_event=mocks.on_event
        )
    run.events += run.result.events
    for index, decision in enumerate(case.resume):
        if run.result.stop_reason is not StopReason.NEEDS_HUMAN:
            run.problems.append(
                f"resume/{index}: the run stopped {run.result.stop_reason}, not needs_human: "
                "there is nothing to decide"
            )
            return
        try:
            approvals = dict(decision.approvals) if decision.approvals else None
            if config is None:
                run.result = await loop.resume(
                    run.task_id, approvals=approvals, reply=decision.reply, on_event=mocks.on_event
                )
            else:
                run.result = await resume_stored(
                    config,
                    run.task_id,
                    approvals=approvals,
                    reply=decision.reply,
                    cancel=cancel,
                    on_event=mocks.on_event,
                )
        except (ApprovalMissing, NotResumable) as exc:
            run.problems.append(f"resume/{index}: {exc}")
            return
        run.events += run.result.events


def _judge(case: Case, run: _Run, duration: float) -> CaseResult:
    result = run.result
    state = None if result is None else result.state
    observations = [] if state is None else state.observations
    tools_run = tuple(case.shown(o.tool) for o in observations if o.attempts > 0)
    replay_identical = None if run.replayed is None else run.replayed.identical
    status: Status = "error" if run.problems else "passed"
    failures = list(run.problems)
    if not run.problems:
        failures = _failures(case, run, tools_run)
        status = "failed" if failures else "passed"
    return CaseResult(
        case=case,
        status=status,
        failures=tuple(failures),
        stop_reason=None if result is None else result.stop_reason,
        answer=None if result is None else result.answer,
        steps=0 if state is None else state.step,
        tool_calls=0 if state is None else state.tool_calls,
        tokens=0 if state is None else state.usage.input_tokens + state.usage.output_tokens,
        cost_usd=0.0 if state is None else state.usage.cost_usd or 0.0,
        duration_s=duration,
        proposed=len(observations),
        refused=_refused(run.events),
        repeated=sum(1 for o in observations if o.outcome == "repeated"),
        replay_identical=replay_identical,
        replay_detail="" if run.replayed is None else _divergence(run.replayed),
        tools_run=tools_run,
        trace=tuple(run.events),
        raised=run.raised,
    )


def _refused(events: Iterable[Event]) -> int:
    """Calls validation refused (`deny` or `block`): unknown, invalid, not allowed, forbidden."""
    return sum(
        1
        for event in events
        if isinstance(event, Validation)
        for call in event.calls
        if call.decision in ("deny", "block")
    )


def _failures(case: Case, run: _Run, tools_run: Sequence[str]) -> list[str]:
    expected = case.expected
    failures: list[str] = list(run.beyond_mocks)
    if run.raised is not None:
        failures.append(f"the run raised {run.raised}")
    result = run.result
    if result is None:
        return failures or ["the run produced no result"]
    state = result.state
    if result.stop_reason is not expected.stop_reason:
        detail = f" ({_as_written(case, state.stop_detail)})" if state.stop_detail else ""
        failures.append(f"stop_reason: expected {expected.stop_reason}, got {result.stop_reason}{detail}")
    if expected.max_tool_calls is not None and state.tool_calls > expected.max_tool_calls:
        failures.append(f"max_tool_calls: {state.tool_calls} tool calls, at most {expected.max_tool_calls}")
    if expected.max_steps is not None and state.step > expected.max_steps:
        failures.append(f"max_steps: {state.step} steps, at most {expected.max_steps}")
    return failures + _trajectory_failures(case, run, result, tools_run)


def _trajectory_failures(case: Case, run: _Run, result: LoopResult, tools_run: Sequence[str]) -> list[str]:
    """The expectations on what ran, the trace, the answer and the replay."""
    expected = case.expected
    failures: list[str] = []
    ran = {case.shown(name) for name in expected.forbidden_tools} & set(tools_run)
    if ran:
        failures.append(f"forbidden_tools: {', '.join(sorted(ran))} ran")
    kinds = {event.kind for event in run.events}
    missing = [kind for kind in expected.requires_trace_events if kind not in kinds]
    if missing:
        failures.append(f"requires_trace_events: the trace has no {', '.join(missing)} event")
    if expected.tool_sequence is not None:
        wanted = [case.shown(name) for name in expected.tool_sequence]
        if list(tools_run) != wanted:
            failures.append(f"tool_sequence: expected {_names(wanted)}, got {_names(tools_run)}")
    for text in expected.answer_contains:
        if result.answer is None or text not in result.answer:
            failures.append(f"answer_contains: the answer does not contain {text!r}")
    if expected.replay and run.replayed is not None and not run.replayed.identical:
        failures.append(f"replay: {_divergence(run.replayed)}")
    return failures


def _as_written(case: Case, text: str) -> str:
    """A message of the loop's with the fixture's tool names in place of the API's."""
    for api, shown in case.names.items():
        text = text.replace(api, shown)
    return text


def _names(names: Iterable[str]) -> str:
    return "[" + ", ".join(names) + "]"


def _divergence(report: ReplayReport) -> str:
    divergence = report.divergence
    if divergence is None:
        return "identical"
    return (
        f"diverged at step {divergence.index}: recorded {divergence.expected or '(end)'!r}, "
        f"replayed {divergence.got or '(end)'!r}"
    )


async def run_cases(
    cases: Iterable[Case], *, concurrency: int = 8, app: AgentLoop[Any] | None = None
) -> list[CaseResult]:
    """Run cases side by side, at most `concurrency` at once; results in the cases' order
    (through the application's loop `app` when given: `run_case`).

    Raises:
        ValueError: `concurrency` is below 1.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    todo = list(cases)
    results: list[CaseResult | None] = [None] * len(todo)
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(index: int, case: Case) -> None:
        async with limiter:
            results[index] = await run_case(case, app=app)

    async with anyio.create_task_group() as group:
        for index, case in enumerate(todo):
            group.start_soon(one, index, case)
    return [result for result in results if result is not None]
