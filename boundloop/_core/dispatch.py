"""Act: every call validation let through runs in one anyio task group (at most
`Budget.max_parallel_tools` of them at once, when set: the others wait for a place).

Each task writes its `CallResult` into the turn's answer at its block's index — into the
run's state, so a result that arrived before a timeout, a cancellation or a crash is kept
— and results come back in block order without sorting. A task turns its tool function's
failure into data (an `is_error` result); the group only raises for bugs, cancellation and
`on_tool_error="raise"`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from typing import NamedTuple

import anyio
import anyio.lowlevel
import sniffio

from ..events import ToolStarted
from ..records import CallResult, StopReason, ToolCall, Turn, empty_list
from ..statemachine.table import Trigger
from ..tools import RetryableToolError, Tool, ToolContext, idempotency_key
from .answers import answer_open_calls, finish
from .budget import take_tool_call
from .context import YIELD_EVERY, Planned, RunContext
from .results import refused, to_result, truncate
from .tree import Delegated, hold_for_children, joined
from .validation import fill_copies


@dataclasses.dataclass(slots=True)
class _Batch:
    """What the calls of one batch share: the turn, the calls invoked so far, a failure to raise."""

    turn: Turn
    invoked: set[int]
    """`turn.invoked` as a set: one look-up per call, not a scan of a list as long as the batch."""
    limiter: anyio.CapacityLimiter | None
    """`Budget.max_parallel_tools` places, for a batch larger than that; None: no wait."""
    failure: list[Exception] = dataclasses.field(default_factory=empty_list)


class _Retry(NamedTuple):
    delay_s: float
    error: str


async def act(ctx: RunContext) -> Trigger:
    """Run the turn's allowed calls concurrently, then answer all calls in ONE user message.

    Raises:
        Exception: the first tool function's failure, with `on_tool_error="raise"`; the sibling calls
            are cancelled first.
    """
    turn = ctx.state.turn
    assert turn is not None  # validate let tool calls through, so there is a turn
    # Validation planned the batch in this session: a run continued in `act` is validated again.
    plan, records = ctx.scratch.plan, ctx.scratch.plan_records
    assert plan is not None
    state = ctx.state
    events = ctx.events
    if events.numbers and events:  # nothing hears it as it happens (the metrics count nothing of it)
        events.started(ctx.next_seq(), state.step, ctx.epoch + time.perf_counter(), records)
    else:
        ctx.emit(  # built by its factory (one a turn), not `ctx.event`'s keywords
            ToolStarted.of(
                seq=ctx.next_seq(),
                task_id=state.task_id,
                at=ctx.epoch + time.perf_counter(),
                step=state.step,
                calls=records,
            )
        )
    ctx.state.earlier_text = ""
    await dispatch(ctx, turn, plan)
    fill_copies(turn)
    if ctx.tree is not None and ctx.tree.waiting:  # delegated runs wait for a human: so does this one
        hold_for_children(ctx, turn)
        return Trigger.ACTED
    failed = (  # read only to stop the run at a failure
        [answer for answer in turn.answers if answer is not None and answer.attempts and answer.is_error]
        if ctx.config.spec.policy.on_tool_error == "stop"
        else []
    )
    answer_open_calls(ctx, "cancelled", "not run")
    if failed:
        first = failed[0]
        finish(ctx, StopReason.TOOL_FAILURE, f"{first.call.name} failed: {first.content}")
    return Trigger.ACTED


async def dispatch(ctx: RunContext, turn: Turn, plan: list[Planned]) -> None:
    """Run the planned calls concurrently, writing each answer into `turn.answers`.

    Raises:
        Exception: the first tool function's failure, with `on_tool_error="raise"`.
        BaseException: a tool function's `KeyboardInterrupt` / `SystemExit`, as itself.
    """
    if not plan:
        return
    limit = ctx.config.spec.budget.max_parallel_tools
    limiter = None if limit is None or len(plan) <= limit else anyio.CapacityLimiter(limit)
    batch = _Batch(turn, set(turn.invoked), limiter)
    try:
        if len(plan) == 1:  # nothing runs alongside it: no group to build, no sibling to cancel
            await _call(ctx, batch, plan[0], _no_siblings)
        elif _on_asyncio():
            await _in_asyncio_tasks(ctx, batch, plan)
        else:
            await _in_task_group(ctx, batch, plan)
    except BaseExceptionGroup as group_error:
        # Tasks catch their tool functions' Exceptions; what is left (SystemExit, ...) leaves as itself.
        if len(group_error.exceptions) == 1:
            raise group_error.exceptions[0] from None
        raise
    if batch.failure:
        ctx.scratch.tool_raised = batch.failure[0]
        raise batch.failure[0]


def _no_siblings() -> None:
    """The cancel of a call that runs alone."""


async def _in_task_group(ctx: RunContext, batch: _Batch, plan: list[Planned]) -> None:
    """Any anyio backend: one task group; a failure cancels the group's scope."""
    async with anyio.create_task_group() as group:
        # Spawning costs more than running: the last call runs in this task while the
        # others, started first, run in theirs; all of them are in flight together.
        *spawned, last = plan
        cancel = group.cancel_scope.cancel
        for position, planned in enumerate(spawned, 1):
            group.start_soon(_call, ctx, batch, planned, cancel)
            if position % YIELD_EVERY == 0:  # the started calls run; a deadline or a failure cuts in
                await anyio.lowlevel.checkpoint()
        await _call(ctx, batch, last, cancel)


async def _in_asyncio_tasks(ctx: RunContext, batch: _Batch, plan: list[Planned]) -> None:
    """asyncio: the calls in native tasks of an `asyncio.TaskGroup`, a third of anyio's cost per task.

    The semantics are the task group's: a cancellation of this task (the caller's, or an anyio
    cancel scope's: the run's timeout) cancels every call and waits for all of them before it
    propagates. With `on_tool_error="raise"` a failure cancels the other calls, so each call
    runs in its own task (cancelling the siblings never cancels this one); so does a batch of
    more than `YIELD_EVERY` calls. Otherwise only the batch's own cancellation stops a call: the
    first call runs in this task once the others are started (spawning costs more than running),
    and the calls still start in block order (a durable workflow numbers its steps so).
    Calls that time out use anyio's `move_on_after`, which works in native tasks.
    """
    tasks: list[asyncio.Task[None]] = []

    def cancel_siblings() -> None:
        current = asyncio.current_task()
        for task in tasks:
            if task is not current:
                task.cancel()

    inline = ctx.config.spec.policy.on_tool_error != "raise" and len(plan) <= YIELD_EVERY
    async with asyncio.TaskGroup() as group:
        for position, planned in enumerate(plan[1:] if inline else plan, 1):
            tasks.append(group.create_task(_call(ctx, batch, planned, cancel_siblings)))
            if position % YIELD_EVERY == 0:  # the started calls run; a deadline or a failure cuts in
                await anyio.lowlevel.checkpoint()
                if batch.failure:  # a call failed (on_tool_error="raise"): start no more
                    break
        if inline:  # started before the tasks run: they run once it first waits
            await _call(ctx, batch, plan[0], cancel_siblings)
            # Then it awaits the tasks itself, the last started first: calls that do not wait end
            # in the order they started, so when this task wakes, the group has been told of
            # every end already and its exit does not wait one more turn of the event loop.
            # (Only here: no call cancels another, so awaiting a task raises only when the batch
            # is cut short, and the group then ends it as it would have.)
            for task in reversed(tasks):
                await task


async def _call(ctx: RunContext, batch: _Batch, planned: Planned, cancel: Callable[[], None]) -> None:
    """Run one call and write its answer into the turn: in a batch larger than
    `Budget.max_parallel_tools`, in one of the limiter's places (waiting for one first)."""
    limiter = batch.limiter
    if limiter is not None:
        await limiter.acquire()
    try:
        turn = batch.turn
        config = ctx.config
        budget = config.spec.budget
        index = planned.index
        tool = planned.tool
        call = turn.calls[index]
        if config.recorded is not None:  # replay: the recorded result, no tool runs
            turn.answers[index] = await _replayed(ctx, call)
            return
        context = (
            ToolContext(
                task_id=ctx.state.task_id,
                trace_id=ctx.state.trace_id,
                step=call.step,
                tool_use_id=call.id,
                idempotency_key=idempotency_key(ctx.state.task_id, call),
                deps=ctx.deps,
            )
            if tool.takes_context
            else None  # built only for a tool function that reads it
        )
        timeout = tool.timeout_s if tool.timeout_s is not None else budget.tool_timeout_s
        started = time.perf_counter()
        attempts = 0
        result: CallResult | _Retry
        last_error = ""
        # Invoked in an earlier session (saved mid-batch, then a crash): the same call, counted then.
        counted = index in batch.invoked
        while True:
            if not (counted and not attempts) and not take_tool_call(ctx):
                result = _spent(call, last_error if attempts else None)
                break
            attempts += 1
            if index not in batch.invoked:  # a continued run's call may have been invoked before
                batch.invoked.add(index)
                turn.invoked.append(index)
            try:
                if timeout is None:  # no cancel scope to build when there is no deadline
                    result = await _attempt(ctx, planned, call, context, attempts)
                else:
                    with anyio.move_on_after(timeout) as scope:
                        result = await _attempt(ctx, planned, call, context, attempts)
                    if scope.cancelled_caught:
                        result = refused(call, "timeout", _timed_out(tool, timeout))
            except Exception as exc:  # only with on_tool_error="raise": stop the batch, surface it
                batch.failure.append(exc)
                cancel()  # the sibling calls
                # Recorded as the failure it is (the siblings' answers say they were cut short).
                result = refused(call, "error", f"{type(exc).__name__}: {exc}")
                break
            if isinstance(result, CallResult):
                break
            last_error = result.error
            await anyio.sleep(result.delay_s)
        result.attempts = attempts
        result.duration_s = time.perf_counter() - started
        if result.is_error:  # an exception's text is the tool's output too: bounded like its result
            result.content = truncate(result.content, ctx.config.spec.budget.max_tool_output_chars)
        turn.answers[index] = result
    finally:
        if limiter is not None:
            limiter.release()


def _spent(call: ToolCall, last_error: str | None) -> CallResult:
    """The answer of a call `max_tool_calls` leaves no attempt for: not run, or (`last_error`:
    the tool function ran and failed) not retried."""
    if last_error is None:
        return refused(call, "denied", "not run: the tool-call budget is spent")
    return refused(call, "error", f"{last_error} (retries stopped: the tool-call budget is spent)")


async def _replayed(ctx: RunContext, call: ToolCall) -> CallResult:
    """A call answered from the recording, its attempts taken from the budget as they were."""
    config = ctx.config
    assert config.recorded is not None  # a replay
    recorded = config.recorded.get((call.step, call.id))
    if config.cut is not None and recorded is not None and recorded.outcome == "cancelled":
        await config.cut.reached()  # the recorded run was cut while this call ran: so is this one
    if recorded is None or recorded.tool != call.name:
        take_tool_call(ctx)
        return refused(call, "error", "replay: the recording has no result for this call")
    for _ in range(max(1, recorded.attempts)):
        take_tool_call(ctx)
    return CallResult.of(
        call=call, outcome=recorded.outcome, content=recorded.content, attempts=recorded.attempts
    )


def _timed_out(tool: Tool, timeout: float) -> str:
    if tool.runs_in_thread:
        # A thread cannot be cancelled: say so, so nobody assumes the side effect did not happen.
        return f"timed out after {timeout:g} s; the worker thread may still finish, so its effect is unknown"
    return f"timed out after {timeout:g} s; the call was cancelled"


async def _attempt(
    ctx: RunContext, planned: Planned, call: ToolCall, call_context: ToolContext | None, attempt: int
) -> CallResult | _Retry:
    """One invocation of the tool function: its result, or the delay before a retry."""
    spec = ctx.config.spec
    tool_span = ctx.tool_span
    try:
        if tool_span is None:  # an untraced run
            value = await planned.tool.invoke(planned.arguments, call_context)
        else:
            with tool_span(call):  # the call's span is the tool function's current span
                value = await planned.tool.invoke(planned.arguments, call_context)
    except RetryableToolError as exc:
        error = f"{type(exc).__name__}: {exc}"
        if attempt <= spec.budget.max_tool_retries:
            if exc.retry_after_s is not None:  # an explicit 0 means "retry now", not "use the backoff"
                return _Retry(exc.retry_after_s, error)
            return _Retry(spec.budget.retry_backoff_s * 2.0 ** (attempt - 1), error)
        if spec.policy.on_tool_error == "raise":
            raise
        return refused(call, "error", f"{error} (after {attempt} attempts)")
    except Exception as exc:  # the tool boundary: a failure becomes an is_error result
        if spec.policy.on_tool_error == "raise":
            raise
        return refused(call, "error", f"{type(exc).__name__}: {exc}")
    check = planned.tool.check_output
    try:
        fault = None if check is None else check(value)
    except Exception as exc:  # a value the check itself cannot read does not match either
        fault = f"{type(exc).__name__}: {exc}"
    if fault is not None:
        return refused(call, "invalid_result", f"the tool's result does not match what it declares: {fault}")
    if isinstance(value, Delegated):  # a delegated run's outcome: this run takes in what it did
        value = joined(ctx, call.id, value)
    return to_result(call, value, spec.budget.max_tool_output_chars)


def _on_asyncio() -> bool:
    """Whether the batch runs on asyncio (not trio), where its calls run in native tasks."""
    try:
        return sniffio.current_async_library() == "asyncio"
    except sniffio.AsyncLibraryNotFoundError:
        return False
