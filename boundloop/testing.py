"""The embedded deterministic model: `ScriptedClient` and `parse_message`.

For demos, tests and evals: scripted Messages API responses served in order, as real
`anthropic.types.Message` objects, with every request recorded.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, TypeGuard, final

from .errors import ConfigurationError, ScriptExhausted

if TYPE_CHECKING:  # at run time, imported where a response is built: `import boundloop` stays light
    from anthropic.types import Message

Request: TypeAlias = Mapping[str, object]
"""The keyword arguments of one `messages.create` call."""
ScriptItem: TypeAlias = (
    "Mapping[str, object] | Message | BaseException | Callable[[Request], Mapping[str, object] | Message]"
)
"""A scripted response: a Messages API response dict, a `Message`, an exception to raise, or a
function of the request returning one of the first two."""


def parse_message(raw: Mapping[str, object] | Message, *, model: str = "scripted") -> Message:
    """Validate a Messages API response dict into an `anthropic.types.Message`.

    The envelope (`id`, `type`, `role`, `model`, `usage`) is filled in when absent, and
    `tool_use` blocks without an `id` get one, so scripts stay short. `stop_reason` is kept
    as given, as the SDK does, so a value this SDK does not know reaches the router.

    Raises:
        ConfigurationError: the dict is not a valid Messages API response.
    """
    import pydantic
    from anthropic.types import Message

    if isinstance(raw, Message):
        return raw
    body: dict[str, Any] = {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": model,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
        **raw,
    }
    content = [dict(block) for block in body.get("content", [])]  # pyright: ignore[reportUnknownArgumentType, reportUnknownVariableType]
    for index, block in enumerate(content):
        if block.get("type") == "tool_use":
            block.setdefault("id", f"toolu_scripted_{index}")
    body["content"] = content
    stop_reason = body.pop("stop_reason", None)
    try:
        message = Message.model_validate({**body, "stop_reason": None})
    except pydantic.ValidationError as exc:
        raise ConfigurationError(f"scripted response is not a valid Message: {exc}") from exc
    # Unknown stop reasons pass through unvalidated, exactly as the SDK's lenient parser does.
    object.__setattr__(message, "stop_reason", stop_reason)
    return message


@final
class ScriptedClient:
    """A deterministic stand-in for `AsyncAnthropic`: serves scripted responses in order.

    Every request is recorded in `requests` (keyword dicts, in order). Dict responses are
    validated into real `anthropic.types.Message` objects up front, so a bad script fails at
    construction, not mid-run.
    """

    def __init__(self, responses: Iterable[ScriptItem], *, model: str = "scripted") -> None:
        self._script: list[ScriptItem] = [
            parse_message(item, model=model) if _is_response_dict(item) else item for item in responses
        ]
        self._model = model
        self._served = 0
        self._ids = itertools.count(1)
        self.requests: list[dict[str, Any]] = []
        self.messages = _ScriptedMessages(self._create)

    @property
    def remaining(self) -> int:
        """Responses not yet served."""
        return len(self._script) - self._served

    async def _create(self, **request: Any) -> Message:
        from anthropic.types import Message

        # Snapshot the message list: the loop's transcript keeps growing after the call returns
        # (messages themselves are never mutated once sent).
        self.requests.append({**request, "messages": list(request.get("messages", ()))})
        if self._served >= len(self._script):
            raise ScriptExhausted(self._served)
        item = self._script[self._served]
        self._served += 1
        if isinstance(item, BaseException):
            raise item
        if callable(item) and not isinstance(item, Message):
            item = item(request)
        message = parse_message(item, model=str(request.get("model", self._model)))
        if message.id == "msg_scripted":
            message = message.model_copy(update={"id": f"msg_scripted_{next(self._ids)}"})
        return message


def _is_response_dict(item: ScriptItem) -> TypeGuard[Mapping[str, object]]:
    return isinstance(item, Mapping)


@final
class _ScriptedMessages:
    def __init__(self, create: Callable[..., Awaitable[Message]]) -> None:
        self._create = create

    @property
    def create(self) -> Callable[..., Awaitable[Message]]:
        return self._create
