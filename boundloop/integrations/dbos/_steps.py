"""The loop's model calls and tool calls as DBOS steps, recorded once and replayed after that.

- `StepClient` wraps the loop's client: each `messages.create` (and `messages.count_tokens`) is
  a step whose output is the response as the API's JSON, rebuilt into an `anthropic` `Message`
  on replay.
- `durable_tool` wraps a tool: each invocation of its handler is a step (the `Tool` keeps its
  name, schema, validation, output check, options and `ToolContext`). A tool with a timeout
  times out inside its step, so the timeout is recorded and replayed like a result (below).
- `stored` is the store's existence check before a run, as a step.

Step ids. DBOS numbers a workflow's steps in the order they start, and a recovered workflow
must start them in the same order. The loop runs a batch's tool calls concurrently: each call's
task reserves its step ids (`DBOS.reserve_step`) before its first await, in the order the
tasks start, which is the order of the batch's blocks. It reserves one id per attempt the
budget allows (`1 + Budget.max_tool_retries`), so a retry after a backoff, whose start time
depends on the other calls, still runs at an id fixed at the batch's start. Step names carry
the tool, its `tool_use_id` and the attempt, so a replay that diverged would fail with DBOS's
`DBOSUnexpectedStepError` rather than return another call's result.

Timeouts. The loop cancels a call that overruns its timeout (`Tool.timeout_s`, else
`Budget.tool_timeout_s`) with a cancel scope around the handler, and answers it "timeout". A
step cancelled from outside records nothing, so a recovered run would invoke the tool again
and tell the model something else. So the step applies the same deadline to the handler
itself, inside the step, and records `TimedOut`; the step is shielded from the cancellation
outside, so that its record is written. After a recorded `TimedOut` (the first time, or
replayed) the handler waits: the loop's own scope, whose deadline has passed or is the one
waited for, cancels it and answers "timeout" as it does without DBOS. A replayed timeout
therefore takes its time again. While the step is shielded, any other cancellation (a
sibling's failure with `on_tool_error="raise"`, the task's) waits for the step, at most
until the deadline.
"""

from __future__ import annotations

import pickle
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar, final

import anyio
from anthropic.types import Message, MessageTokensCount
from dbos import DBOS, StepOptions

from ...errors import CheckpointCorrupt, ConfigurationError
from ...testing import parse_message
from ...tools import Tool, ToolContext
from ._failures import StepFailure, WorkflowInterrupted

if TYPE_CHECKING:
    from dbos import StepReservation

    from ...checkpoint.store import CheckpointStore
    from ...model import Model

T = TypeVar("T")

MODEL_STEP: Final = "boundloop.messages.create"
COUNT_STEP: Final = "boundloop.messages.count_tokens"
EXISTS_STEP: Final = "boundloop.store.exists"
TOOL_STEP: Final = "boundloop.tool"
"""Tool steps are named `boundloop.tool:{tool}:{tool_use_id}:{attempt}`."""


@final
class RunSteps:
    """One workflow execution's reserved tool step ids, by idempotency key."""

    def __init__(self, attempts: int) -> None:
        self.attempts = attempts
        self._reserved: dict[str, list[StepReservation]] = {}
        self._used: dict[str, int] = {}

    def next_step(self, key: str) -> tuple[int, StepReservation]:
        """The attempt number (from 1) of the call with idempotency key `key`, and its step id."""
        block = self._reserved.get(key)
        if block is None:  # the call's first attempt: before its first await, in batch order
            block = self._reserved[key] = [DBOS.reserve_step() for _ in range(self.attempts)]
        used = self._used.get(key, 0)
        self._used[key] = used + 1
        if used >= len(block):  # more attempts than the budget allows: never by the loop
            block.append(DBOS.reserve_step())
        return used + 1, block[used]


CURRENT: ContextVar[RunSteps | None] = ContextVar("boundloop_dbos_run", default=None)
"""The workflow execution the current task belongs to (tasks of a batch inherit it)."""


async def recorded(step: Awaitable[T]) -> T:
    """Await a step: its own failure raised as it was; DBOS's exceptions as `WorkflowInterrupted`."""
    try:
        return await step
    except StepFailure as failure:
        raise failure.rebuilt() from None
    except Exception as exc:
        raise WorkflowInterrupted(exc) from exc


async def stored(store: CheckpointStore, task_id: str) -> bool:
    """Whether the store holds `task_id`, as a step: a recovered run replays the first answer.

    A transient store error is retried by DBOS (up to 5 attempts) before the workflow fails.
    """

    async def load() -> bool:
        try:
            return await store.load(task_id) is not None
        except CheckpointCorrupt:
            return True  # unreadable, but there: never overwritten either

    options: StepOptions = {
        "name": EXISTS_STEP,
        "retries_allowed": True,
        "max_attempts": 5,
        "interval_seconds": 0.2,
    }
    return await recorded(DBOS.run_step_async(options, load))


def _message(data: dict[str, Any]) -> Message:
    """A response rebuilt from its JSON: validated like a scripted one, else built leniently as
    the SDK does (a block type this SDK does not know)."""
    try:
        return parse_message(data)
    except ConfigurationError:
        return Message.construct(**data)


def _response_json(response: object) -> dict[str, Any]:
    if not isinstance(response, Message):
        raise TypeError(f"messages.create returned {type(response).__name__}, not an anthropic Message")
    return response.to_dict(mode="json")


@final
class StepMessages:
    """`messages` of a `StepClient`: `create` and `count_tokens` as steps."""

    def __init__(self, client: Model) -> None:
        self._messages = client.messages

    async def _create(self, **request: Any) -> Message:
        async def call() -> dict[str, Any]:
            try:
                response: object = await self._messages.create(**request)
            except Exception as exc:
                raise StepFailure.of(exc) from exc
            try:
                return _response_json(response)
            except TypeError as exc:
                raise StepFailure.of(exc) from None

        return _message(await recorded(DBOS.run_step_async({"name": MODEL_STEP}, call)))

    async def _count_tokens(self, **request: Any) -> MessageTokensCount:
        counter: Callable[..., Awaitable[MessageTokensCount]] = getattr(self._messages, "count_tokens")  # noqa: B009

        async def call() -> dict[str, Any]:
            try:
                return (await counter(**request)).to_dict(mode="json")
            except Exception as exc:
                raise StepFailure.of(exc) from exc

        data = await recorded(DBOS.run_step_async({"name": COUNT_STEP}, call))
        return MessageTokensCount.model_validate(data)

    @property
    def create(self) -> Callable[..., Awaitable[Message]]:
        """`messages.create` as a step."""
        return self._create

    @property
    def count_tokens(self) -> Callable[..., Awaitable[MessageTokensCount]]:
        """`messages.count_tokens` as a step (for `Budget(count_tokens=True)`)."""
        return self._count_tokens


@final
class StepClient:
    """The loop's client, its calls made DBOS steps."""

    def __init__(self, client: Model) -> None:
        self.client = client
        self._messages = StepMessages(client)

    @property
    def messages(self) -> StepMessages:
        """The Messages API, each call a step."""
        return self._messages

    def __repr__(self) -> str:
        return f"StepClient({self.client!r})"


def _unpicklable(tool: Tool, value: object) -> TypeError | None:
    try:
        pickle.dumps(value)
    except Exception as exc:
        return TypeError(
            f"tool {tool.name!r} returned a {type(value).__name__} that DBOS cannot record "
            f"(pickle failed: {type(exc).__name__}: {exc}); return JSON values, or a picklable object"
        )
    return None


class TimedOut(NamedTuple):
    """A tool step's output when its handler overran its timeout (the handler was cancelled)."""

    timeout_s: float


TIMEOUT_GRACE_S: Final = 1.0
"""How long past the deadline a timed-out call waits for the loop's scope before it gives up."""


async def invoke_as_step(
    tool: Tool, arguments: dict[str, Any], context: ToolContext, timeout_s: float | None = None
) -> object:
    """One invocation of `tool`'s handler as a DBOS step (a plain call outside a workflow).

    `timeout_s` is the timeout the loop applies to the call (`tool.timeout_s`, else
    `Budget.tool_timeout_s`): with one, the step applies it and records a timeout (see the
    docstring of the module).
    """
    own_context = context if tool.takes_context else None
    run = CURRENT.get()
    if run is None:
        return await tool.invoke(arguments, own_context)
    attempt, step = run.next_step(context.idempotency_key)  # before any await: see the docstring
    name = f"{TOOL_STEP}:{tool.name}:{context.tool_use_id}:{attempt}"
    if timeout_s is None:

        async def call() -> object:
            try:
                value = await tool.invoke(arguments, own_context)
            except Exception as exc:
                raise StepFailure.of(exc) from exc
            return _picklable(tool, value)

        return await recorded(step.run_async({"name": name}, call))

    # The loop's timeout scope around this call, entered just now, has this deadline (the run's
    # timeout's, when that comes first): the handler gets the time it gets without DBOS.
    deadline = min(anyio.current_effective_deadline(), anyio.current_time() + timeout_s)

    async def call_with_deadline() -> object:
        value: object = None
        try:
            with anyio.CancelScope(deadline=deadline) as scope:
                value = await tool.invoke(arguments, own_context)
        except Exception as exc:
            raise StepFailure.of(exc) from exc
        if scope.cancelled_caught:
            return TimedOut(timeout_s)
        return _picklable(tool, value)

    output: object = None
    with anyio.CancelScope(shield=True):  # the loop's deadline must not cancel the step's record
        output = await recorded(step.run_async({"name": name}, call_with_deadline))
    if not isinstance(output, TimedOut):
        return output  # no await after the shield: the loop's scope answers with the result
    # The loop's scope cancels this wait at its deadline and answers the call "timeout".
    await anyio.sleep_until(deadline + TIMEOUT_GRACE_S)
    raise TimeoutError(f"timed out after {timeout_s:g} s")  # only without the loop's scope


def _picklable(tool: Tool, value: object) -> object:
    """`value`, or the step's failure saying it does not pickle."""
    problem = _unpicklable(tool, value)
    if problem is not None:
        raise StepFailure.of(problem)
    return value


def durable_tool(tool: Tool, default_timeout_s: float | None = None) -> Tool:
    """`tool` with each invocation of its handler a DBOS step.

    `default_timeout_s` is the loop's `Budget.tool_timeout_s`, the timeout of a tool without
    its own `timeout_s`.
    """
    timeout_s = tool.timeout_s if tool.timeout_s is not None else default_timeout_s

    async def handler(_boundloop_context: ToolContext, **arguments: Any) -> object:
        return await invoke_as_step(tool, arguments, _boundloop_context, timeout_s)

    handler.__name__ = handler.__qualname__ = tool.name
    return Tool(
        name=tool.name,
        description=tool.description,
        input_schema=tool.input_schema,
        handler=handler,
        side_effect=tool.side_effect,
        timeout_s=tool.timeout_s,
        requires_approval=tool.requires_approval,
        output_schema=tool.output_schema,
        _validate=tool.validate,
        _check_output=tool.check_output,
    )
