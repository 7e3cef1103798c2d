"""The driver: it awaits each state's work under anyio and fires its trigger, for one run.

A run is one `RunContext` (its configuration, `LoopState`, events and clock); the functions here
drive it. The work of each state lives in the modules of `boundloop._core` (`WORK`) and records
facts in the run's `LoopState`; the trigger it returns is fired through the loop's
`transitions.Machine` (`statemachine/machine.py`), whose guards read them. The run is the
machine's model from its start to its end; the machine never awaits, so anyio cancellation and
timeouts propagate untouched.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any, Final

import anyio

from ..errors import ScriptExhausted, SetupError, UnhandledStop
from ..events import LimitHit, Resumed, RunStarted, Stop, Transition
from ..otel import Tracing, global_tracing, run_tracing
from ..records import Exceeded, StopReason
from ..state import LoopResult, LoopState, at_ceiling
from ..statemachine.table import Phase, Trigger
from .answers import answer_open_calls, finish
from .checkpointing import SAVING, CheckpointWriter
from .context import ModelSpan, RunContext, ToolSpan
from .dispatch import act
from .eventlog import EventLogWriter, event_log_of
from .observe import observe
from .output import output_of
from .propose import assemble, propose
from .tree import enter, joins_tree, leave, tree_total
from .validation import validate

if TYPE_CHECKING:
    from .config import EventHook, LoopConfig
    from .context import Watch

WORK: Final[Mapping[Phase, Callable[[RunContext], Awaitable[Trigger]]]] = {
    Phase.ASSEMBLE: assemble,
    Phase.PROPOSE: propose,
    Phase.VALIDATE: validate,
    Phase.ACT: act,
    Phase.OBSERVE: observe,
}
"""The work of each state; `stopped` has none."""
_VALUES: Final[Mapping[Phase | Trigger, str]] = {member: member.value for member in (*Phase, *Trigger)}
"""Each state's and trigger's own value, read once: a member's `.value` is a property call."""


def execute(
    config: LoopConfig,
    state: LoopState,
    *,
    cancel: anyio.Event | None = None,
    on_event: EventHook | None = None,
    resumed: Mapping[str, object] | None = None,
    adopt_trace_id: bool = False,
    failure: Exception | None = None,
    watch: Watch | None = None,
    deps: object = None,
) -> Coroutine[Any, Any, LoopResult[Any]]:
    """Drive a run from the phase its state is in to `stopped`, and return its result (awaited).

    A new run starts in `assemble`; a state read back from a checkpoint continues where
    it was saved, except that a state saved in `act` continues in `validate`: the calls it
    holds run only once this loop's registry, policy and budget allowed them again. With a
    store, the state is saved before anything runs (a new run exists from its start; a
    resume's intents are durable).

    A traced run (the loop's tracer provider, or the global one when set; never a replay)
    runs under its `invoke_agent` span (a delegated child on the default tracing is traced where
    its parent is, its span under the parent's `execute_tool` span); with `adopt_trace_id` (the
    run made its trace id itself) the state takes the span's trace id. An untraced run costs one look-up here.
    A `failure` (the store failed before the run could start) ends it `failed` at once, recorded.
    A `watch` streams the run (`_core/streaming.py`). `deps` go to the tool functions'
    `ToolContext`, and nowhere else.

    Raises:
        UnhandledStop: the API sent a stop_reason with no handler (`.result` is set).
        Exception: a tool's exception with `on_tool_error="raise"`; your callbacks' errors.
        anyio's cancellation exception: the caller cancelled the task (re-raised).
    """
    tracing = config.tracing
    if tracing is None and config.traces_global:  # a delegated child: where its parent is traced
        tracing = (run_tracing() if joins_tree() else None) or global_tracing()
    if tracing is None or config.recorded is not None:
        # The run's own coroutine, awaited by the caller: no frame of this function stays
        # alive under it for the whole run (1,000 concurrent runs hold 1,000 of them).
        return _execute(
            config, state, cancel, on_event, resumed, None, failure=failure, watch=watch, deps=deps
        )
    return _traced(config, state, tracing, cancel, on_event, resumed, adopt_trace_id, failure, watch, deps)


async def _traced(
    config: LoopConfig,
    state: LoopState,
    tracing: Tracing,
    cancel: anyio.Event | None,
    on_event: EventHook | None,
    resumed: Mapping[str, object] | None,
    adopt_trace_id: bool,
    failure: Exception | None,
    watch: Watch | None,
    deps: object,
) -> LoopResult[Any]:
    """`execute` of a traced run: under its `invoke_agent` span."""
    from ..otel import start_run

    spans = start_run(config, state, tracing, adopt_trace_id=adopt_trace_id)
    if spans is None:
        return await _execute(
            config, state, cancel, on_event, resumed, None, failure=failure, watch=watch, deps=deps
        )
    try:
        with spans.current():
            result = await _execute(
                config,
                state,
                cancel,
                on_event,
                resumed,
                spans.observe,
                spans.tools.current,
                failure,
                spans.chat.current,
                watch,
                deps,
            )
    except BaseException as exc:
        spans.end(exc)
        raise
    spans.end(None)
    return result


async def _execute(
    config: LoopConfig,
    state: LoopState,
    cancel: anyio.Event | None,
    on_event: EventHook | None,
    resumed: Mapping[str, object] | None,
    observer: EventHook | None,
    tool_span: ToolSpan | None = None,
    failure: Exception | None = None,
    model_span: ModelSpan | None = None,
    watch: Watch | None = None,
    deps: object = None,
) -> LoopResult[Any]:
    if state.phase is Phase.ACT:  # a checkpoint's calls are decided again before any runs
        state.phase = Phase.VALIDATE
    machine = config.machine
    model = machine.start(state)  # the run is the machine's model, in its phase, until it ends
    try:
        ctx = RunContext(
            config,
            state,
            model,
            on_event=on_event,
            observer=observer,
            tool_span=tool_span,
            model_span=model_span,
            watch=watch,
            deps=deps,
        )
        if config.price is None:  # not tracked from the start, also when no model call succeeds
            state.usage.cost_usd = state.usage.cache_savings_usd = None
        current = enter(ctx)  # the run's tool calls see it: a delegation's child joins its tree
        pools = ctx.config.pools
        if pools:  # a resume must be given them again (`sessions.check_pools`)
            state.pools = sorted({*state.pools, *(pool.name for pool in pools)})
        try:
            await _run(ctx, cancel, failure, resumed)
        finally:
            leave(current)
    finally:  # stopped, failed, cancelled or raising: a long-lived loop keeps no ended run
        machine.end(model)
    return loop_result(ctx)


def _leaves_run(exc: BaseException, ctx: RunContext) -> bool:
    """The exceptions `run()` lets out: `UnhandledStop`, `SetupError` (no API key, no such
    model), a tool's with `on_tool_error="raise"`, `ScriptExhausted` (a test script ran out),
    and every `BaseException` that is not an `Exception` (cancellation, `KeyboardInterrupt`,
    `SystemExit`)."""
    return (
        not isinstance(exc, Exception)
        or isinstance(exc, UnhandledStop | ScriptExhausted | SetupError)
        or exc is ctx.scratch.tool_raised
    )


async def _run(
    ctx: RunContext,
    cancel: anyio.Event | None,
    failure: Exception | None = None,
    resumed: Mapping[str, object] | None = None,
) -> None:
    timeout = ctx.config.spec.budget.timeout_s
    store = ctx.config.store
    log = event_log_of(store)
    writer = None if log is None else EventLogWriter(ctx, log)
    checkpoints = None if store is None else CheckpointWriter(ctx, store, writer)
    saving = SAVING.set(checkpoints)  # its delegations save it as they start a child
    if timeout is not None and ctx.config.cut is None:  # a re-enacted cut owns the stop, not the clock
        deadline = anyio.current_time() + max(0.0, timeout - ctx.elapsed_s)
        ctx.deadline = deadline if ctx.deadline is None else min(deadline, ctx.deadline)  # a tree's
    try:  # the first event is inside: a failing on_event hook fails the run, recorded
        await _first_event(ctx, checkpoints, resumed)
        if failure is not None:
            raise failure
        if ctx.deadline is None and cancel is None:  # nothing can stop it early: no scope to build
            await _save_start(checkpoints)
            await drive(ctx, checkpoints)
            return
        with anyio.CancelScope(deadline=ctx.deadline or float("inf")) as scope:
            await _save_start(checkpoints)
            if cancel is None:
                await drive(ctx, checkpoints)
            else:
                await _drive_cancellable(ctx, checkpoints, cancel, scope)
        if scope.cancelled_caught and ctx.state.phase is not Phase.STOPPED:
            cut = ctx.config.cut  # a replay re-enacts the recorded cut: a cancel or the deadline
            if ctx.cancel_requested and (cut is None or cut.reason is StopReason.CANCELLED):
                abort(ctx, StopReason.CANCELLED, "the cancel event was set")
            else:
                abort(ctx, StopReason.TIMEOUT, f"the run exceeded timeout_s={timeout}")
    except anyio.get_cancelled_exc_class():
        # Cancellation from outside: answer every call, record it, and re-raise it.
        _cut_from_outside(ctx)
        raise
    except BaseException as exc:
        ctx.error("exception", exc)
        abort(ctx, StopReason.FAILED, f"{type(exc).__name__}: {exc}")
        if isinstance(exc, UnhandledStop | SetupError):
            exc.result = loop_result(ctx)
        if _leaves_run(exc, ctx):
            raise
        # Anything else — your callbacks, the store, a bug — ends the run as failed, recorded.
    finally:
        _record_stop(ctx)
        if checkpoints is not None:
            await checkpoints.last()
        SAVING.reset(saving)


def _cut_from_outside(ctx: RunContext) -> None:
    """The task running the run was cancelled: `cancelled`; a delegated run cut by its tree's
    deadline (its parent's scope, with the same deadline, cut first) timed out."""
    if ctx.tree is not None and ctx.deadline is not None and anyio.current_time() >= ctx.deadline:
        abort(ctx, StopReason.TIMEOUT, "the tree it runs in exceeded its timeout_s")
    else:
        abort(ctx, StopReason.CANCELLED, "the task running the loop was cancelled")


async def _first_event(
    ctx: RunContext, checkpoints: CheckpointWriter | None, resumed: Mapping[str, object] | None
) -> None:
    fresh = ctx.state.next_seq == 0
    if checkpoints is not None:
        await checkpoints.catch_up()  # the event log may be ahead of the checkpoint (a killed worker)
    if resumed is not None:
        ctx.event(Resumed, **resumed)
    elif fresh:
        spec = ctx.config.spec
        ctx.event(
            RunStarted,
            trace_id=ctx.state.trace_id,
            model=spec.model,
            version=spec.version,
            parent_task_id=ctx.state.parent_task_id,
            platform=ctx.config.platform,
        )


async def _save_start(checkpoints: CheckpointWriter | None) -> None:
    if checkpoints is not None:  # the run exists from its start (or a resume's intents)
        await checkpoints.start()


async def _drive_cancellable(
    ctx: RunContext, checkpoints: CheckpointWriter | None, cancel: anyio.Event, scope: anyio.CancelScope
) -> None:
    async def watch() -> None:
        await cancel.wait()
        ctx.cancel_requested = True
        scope.cancel()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(watch)
            await drive(ctx, checkpoints)
            group.cancel_scope.cancel()
    except BaseExceptionGroup as group_error:
        # One failure in the host task: surface it as itself, not as a group.
        if len(group_error.exceptions) == 1:
            raise group_error.exceptions[0] from None
        raise


async def drive(ctx: RunContext, checkpoints: CheckpointWriter | None) -> None:
    """Await each state's work and fire its trigger until the run is stopped; the checkpoint
    writer, when the run has a store, sees each transition and saves where it must."""
    state = ctx.state
    while state.phase is not Phase.STOPPED:
        transition = fire(ctx, await WORK[state.phase](ctx))
        if checkpoints is not None:  # a run with a store records each `Transition` as such
            assert transition is not None
            await checkpoints.observe(transition)


def fire(ctx: RunContext, trigger: Trigger) -> Transition | None:
    """Fire a trigger through the loop's machine, which moves the run; record the transition it
    took (its observers measure it): as a `Transition`, or as its numbers when nothing but the
    metrics hears it as it happens (None returned: `_core/trail.py`)."""
    state = ctx.state
    source = state.phase
    guard = ctx.config.machine.fire(ctx.model, trigger)
    dest = state.phase
    now = time.perf_counter()
    duration = now - ctx.entered
    ctx.entered = now
    # Plain strings in the event, as they read back from JSON: each member's own value
    # (`str(member)` would copy it: three strings kept with every transition of the trace).
    edge = (_VALUES[source], _VALUES[dest], _VALUES[trigger], guard)
    events = ctx.events
    if events.numbers:
        events.moved(ctx.next_seq(), state.step, edge, ctx.epoch + now, duration)
        return None
    # One clock read per transition: `at` is derived from it.
    transition = Transition.of(
        seq=ctx.next_seq(),
        task_id=state.task_id,
        at=ctx.epoch + now,
        step=state.step,
        source=edge[0],
        dest=edge[1],
        trigger=edge[2],
        guard=guard,
        duration_s=duration,
    )
    ctx.emit(transition)
    return transition


def abort(ctx: RunContext, reason: StopReason, detail: str) -> None:
    """Leave any state for `stopped` (timeout, cancellation, failure)."""
    if ctx.state.phase is Phase.STOPPED:
        return
    state = ctx.state
    if state.stop_reason is not None:
        # The stop was decided first; only its final-answer call was interrupted.
        state.stop_detail = f"{state.stop_detail}; the final-answer call was interrupted: {detail}"
        state.final_call_due = False
        answer_open_calls(ctx, "cancelled", f"not run: {reason}")
    else:
        if reason is StopReason.TIMEOUT:
            state.exceeded = Exceeded(
                limit="timeout_s", value=ctx.config.spec.budget.timeout_s or 0.0, used=ctx.elapsed_s
            )
        finish(ctx, reason, detail)
    fire(ctx, Trigger.HALT)


RESUMABLE_NOTE: Final = "; resumable once the ceiling is raised"
"""The end of the stop detail of a run stopped at a ceiling it can go on from (`at_ceiling`)."""


def _record_stop(ctx: RunContext) -> None:
    state = ctx.state
    reason = state.stop_reason or StopReason.FAILED
    state.stop_reason = reason
    duration = ctx.elapsed_s
    exceeded = state.exceeded
    usage = state.usage
    if at_ceiling(state) and not (state.stop_detail or "").endswith(RESUMABLE_NOTE):
        state.stop_detail = f"{state.stop_detail}{RESUMABLE_NOTE}"  # the stop says it can go on
    ctx.event(
        Stop,
        stop_reason=str(reason),
        detail=state.stop_detail,
        limit=None
        if exceeded is None
        else LimitHit(
            limit=str(exceeded.limit), value=exceeded.value, used=exceeded.used, pool=exceeded.pool
        ),
        steps=state.step,
        tool_calls=state.tool_calls,
        duration_s=duration,
        trace_id=state.trace_id,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_input_tokens=usage.cache_read_input_tokens,
        cache_creation_input_tokens=usage.cache_creation_input_tokens,
        cost_usd=usage.cost_usd,
        opening=ctx.deferred(state.messages[: state.opening]),
        provenance=state.provenance,
        metadata=state.metadata or None,
    )


def loop_result(ctx: RunContext) -> LoopResult[Any]:
    """The run's result (partial until stopped)."""
    state = ctx.state
    return LoopResult(
        stop_reason=state.stop_reason or StopReason.FAILED,
        answer=state.answer,
        state=state,
        events=ctx.events,
        output=output_of(ctx.config.output, state.answer),
        tree_usage=None if not state.below else tree_total(state),
    )
