"""The transcript as the Messages API sees it: appending user turns, and checking validity."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from anthropic.types import ContentBlockParam, MessageParam

__all__ = [
    "append_user",
    "transcript_errors",
]


def append_user(messages: list[MessageParam], blocks: list[ContentBlockParam]) -> None:
    """Add user content, joining it to a trailing user message so roles keep alternating."""
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "user":
        content = last["content"]
        head: list[Any] = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
        # A new dict, never a mutation: requests already sent keep what they held.
        messages[-1] = {"role": "user", "content": [*head, *blocks]}
    else:
        messages.append({"role": "user", "content": blocks})


def transcript_errors(messages: list[MessageParam]) -> list[str]:
    """Problems that would make the API reject the transcript (empty when valid).

    Roles alternate (consecutive assistant turns are allowed: the API joins a paused turn and
    its continuation), and every tool_use is answered exactly once, in the next user message.
    """
    problems: list[str] = []
    open_ids: list[str] = []
    previous = None
    for index, message in enumerate(messages):
        role = message["role"]
        content = message["content"]
        blocks: list[Any] = [] if isinstance(content, str) else list(content)

        def field(block: object, name: str) -> Any:
            if isinstance(block, dict):
                return cast("dict[str, Any]", block).get(name)
            return getattr(block, name, None)

        def kind(block: object) -> Any:
            return field(block, "type")

        if role == "user":
            if previous == "user":
                problems.append(f"message {index}: two user messages in a row")
            answered = [field(b, "tool_use_id") for b in blocks if kind(b) == "tool_result"]
            if sorted(answered, key=repr) != sorted(open_ids, key=repr):
                problems.append(f"message {index}: answers {answered}, expected {open_ids}")
            open_ids = []
        else:
            if open_ids and previous == "assistant":
                problems.append(
                    f"message {index}: tool_use {open_ids} not answered before more assistant output"
                )
            open_ids = [field(b, "id") for b in blocks if kind(b) == "tool_use"]
            if not all(
                isinstance(cast(object, tool_use_id), str) and tool_use_id for tool_use_id in open_ids
            ):
                problems.append(f"message {index}: a tool_use without an id")
            if len(set(open_ids)) != len(open_ids):
                problems.append(f"message {index}: two tool_use blocks share an id")
        previous = role
    if open_ids:
        problems.append(f"tool_use {open_ids} never answered")
    return problems
