"""A run's events as the AI SDK's UI message stream (`x-vercel-ai-ui-message-stream: v1`), the
parts `useChat` reads: one assistant message, its steps, text, reasoning, tool calls with their
input as it streams, their output, approvals waiting, errors and the finish (docs/front-ends.md).

The part types are those of the `ai` package's `UIMessageChunk` (`ai` 7): each part is a JSON
object written as one server-sent event (`data: {...}`), and the stream ends with `data: [DONE]`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, Final, Literal, TypeAlias, cast

from ..errors import LoopError
from ..events import (
    ApprovalRequested,
    Error,
    Event,
    ModelRequest,
    Proposal,
    Resumed,
    Stop,
    TextDelta,
    ThinkingDelta,
    ToolInputDelta,
    ToolResult,
)
from ..records import StopReason

Part: TypeAlias = dict[str, object]
"""One part of the stream: a JSON object of one of the `ai` package's `UIMessageChunk` types."""

FinishReason: TypeAlias = Literal[
    "stop", "length", "content-filter", "tool-calls", "error", "interrupted", "other"
]

UI_MESSAGE_STREAM_HEADERS: Final[Mapping[str, str]] = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",  # a proxy passes each part on as it comes
}
"""The headers of a UI message stream response (those the `ai` package's own responses send)."""

DONE: Final = "data: [DONE]\n\n"

_FINISH_REASONS: Final[Mapping[str, FinishReason]] = {
    StopReason.COMPLETED: "stop",
    StopReason.NEEDS_HUMAN: "tool-calls",
    StopReason.CANCELLED: "interrupted",
    StopReason.FAILED: "error",
    StopReason.REFUSED: "content-filter",
    StopReason.MAX_STEPS: "length",
    StopReason.MAX_TOOL_CALLS: "length",
    StopReason.TIMEOUT: "length",
    StopReason.TOKEN_BUDGET: "length",
    StopReason.COST_BUDGET: "length",
    StopReason.TRUNCATED: "length",
    StopReason.CONTEXT_EXCEEDED: "length",
}
"""The finish reason a stop gives the front end; the other stops (a policy's block, missing
evidence, failing tools, invalid output) are `other`. `interrupted` keeps `useChat` from sending
again by itself."""

_CALL_BLOCKS: Final = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
"""The content blocks that call a tool (the API runs the last two itself)."""


def sse(part: Part) -> str:
    """One part as a server-sent event. JSON escapes every control character and (ASCII only)
    every line separator, so the `data:` line is never split, whatever the model wrote."""
    return f"data: {json.dumps(part, separators=(',', ':'))}\n\n"


class UIMessageParts:
    """Turns a run's events into UI message stream parts, in order; one instance per response.

    The model's output comes from the deltas as it streams; a model call whose deltas it did not
    see (a store that logs no deltas, a follower joining late) is given whole from its `Proposal`.
    """

    def __init__(self, message_id: str | None = None) -> None:
        self.message_id = message_id
        self.in_step = False
        self.open: dict[int, tuple[str, str]] = {}
        """The content blocks of this model call being written: index -> (part kind, part id)."""
        self.streamed: set[int] = set()
        """The content blocks of this model call that came as deltas."""
        self.calls: set[str] = set()
        """The tool calls the front end knows (announced by `tool-input-start`)."""
        self.stop: Stop | None = None
        self.error: str | None = None
        """The message of the run's last recorded error (a failed run's `errorText`)."""

    def start(self) -> list[Part]:
        part: Part = {"type": "start"}
        if self.message_id is not None:
            part["messageId"] = self.message_id
        return [part]

    def parts(self, event: Event) -> list[Part]:
        """The parts `event` adds (none for the events a front end does not show)."""
        if isinstance(event, TextDelta | ThinkingDelta | ToolInputDelta):
            return self._delta(event)
        if isinstance(event, ModelRequest):
            return [*self._end_step(), *self._step()]
        if isinstance(event, Proposal):
            return self._proposal(event)
        if isinstance(event, ToolResult):
            return self._result(event)
        if isinstance(event, ApprovalRequested):
            return [
                {
                    "type": "tool-approval-request",
                    "approvalId": call.tool_use_id,
                    "toolCallId": call.tool_use_id,
                }
                for call in event.calls
                if call.tool_use_id in self.calls
            ]
        if isinstance(event, Resumed):  # the calls decided or answered: the client's message holds them
            self.calls.update(event.approvals)
            if event.escalation is not None:
                self.calls.add(event.escalation)
            return []
        if isinstance(event, Error):
            self.error = event.message
            return []
        if isinstance(event, Stop):
            self.stop = event
            parts = self._end_step()
            if event.stop_reason == StopReason.FAILED:
                parts.append({"type": "error", "errorText": event.detail or self.error or "the run failed"})
            return parts
        return []

    def failed(self, exc: Exception) -> list[Part]:
        """The parts of a run that raised: its error, unless its failed stop gave it already.
        boundloop's own refusals say why; another exception only its type (its message is
        not redacted, and may hold what a tool saw)."""
        parts = self._end_step()
        if self.stop is None or self.stop.stop_reason != StopReason.FAILED:
            text = (
                f"{type(exc).__name__}: {exc}"
                if isinstance(exc, LoopError)
                else f"the run raised {type(exc).__name__}"
            )
            parts.append({"type": "error", "errorText": text})
        return parts

    def finish(self) -> list[Part]:
        """The last part: the finish reason, and boundloop's stop in the message's metadata."""
        part: Part = {"type": "finish"}
        if self.stop is None:
            part["finishReason"] = "error"
            return [part]
        part["finishReason"] = _FINISH_REASONS.get(self.stop.stop_reason, "other")
        part["messageMetadata"] = {"taskId": self.stop.task_id, "stopReason": self.stop.stop_reason}
        return [part]

    def _step(self) -> list[Part]:
        if self.in_step:
            return []
        self.in_step = True
        return [{"type": "start-step"}]

    def _end_step(self) -> list[Part]:
        parts = self._close(None)
        if self.in_step:
            parts.append({"type": "finish-step"})
        self.in_step = False
        self.streamed.clear()
        return parts

    def _close(self, keep: int | None) -> list[Part]:
        """End the open blocks but `keep` (the API writes one block at a time)."""
        parts: list[Part] = []
        for index in [index for index in self.open if index != keep]:
            kind, part_id = self.open.pop(index)
            if kind != "tool":  # a call's input ends with `tool-input-available`, from the Proposal
                parts.append({"type": f"{kind}-end", "id": part_id})
        return parts

    def _delta(self, event: TextDelta | ThinkingDelta | ToolInputDelta) -> list[Part]:
        parts = [*self._step(), *self._close(event.index)]
        self.streamed.add(event.index)
        if isinstance(event, ToolInputDelta):
            if event.index not in self.open:
                self.open[event.index] = ("tool", event.tool_use_id)
                parts.append(self._announce(event.tool_use_id, event.name))
            if event.partial_json:
                parts.append(
                    {
                        "type": "tool-input-delta",
                        "toolCallId": event.tool_use_id,
                        "inputTextDelta": event.partial_json,
                    }
                )
            return parts
        kind, piece = ("text", event.text) if isinstance(event, TextDelta) else ("reasoning", event.thinking)
        if event.index not in self.open:
            part_id = f"{kind}-{event.seq}"
            self.open[event.index] = (kind, part_id)
            parts.append({"type": f"{kind}-start", "id": part_id})
        if piece:
            parts.append({"type": f"{kind}-delta", "id": self.open[event.index][1], "delta": piece})
        return parts

    def _announce(self, tool_use_id: str, name: str) -> Part:
        self.calls.add(tool_use_id)
        return {"type": "tool-input-start", "toolCallId": tool_use_id, "toolName": name}

    def _proposal(self, event: Proposal) -> list[Part]:
        """The end of a model call: its blocks not streamed, given whole; each call's input."""
        parts = [*self._step(), *self._close(None)]
        for index, block in enumerate(_content(event)):
            kind = block.get("type")
            whole = index not in self.streamed
            if kind in ("text", "thinking") and whole:
                piece = block.get(kind)
                if isinstance(piece, str) and piece:
                    part_kind = "text" if kind == "text" else "reasoning"
                    part_id = f"{part_kind}-{event.seq}-{index}"
                    parts.append({"type": f"{part_kind}-start", "id": part_id})
                    parts.append({"type": f"{part_kind}-delta", "id": part_id, "delta": piece})
                    parts.append({"type": f"{part_kind}-end", "id": part_id})
            elif kind in _CALL_BLOCKS:
                call_id, name = str(block.get("id")), str(block.get("name"))
                if call_id not in self.calls:
                    parts.append(self._announce(call_id, name))
                available: Part = {
                    "type": "tool-input-available",
                    "toolCallId": call_id,
                    "toolName": name,
                    "input": block.get("input"),
                }
                if kind != "tool_use":
                    available["providerExecuted"] = True
                parts.append(available)
            elif (
                isinstance(kind, str)
                and kind.endswith("_tool_result")
                and block.get("tool_use_id") in self.calls
            ):
                parts.append(
                    {
                        "type": "tool-output-available",
                        "toolCallId": block["tool_use_id"],
                        "output": block.get("content"),
                        "providerExecuted": True,
                    }
                )
        return parts

    def _result(self, event: ToolResult) -> list[Part]:
        parts: list[Part] = []
        call_id = event.tool_use_id
        if call_id not in self.calls:  # its call came before what this stream saw
            tool_input: object = event.input.json() if event.input is not None else {}
            parts += [
                self._announce(call_id, event.tool),
                {
                    "type": "tool-input-available",
                    "toolCallId": call_id,
                    "toolName": event.tool,
                    "input": tool_input,
                },
            ]
        output = event.content.json() if event.content is not None else None
        if event.by_human and event.outcome == "denied":
            parts.append({"type": "tool-output-denied", "toolCallId": call_id})
        elif event.is_error or event.outcome != "ok":
            parts.append(
                {"type": "tool-output-error", "toolCallId": call_id, "errorText": _text(output, event)}
            )
        else:
            parts.append({"type": "tool-output-available", "toolCallId": call_id, "output": output})
        return parts


def _content(event: Proposal) -> list[dict[str, Any]]:
    """The content blocks of the model's response, as recorded (redacted) JSON."""
    response = event.response.json() if event.response is not None else None
    if not isinstance(response, dict):
        return []
    return cast(dict[str, list[dict[str, Any]]], response).get("content", [])


def _text(output: object, event: ToolResult) -> str:
    """A failed call's error as text: its content's text, else its outcome."""
    if isinstance(output, str) and output:
        return output
    if isinstance(output, list):
        blocks = cast(list[dict[str, object]], output)  # a tool result's content blocks
        texts = [str(block.get("text", "")) for block in blocks if block.get("type") == "text"]
        if any(texts):
            return "\n".join(texts)
    return f"{event.tool}: {event.outcome}"


async def ui_message_parts(
    events: AsyncIterable[Event], *, message_id: str | None = None
) -> AsyncIterator[Part]:
    """A run's events as the parts of the AI SDK's UI message stream, `start` to `finish`.

    Args:
        events: the run's events: a `RunStream` (`async with loop.stream(...) as run`), or
            `loop.events(task_id)` (the store's log).
        message_id: the assistant message's id (`start`'s `messageId`); None: the client's own.

    Yields:
        Each part, a JSON object of one of the `ai` package's `UIMessageChunk` types.

    Raises:
        Exception: what iterating `events` raises (`TaskExists`, ...), after an `error` part and
            the `finish` part.
    """
    translator = UIMessageParts(message_id)
    for part in translator.start():
        yield part
    try:
        async for event in events:
            for part in translator.parts(event):
                yield part
    except Exception as exc:
        for part in [*translator.failed(exc), *translator.finish()]:
            yield part
        raise
    for part in translator.finish():
        yield part


async def ui_message_stream(
    events: AsyncIterable[Event], *, message_id: str | None = None
) -> AsyncIterator[str]:
    """A run's events as the AI SDK's UI message stream: each part as a server-sent event, then
    `data: [DONE]`; send them with `UI_MESSAGE_STREAM_HEADERS` (or use `ui_message_response`).

    Args:
        events: the run's events: a `RunStream` (`async with loop.stream(...) as run`), or
            `loop.events(task_id)` (the store's log).
        message_id: the assistant message's id (`start`'s `messageId`); None: the client's own.

    Yields:
        `data: {part}\\n\\n` for each part of `ui_message_parts`, then `data: [DONE]\\n\\n`.

    Raises:
        Exception: what iterating `events` raises, after the `error` and `finish` parts and `[DONE]`.
    """
    try:
        async for part in ui_message_parts(events, message_id=message_id):
            yield sse(part)
    except Exception:
        yield DONE  # the client's end of the stream, after the error part
        raise
    yield DONE
