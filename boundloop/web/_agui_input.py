"""What an AG-UI `RunAgentInput` asks of the loop: the task it names, the conversation to start
from, and the human's answers to a waiting run's interrupts.

The mapping, one AG-UI run to one boundloop task:

- A run that starts the conversation's next turn (no `resume`) is the task `THREAD_ID/RUN_ID`;
  the conversation (`messages`) is its history, ending in the user's turn.
- A run that answers interrupts (`resume`) continues the task that stopped waiting: each
  interrupt's id is `TOOL_USE_ID@TASK_ID`, and that task must be one of the thread's.
"""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any, cast

from ag_ui.core import (
    AssistantMessage,
    ResumeEntry,
    RunAgentInput,
    TextPart,
    ToolMessage,
    UserMessage,
)

from ..checkpoint.store import check_task_id
from ..errors import InvalidTaskId
from ._agui_events import INTERRUPT_SEPARATOR

if TYPE_CHECKING:
    from anthropic.types import MessageParam

THREAD_SEPARATOR = "/"
"""Between the thread id and the run id in a task id (so a thread id may not hold one)."""


class BadInput(ValueError):
    """A `RunAgentInput` this endpoint cannot run: answered 400 with the message."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Answers:
    """The human's answers to a waiting task's interrupts."""

    task_id: str
    approvals: dict[str, bool | str]
    """`{tool_use_id: True | False | reason}`, as `AgentLoop.resume` takes them."""
    replies: dict[str, str]
    """`{tool_use_id: reply}`: answers to the model's question (the escalation tool)."""


def task_of(run: RunAgentInput) -> str:
    """The task a run without `resume` starts (or reconnects to): `THREAD_ID/RUN_ID`.

    Raises:
        BadInput: the thread id holds a `/`, or the task id is no valid task id.
    """
    if THREAD_SEPARATOR in run.thread_id:
        raise BadInput(f"threadId {run.thread_id!r} holds a {THREAD_SEPARATOR!r}: a thread id may not")
    return _checked(f"{run.thread_id}{THREAD_SEPARATOR}{run.run_id}")


def answers(run: RunAgentInput) -> Answers:
    """The answers of a run's `resume` entries, all for one task of the run's thread.

    Raises:
        BadInput: an interrupt id this endpoint did not make, of another thread's task or of
            two tasks, or a payload that is not the answer its interrupt asks for.
    """
    assert run.resume
    tasks: set[str] = set()
    approvals: dict[str, bool | str] = {}
    replies: dict[str, str] = {}
    for entry in run.resume:
        tool_use_id, separator, task_id = entry.interrupt_id.partition(INTERRUPT_SEPARATOR)
        if not separator or not tool_use_id:
            raise BadInput(f"interruptId {entry.interrupt_id!r} is no interrupt of this endpoint")
        if not task_id.startswith(run.thread_id + THREAD_SEPARATOR) or THREAD_SEPARATOR in run.thread_id:
            raise BadInput(f"interruptId {entry.interrupt_id!r} is not of thread {run.thread_id!r}")
        tasks.add(_checked(task_id))
        if isinstance(entry.payload, str) and entry.status == "resolved":
            replies[tool_use_id] = entry.payload
        else:
            approvals[tool_use_id] = _decision(entry)
    if len(tasks) != 1:
        raise BadInput(
            f"the resume entries answer interrupts of {len(tasks)} runs: answer one run's at a time"
        )
    return Answers(task_id=tasks.pop(), approvals=approvals, replies=replies)


def _decision(entry: ResumeEntry) -> bool | str:
    """`{"approved": true}` approves; `{"approved": false, "reason": ...}` or a cancelled
    interrupt denies (the reason is what the model sees)."""
    if entry.status == "cancelled":
        return "the user cancelled the request"
    payload: Any = entry.payload
    if not isinstance(payload, dict) or not isinstance(payload.get("approved"), bool):  # pyright: ignore[reportUnknownMemberType]
        raise BadInput(
            f'interrupt {entry.interrupt_id!r}: the payload is {{"approved": true}} or '
            f'{{"approved": false, "reason": "..."}}, not {json.dumps(payload)[:200]}'
        )
    if payload["approved"]:
        return True
    reason = payload.get("reason")  # pyright: ignore[reportUnknownMemberType,reportUnknownVariableType]
    return reason.strip() if isinstance(reason, str) and reason.strip() else False


def history(run: RunAgentInput) -> list[MessageParam]:
    """The conversation as the API's messages: user and assistant text, the assistant's tool
    calls and their results. System, developer, reasoning and activity messages are left out:
    the loop's own system prompt and tools govern the run, not the front end.

    Raises:
        BadInput: a part that is not text, a tool call whose arguments are not a JSON object,
            or a conversation that does not end with the user's turn.
    """
    turns: list[dict[str, Any]] = []

    def add(role: str, block: dict[str, Any]) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].append(block)
        else:
            turns.append({"role": role, "content": [block]})

    for message in run.messages:
        if isinstance(message, UserMessage):
            add("user", {"type": "text", "text": _text(message.content, message.id)})
        elif isinstance(message, AssistantMessage):
            if message.content:
                add("assistant", {"type": "text", "text": message.content})
            for call in message.tool_calls or []:
                add(
                    "assistant",
                    {
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.function.name,
                        "input": _input(call.id, call.function.arguments),
                    },
                )
        elif isinstance(message, ToolMessage):
            content = _text(message.content, message.id)
            add(
                "user",
                {
                    "type": "tool_result",
                    "tool_use_id": message.tool_call_id,
                    "content": content,
                    "is_error": message.error is not None,
                },
            )
    if not turns or turns[-1]["role"] != "user":
        raise BadInput("messages must end with the user's turn (a user message or tool results)")
    return cast("list[MessageParam]", turns)  # the API's shapes, built above


def _text(content: str | list[Any], message_id: str) -> str:
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for part in content:
        if not isinstance(part, TextPart):
            raise BadInput(f"message {message_id!r}: only text parts are supported, not {part.type!r}")
        texts.append(part.text)
    return "".join(texts)


def _input(call_id: str, arguments: str) -> dict[str, Any]:
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        raise BadInput(f"tool call {call_id!r}: its arguments are not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise BadInput(f"tool call {call_id!r}: its arguments are not a JSON object")
    return value  # pyright: ignore[reportUnknownVariableType]


def _checked(task_id: str) -> str:
    try:
        return check_task_id(task_id)
    except InvalidTaskId as exc:
        raise BadInput(f"the task id {task_id!r} of this run is refused: {exc}") from None
