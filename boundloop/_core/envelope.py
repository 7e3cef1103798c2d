"""The task envelope: a new run's state from a goal or a history, ids and caller metadata."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from .._base.recorded import is_sdk_object
from ..checkpoint.store import check_task_id
from ..errors import ConfigurationError
from ..records import Provenance
from ..state import LoopState
from ..transcript import append_user, transcript_errors

if TYPE_CHECKING:
    from anthropic.types import MessageParam


def new_state(
    goal: str | None,
    *,
    task_id: str | None,
    trace_id: str | None,
    metadata: Mapping[str, object] | None,
    messages: Sequence[MessageParam] | None,
    provenance: Provenance,
    model_settings: Mapping[str, Any] | None = None,
) -> LoopState:
    """The state a run starts from.

    Raises:
        ConfigurationError: no goal and no messages, an invalid history, metadata that is not
            a JSON object, an empty trace id.
        InvalidTaskId: `task_id` is empty, too long or holds a control character.
    """
    if goal is not None and (not isinstance(cast(object, goal), str) or not goal.strip()):
        raise ConfigurationError("goal must be a non-empty string")
    history = _history(messages)
    if goal is None and not history:
        raise ConfigurationError("give the run a goal, or messages to start from")
    if goal is not None and history:
        append_user(history, [{"type": "text", "text": goal}])
    elif goal is not None:
        history.append({"role": "user", "content": goal})
    elif history[-1]["role"] != "user":
        raise ConfigurationError("messages must end with a user message when there is no goal")
    if task_id is not None:
        check_task_id(task_id)
    if trace_id is not None and (not isinstance(cast(object, trace_id), str) or not trace_id.strip()):
        raise ConfigurationError(f"trace_id must be a non-empty string, got {trace_id!r}")
    return LoopState(
        task_id=task_id or _random_id(),
        trace_id=trace_id or _random_id(),
        goal=goal if goal is not None else _last_user_text(history),
        started_at=time.time(),
        metadata=_metadata(metadata),
        provenance=provenance,
        model_settings=dict(model_settings or {}),
        messages=history,
        opening=len(history),
    )


def _random_id() -> str:
    """128 random bits as 32 hex digits: a uuid4's hex without its version bits, a fifth of the cost,
    and a valid W3C trace id."""
    return os.urandom(16).hex()


def _history(messages: Sequence[MessageParam] | None) -> list[MessageParam]:
    if messages is None:
        return []
    if isinstance(cast(object, messages), str | bytes | Mapping):
        raise ConfigurationError("messages takes a list of Messages API message params")
    history = list(messages)
    shapes = [
        m
        for m in history
        if not isinstance(cast(object, m), Mapping) or m.get("role") not in ("user", "assistant")
    ]
    if shapes:
        raise ConfigurationError(
            f"messages holds something that is not a user or assistant message: {shapes[0]!r}"
        )
    if history and history[0]["role"] != "user":
        raise ConfigurationError("messages must start with a user message")
    problems = transcript_errors(history)
    # A history may end with the user's turn; what it must not do is leave a tool_use unanswered.
    if problems:
        raise ConfigurationError(f"messages is not a valid transcript: {problems[0]}")
    return [_plain(message) for message in history]


def _plain(message: MessageParam) -> MessageParam:
    """The message as JSON: SDK content blocks (a response's `content` passed on) dumped once
    here, not by the SDK on every request that carries them."""
    content = message["content"]
    if isinstance(content, str) or not any(is_sdk_object(block) for block in content):
        return message
    from .blocks import plain_block  # the SDK is loaded: an SDK object is at hand

    return cast("MessageParam", {**message, "content": [plain_block(block) for block in content]})


def _metadata(metadata: Mapping[str, object] | None) -> dict[str, object]:
    if metadata is None:
        return {}
    if not isinstance(cast(object, metadata), Mapping) or not all(
        isinstance(cast(object, k), str) for k in metadata
    ):
        raise ConfigurationError("metadata must be a mapping with str keys")
    try:
        return cast(dict[str, object], json.loads(json.dumps(dict(metadata), allow_nan=False)))
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"metadata must hold JSON values only: {exc}") from None


def _last_user_text(history: list[MessageParam]) -> str:
    content = history[-1]["content"]
    if isinstance(content, str):
        return content
    return " ".join(str(block.get("text", "")) for block in content if isinstance(block, dict))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
