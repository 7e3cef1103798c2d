"""A run's events as AG-UI events, built with the official `ag-ui-protocol` types.

`Translation` reads boundloop events in `seq` order (live from a `RunStream`, or read back
from the store's event log: the same events give the same AG-UI events, ids included) and
answers each with the AG-UI events it means. Each AG-UI event is numbered by a `Cursor`: the
`seq` of the boundloop event it comes from and its place among that event's AG-UI events, so
a client that reconnects after one gets everything after it, once; `OpenBlocks` knows which
messages and tool calls were open at that point, whose starts its new stream sends again.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Final, Literal, cast

from ag_ui.core import (
    BaseEvent as AguiEvent,
)
from ag_ui.core import (
    Interrupt,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    RunFinishedOutcome,
    RunFinishedSuccessOutcome,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)

from ..events import Event, Stop, TextDelta, ThinkingDelta, ToolInputDelta, ToolResult
from ..records import StopReason
from ..state import LoopState

Block = Literal["text", "reasoning", "tool"]

INTERRUPT_SEPARATOR: Final = "@"
"""Between a waiting call's `tool_use_id` and its task id in an interrupt's id (an API tool use
id is letters, digits, `_` and `-`: it never holds one)."""

APPROVAL_SCHEMA: Final = {
    "type": "object",
    "properties": {"approved": {"type": "boolean"}, "reason": {"type": "string"}},
    "required": ["approved"],
}
"""The answer an approval interrupt expects (`ResumeEntry.payload`)."""

REPLY_SCHEMA: Final = {"type": "string"}
"""The answer to the model's question (the escalation tool) expects: the human's reply."""


@dataclasses.dataclass(frozen=True, slots=True, order=True)
class Cursor:
    """Where an AG-UI event sits in the task's stream: the boundloop event's `seq`, then its
    place among the AG-UI events made of it. Sent as the SSE `id:` (`"seq:place"`)."""

    seq: int
    place: int

    def __str__(self) -> str:
        return f"{self.seq}:{self.place}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        """The cursor of a `Last-Event-ID` header.

        Raises:
            ValueError: not two integers joined by a colon.
        """
        seq, colon, place = text.strip().partition(":")
        if not colon:
            raise ValueError(f"Last-Event-ID {text!r} is no id this endpoint sent (expected SEQ:PLACE)")
        return cls(int(seq), int(place))


BEFORE_ALL: Final = Cursor(-1, 0)
"""A cursor before every event: the whole task."""


@dataclasses.dataclass(slots=True)
class _Block:
    """The content block being streamed (the API streams a response's blocks one at a time)."""

    key: tuple[int, int]
    """(step, index): the model call it belongs to and its place in the response."""
    kind: Block
    ident: str
    """The AG-UI message id (text, reasoning) or tool call id (the `tool_use` id)."""
    name: str = ""
    """A tool call's tool."""
    parent: str | None = None
    """A tool call's assistant message: the response's text before it, if any."""
    args: bool = False
    """For a tool call: whether any of its input came."""

    def starts(self) -> list[AguiEvent]:
        if self.kind == "text":
            return [TextMessageStartEvent(message_id=self.ident, role="assistant")]
        if self.kind == "reasoning":
            return [
                ReasoningStartEvent(message_id=self.ident),
                ReasoningMessageStartEvent(message_id=self.ident),
            ]
        return [
            ToolCallStartEvent(
                tool_call_id=self.ident, tool_call_name=self.name, parent_message_id=self.parent
            )
        ]

    def ends(self) -> list[AguiEvent]:
        if self.kind == "text":
            return [TextMessageEndEvent(message_id=self.ident)]
        if self.kind == "reasoning":
            return [ReasoningMessageEndEvent(message_id=self.ident), ReasoningEndEvent(message_id=self.ident)]
        # A call without input: its arguments are an empty object, as the API records it.
        empty: list[AguiEvent] = [] if self.args else [ToolCallArgsEvent(tool_call_id=self.ident, delta="{}")]
        return [*empty, ToolCallEndEvent(tool_call_id=self.ident)]


def interrupt_id(tool_use_id: str, task_id: str) -> str:
    """The id of the interrupt for a waiting call: it names the call and its task."""
    return f"{tool_use_id}{INTERRUPT_SEPARATOR}{task_id}"


def interrupts(state: LoopState) -> list[Interrupt]:
    """What a run stopped `needs_human` waits for: each call to approve, the model's question."""
    waiting = [
        Interrupt(
            id=interrupt_id(call.tool_use_id, state.task_id),
            reason="approval",
            message=f"The run asks to call {call.tool} with {json.dumps(call.input, ensure_ascii=False)}",
            tool_call_id=call.tool_use_id,
            response_schema=APPROVAL_SCHEMA,
        )
        for call in state.pending_approvals
    ]
    if state.escalation is not None:
        waiting.append(
            Interrupt(
                id=interrupt_id(state.escalation.tool_use_id, state.task_id),
                reason="question",
                message=state.escalation.reason,
                tool_call_id=state.escalation.tool_use_id,
                response_schema=REPLY_SCHEMA,
            )
        )
    return waiting


def result_text(event: ToolResult) -> str:
    """A tool result's content as the text a tool message holds: its text, or its JSON (a
    result of blocks other than text)."""
    content: object = None if event.content is None else event.content.json()
    if isinstance(content, str):
        return content
    parts: list[object] = cast("list[object]", content) if isinstance(content, list) else [None]
    texts = [_text_of(part) for part in parts]
    if all(text is not None for text in texts):
        return "".join(text for text in texts if text is not None)
    return json.dumps(content, ensure_ascii=False)


def _text_of(block: object) -> str | None:
    """A text block's text; None for any other value."""
    if isinstance(block, dict) and block.get("type") == "text":  # pyright: ignore[reportUnknownMemberType]
        text = block.get("text")  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
        return text if isinstance(text, str) else None
    return None


class Translation:
    """The AG-UI events of one task's boundloop events, fed in `seq` order."""

    def __init__(self, task_id: str, thread_id: str, run_id: str) -> None:
        self.task_id = task_id
        self.thread_id = thread_id
        self.run_id = run_id
        self.block: _Block | None = None
        """The block being streamed, if one is."""
        self.text: dict[int, str] = {}
        """The last text message of each model call (by step): its later tool calls' parent."""

    def feed(self, event: Event) -> list[AguiEvent]:
        """The AG-UI events `event` means (a run's final `Stop` is answered by `finish`)."""
        if isinstance(event, TextDelta):
            out = self._open(event.step, event.index, "text")
            return [*out, TextMessageContentEvent(message_id=self._ident(), delta=event.text)]
        if isinstance(event, ThinkingDelta):
            out = self._open(event.step, event.index, "reasoning")
            return [*out, ReasoningMessageContentEvent(message_id=self._ident(), delta=event.thinking)]
        if isinstance(event, ToolInputDelta):
            out = self._open(event.step, event.index, "tool", event.tool_use_id, event.name)
            if event.partial_json:
                assert self.block is not None
                self.block.args = True
                out.append(ToolCallArgsEvent(tool_call_id=event.tool_use_id, delta=event.partial_json))
            return out
        if event.kind in ("proposal", "stop"):  # the response is whole, or the run stopped
            return self.close()
        if isinstance(event, ToolResult):
            return [
                ToolCallResultEvent(
                    message_id=f"{event.tool_use_id}:result",
                    tool_call_id=event.tool_use_id,
                    content=result_text(event),
                    role="tool",
                )
            ]
        return []

    def close(self) -> list[AguiEvent]:
        """The end of the open block, if one is."""
        block, self.block = self.block, None
        return [] if block is None else block.ends()

    def finish(self, stop: Stop, state: LoopState | None) -> AguiEvent:
        """The event that ends the AG-UI run at `stop`: RUN_FINISHED (completed; waiting for a
        human, with its interrupts; cancelled) or RUN_ERROR (any other stop, its reason as the code)."""
        reason = stop.stop_reason
        waiting = [] if state is None else interrupts(state)
        outcome: RunFinishedOutcome
        if reason == StopReason.COMPLETED:
            outcome = RunFinishedSuccessOutcome()
        elif reason == StopReason.CANCELLED:
            outcome = RunFinishedCancelledOutcome()
        elif reason == StopReason.NEEDS_HUMAN and waiting:
            outcome = RunFinishedInterruptOutcome(interrupts=waiting)
        else:
            message = f"the run stopped {reason}" + (f": {stop.detail}" if stop.detail else "")
            return RunErrorEvent(message=message, code=reason)
        result = {"taskId": self.task_id, "stopReason": reason}
        return RunFinishedEvent(thread_id=self.thread_id, run_id=self.run_id, result=result, outcome=outcome)

    def _open(
        self, step: int, index: int, kind: Block, tool_use_id: str = "", name: str = ""
    ) -> list[AguiEvent]:
        """The start of block (step, index) if it is new (ending the one before it)."""
        if self.block is not None and self.block.key == (step, index):
            return []
        out = self.close()
        if kind == "tool":
            self.block = _Block((step, index), kind, tool_use_id, name=name, parent=self.text.get(step))
        else:
            self.block = _Block((step, index), kind, f"{self.task_id}:{step}:{index}")
            if kind == "text":
                self.text[step] = self.block.ident
        return [*out, *self.block.starts()]

    def _ident(self) -> str:
        assert self.block is not None
        return self.block.ident


class OpenBlocks:
    """The messages, reasoning and tool calls a client has seen start and not end, in order."""

    def __init__(self) -> None:
        self._open: dict[tuple[str, str], AguiEvent] = {}

    def see(self, event: AguiEvent) -> None:
        """Follow one event the client got."""
        if isinstance(event, TextMessageStartEvent | ReasoningMessageStartEvent):
            self._open["message", event.message_id] = event
        elif isinstance(event, TextMessageEndEvent | ReasoningMessageEndEvent):
            self._open.pop(("message", event.message_id), None)
        elif isinstance(event, ReasoningStartEvent):
            self._open["reasoning", event.message_id] = event
        elif isinstance(event, ReasoningEndEvent):
            self._open.pop(("reasoning", event.message_id), None)
        elif isinstance(event, ToolCallStartEvent):
            self._open["tool", event.tool_call_id] = event
        elif isinstance(event, ToolCallEndEvent):
            self._open.pop(("tool", event.tool_call_id), None)

    def starts(self) -> list[AguiEvent]:
        """The start events of what is open: a new stream sends them again before the rest
        (the client adds to the message or call it has, by its id, so nothing is doubled)."""
        return list(self._open.values())
