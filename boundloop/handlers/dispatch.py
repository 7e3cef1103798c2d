"""Parallel dispatch: every allowed tool_use of one response runs in one anyio task group.

Each task writes its `CallResult` into the slot at its block's index, so results come back
in block order without sorting. A task turns its handler's failure into data (an `is_error`
result); the group itself only raises for bugs, cancellation and `on_tool_error="raise"`.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Sequence
from typing import Any, Literal, NamedTuple, TypeAlias, TypeGuard, final

import anyio
import pydantic
from anthropic.types import ToolResultBlockParam

from ..policy import ToolCall
from .tools import RetryableToolError, Tool, ToolContext, idempotency_key

Outcome: TypeAlias = Literal["ok", "error", "denied", "invalid", "timeout", "cancelled", "repeated"]
"""How one tool_use was answered; also the `outcome` label of `boundloop_tool_calls_total`."""

OUTCOMES: tuple[Outcome, ...] = (
    "ok",
    "error",
    "denied",
    "invalid",
    "timeout",
    "cancelled",
    "repeated",
)
FAILED_OUTCOMES: frozenset[Outcome] = frozenset({"error", "invalid", "timeout", "denied"})
"""Outcomes that count towards the circuit breaker."""

Content: TypeAlias = str | list[dict[str, Any]]
_BLOCK_TYPES = frozenset({"text", "image", "document", "search_result"})


@final
@dataclasses.dataclass(slots=True, kw_only=True)
class CallResult:
    """The answer to one tool_use block."""

    call: ToolCall
    outcome: Outcome
    content: Content
    duration_s: float = 0.0
    attempts: int = 0
    """Handler invocations (0 when the call was not executed)."""

    @property
    def is_error(self) -> bool:
        """Whether the model sees this result as an error."""
        return self.outcome not in ("ok", "repeated")

    def to_block(self) -> ToolResultBlockParam:
        """The `tool_result` block answering the call."""
        block: ToolResultBlockParam = {
            "type": "tool_result",
            "tool_use_id": self.call.id,
            "content": self.content,  # type: ignore[typeddict-item]  # blocks are validated dicts
        }
        if self.is_error:
            block["is_error"] = True
        return block


@final
@dataclasses.dataclass(slots=True, kw_only=True)
class Planned:
    """One validated tool_use: either a tool to run or a result decided without running it."""

    call: ToolCall
    tool: Tool | None = None
    arguments: dict[str, Any] = dataclasses.field(default_factory=dict[str, Any])
    result: CallResult | None = None


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class DispatchConfig:
    """Per-run settings of the dispatcher."""

    task_id: str
    trace_id: str
    default_timeout_s: float | None
    max_retries: int
    retry_backoff_s: float
    max_output_chars: int
    raise_errors: bool
    may_attempt: Callable[[], bool]
    """Asked before every handler invocation: takes a tool call from the budget, or refuses."""


def refused(call: ToolCall, outcome: Outcome, text: str) -> CallResult:
    """A call answered without running its handler."""
    return CallResult(call=call, outcome=outcome, content=text)


class _Retry(NamedTuple):
    delay_s: float
    error: str


async def dispatch(
    planned: Sequence[Planned],
    slots: list[CallResult | None],
    config: DispatchConfig,
    started: set[int] | None = None,
) -> None:
    """Run the executable calls of `planned` concurrently, filling `slots` in block order.

    Args:
        planned: the validated calls, in block order.
        slots: one per call; decided results are copied in, run results written when done.
        config: the run's dispatch settings.
        started: receives the index of every call whose handler was invoked, so a call
            interrupted by a timeout or cancellation can be told apart from one never run.

    Raises:
        Exception: the first handler failure, when `config.raise_errors` is set; the
            sibling calls are cancelled first and their slots stay empty.
        BaseException: a handler's `KeyboardInterrupt` / `SystemExit`, as itself.
    """
    started = set() if started is None else started
    failure: list[BaseException] = []
    runnable: list[tuple[int, Planned, Tool]] = []
    for index, item in enumerate(planned):
        if item.result is not None or item.tool is None:
            slots[index] = item.result
        else:
            runnable.append((index, item, item.tool))
    if runnable:
        try:
            async with anyio.create_task_group() as group:
                # Spawning costs more than running: the last call runs in this task while the
                # others, started first, run in theirs; all of them are in flight together.
                *spawned, (index, item, tool) = runnable
                for spawn_index, spawn_item, spawn_tool in spawned:
                    group.start_soon(
                        _run_call,
                        spawn_item,
                        spawn_tool,
                        slots,
                        spawn_index,
                        config,
                        failure,
                        group.cancel_scope,
                        started,
                    )
                await _run_call(item, tool, slots, index, config, failure, group.cancel_scope, started)
        except BaseExceptionGroup as group_error:
            # Tasks catch their handlers' Exceptions; what is left (SystemExit, ...) leaves as itself.
            if len(group_error.exceptions) == 1:
                raise group_error.exceptions[0] from None
            raise
    if failure:
        raise failure[0]


async def _run_call(
    item: Planned,
    tool: Tool,
    slots: list[CallResult | None],
    index: int,
    config: DispatchConfig,
    failure: list[BaseException],
    group_scope: anyio.CancelScope,
    started_calls: set[int],
) -> None:
    call = item.call
    context = ToolContext(
        task_id=config.task_id,
        trace_id=config.trace_id,
        step=call.step,
        tool_use_id=call.id,
        idempotency_key=idempotency_key(config.task_id, call),
    )
    timeout = tool.timeout_s if tool.timeout_s is not None else config.default_timeout_s
    started = time.perf_counter()
    attempts = 0
    result: CallResult | _Retry
    last_error = ""
    while True:
        if not config.may_attempt():
            if attempts:  # the handler ran and failed; retrying would exceed max_tool_calls
                result = refused(
                    call, "error", f"{last_error} (retries stopped: the tool-call budget is spent)"
                )
            else:
                result = refused(call, "denied", "not run: the tool-call budget is spent")
            break
        attempts += 1
        started_calls.add(index)
        try:
            if timeout is None:  # no cancel scope to build when there is no deadline
                result = await _attempt(item, tool, context, config, attempts)
            else:
                with anyio.move_on_after(timeout) as scope:
                    result = await _attempt(item, tool, context, config, attempts)
                if scope.cancelled_caught:
                    result = refused(call, "timeout", _timed_out(tool, timeout))
        except Exception as exc:  # only with on_tool_error="raise": stop the batch, surface it
            failure.append(exc)
            group_scope.cancel()
            return
        if isinstance(result, CallResult):
            break
        last_error = result.error
        await anyio.sleep(result.delay_s)
    result.attempts = attempts
    result.duration_s = time.perf_counter() - started
    slots[index] = result


def _timed_out(tool: Tool, timeout: float) -> str:
    if tool.runs_in_thread:
        # A thread cannot be cancelled: say so, so nobody assumes the side effect did not happen.
        return f"timed out after {timeout:g} s; the worker thread may still finish, so its effect is unknown"
    return f"timed out after {timeout:g} s; the call was cancelled"


async def _attempt(
    item: Planned, tool: Tool, context: ToolContext, config: DispatchConfig, attempt: int
) -> CallResult | _Retry:
    """One invocation of the handler: its result, or the delay before a retry."""
    call = item.call
    try:
        value = await tool.invoke(item.arguments, context)
    except RetryableToolError as exc:
        error = f"{type(exc).__name__}: {exc}"
        if attempt <= config.max_retries:
            if exc.retry_after_s is not None:  # an explicit 0 means "retry now", not "use the backoff"
                return _Retry(exc.retry_after_s, error)
            return _Retry(config.retry_backoff_s * 2.0 ** (attempt - 1), error)
        if config.raise_errors:
            raise
        return refused(call, "error", f"{error} (after {attempt} attempts)")
    except Exception as exc:  # the tool boundary: a failure becomes an is_error result
        if config.raise_errors:
            raise
        return refused(call, "error", f"{type(exc).__name__}: {exc}")
    return to_result(call, value, config.max_output_chars)


def to_result(call: ToolCall, value: object, max_chars: int) -> CallResult:
    """Turn a handler's return value into a result: text, JSON, or a list of content blocks."""
    content: Content
    if isinstance(value, str):
        content = value
    elif isinstance(value, pydantic.BaseModel):
        content = value.model_dump_json()
    elif _is_block_list(value):
        content = [dict(block) for block in value]
    else:
        try:
            content = json.dumps(value, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            return refused(
                call,
                "error",
                f"the tool returned a {type(value).__name__}, which is not text, JSON or content "
                f"blocks ({exc})",
            )
    return CallResult(call=call, outcome="ok", content=truncate(content, max_chars))


def _is_block_list(value: object) -> TypeGuard[list[dict[str, Any]]]:
    return isinstance(value, list) and bool(value) and all(_is_block(block) for block in value)


def _is_block(block: object) -> bool:
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    # A text block without its text would be rejected by the API: it is not a content block.
    return kind in _BLOCK_TYPES and (kind != "text" or isinstance(block.get("text"), str))


def _marker(cut: int) -> str:
    return f"\n[truncated: {cut} more characters]"


def truncate(content: Content, max_chars: int) -> Content:
    """Cut text over `max_chars`, with a visible marker saying how much was cut.

    For content blocks, `max_chars` bounds the text of all the blocks together: text past it
    is cut (later text blocks dropped), and the last text kept carries the marker.
    """
    if isinstance(content, str):
        if len(content) <= max_chars:
            return content
        return content[:max_chars] + _marker(len(content) - max_chars)
    total = sum(len(block["text"]) for block in content if block.get("type") == "text")
    if total <= max_chars:
        return content
    blocks: list[dict[str, Any]] = []
    left = max_chars
    last_text: int | None = None
    for block in content:
        if block.get("type") != "text":
            blocks.append(block)
            continue
        if left == 0:
            continue
        text: str = block["text"]
        kept = text[:left]
        left -= len(kept)
        last_text = len(blocks)
        blocks.append(block if kept == text else {**block, "text": kept})
    marker = _marker(total - max_chars)
    if last_text is None:
        blocks.append({"type": "text", "text": marker.lstrip()})
    else:
        block = blocks[last_text]
        blocks[last_text] = {**block, "text": block["text"] + marker}
    return blocks
