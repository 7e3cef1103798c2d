"""The loop's model calls and tool calls as DBOS steps, recorded once and replayed after that.

- `StepClient` wraps the loop's client: each `messages.create` (and `messages.count_tokens`) is
  a step whose output is the response as the API's JSON, rebuilt into an `anthropic` `Message`
  on replay.
- `durable_tool` wraps a tool: each invocation of its handler is a step (the `Tool` keeps its
  name, schema, validation, output check, options and `ToolContext`).
- `stored` is the store's existence check before a run, as a step.

Step ids. DBOS numbers a workflow's steps in the order they start, and a recovered workflow
must start them in the same order. The loop runs a batch's tool calls concurrently: each call's
task reserves its step ids (`DBOS.reserve_step`) before its first await, in the order the
tasks start, which is the order of the batch's blocks. It reserves one id per attempt the
budget allows (`1 + Budget.max_tool_retries`), so a retry after a backoff, whose start time
depends on the other calls, still runs at an id fixed at the batch's start. Step names carry
the tool, its `tool_use_id` and the attempt, so a replay that diverged would fail with DBOS's
`DBOSUnexpectedStepError` rather than return another call's result.
"""

from __future__ import annotations

import pickle
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, TypeVar, final

from anthropic.types import Message, MessageTokensCount
from dbos import DBOS, StepOptions

from ...errors import CheckpointCorrupt, ConfigurationError
from ...handlers.tools import Tool, ToolContext
from ...testing import parse_message
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
        """`messages.count_tokens` as a step (for `AgentLoop(count_tokens=True)`)."""
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


async def invoke_as_step(tool: Tool, arguments: dict[str, Any], context: ToolContext) -> object:
    """One invocation of `tool`'s handler as a DBOS step (a plain call outside a workflow)."""
    own_context = context if tool.takes_context else None
    run = CURRENT.get()
    if run is None:
        return await tool.invoke(arguments, own_context)
    attempt, step = run.next_step(context.idempotency_key)  # before any await: see the docstring

    async def call() -> object:
        try:
            value = await tool.invoke(arguments, own_context)
        except Exception as exc:
            raise StepFailure.of(exc) from exc
        problem = _unpicklable(tool, value)
        if problem is not None:
            raise StepFailure.of(problem)
        return value

    name = f"{TOOL_STEP}:{tool.name}:{context.tool_use_id}:{attempt}"
    return await recorded(step.run_async({"name": name}, call))


def durable_tool(tool: Tool) -> Tool:
    """`tool` with each invocation of its handler a DBOS step."""

    async def handler(_boundloop_context: ToolContext, **arguments: Any) -> object:
        return await invoke_as_step(tool, arguments, _boundloop_context)

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
