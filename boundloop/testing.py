"""The embedded models: `ScriptedClient`, `parse_message` and `SimulatedClient`.

For demos, tests and evals: scripted Messages API responses served in order, as real
`anthropic.types.Message` objects, with every request recorded; and a seeded simulated model
behind the real `AsyncAnthropic` (`SimulatedClient`, loaded on first use with the SDK).
"""

from __future__ import annotations

import functools
import inspect
import itertools
import typing
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias, TypeGuard, cast, final

from .errors import ConfigurationError, ScriptExhausted

if TYPE_CHECKING:  # at run time, imported where a response is built: `import boundloop` stays light
    from anthropic.types import Message

    from ._base.simulated import SimulatedClient as SimulatedClient
    from .platforms import Platform

__all__ = [
    "Request",
    "ScriptItem",
    "ScriptedClient",
    "Served",
    "SimulatedClient",
    "parse_message",
]

Request: TypeAlias = Mapping[str, object]
"""The keyword arguments of one `messages.create` call."""
Served: TypeAlias = "Mapping[str, object] | Message"
"""What a function of the script returns (or its coroutine does): a response dict or a `Message`."""
ScriptItem: TypeAlias = (
    "Mapping[str, object] | Message | BaseException | Callable[[Request], Served | Awaitable[Served]]"
)
"""A scripted response: a Messages API response dict, a `Message`, an exception to raise, or a
function of the request returning one of the first two, a plain function or an `async def` one."""


def parse_message(raw: Mapping[str, object] | Message, *, model: str = "scripted") -> Message:
    """Validate a Messages API response dict into an `anthropic.types.Message`.

    Every block is checked against the SDK's model of its type: the `ContentBlock` union
    (text, thinking, redacted_thinking, tool_use, server_tool_use and the server tools'
    result blocks, container_upload) or, for a type only the beta API sends (compaction,
    mcp_tool_use, mcp_tool_result, ...), the beta `BetaContentBlock` union. The message is
    then built as the SDK builds a response it received, so a beta block reaches the loop
    exactly as it would from `AsyncAnthropic` (with its fields kept). The envelope (`id`,
    `type`, `role`, `model`, `usage`) is filled in when absent, and `tool_use` blocks without
    an `id` get one (`toolu_scripted_<position in content>`; a `ScriptedClient` numbers them
    across its script instead), so scripts stay short. `stop_reason` is required and kept as
    given, as the SDK does, so a value this SDK does not know reaches the router.

    Raises:
        ConfigurationError: the item is not a valid Messages API response: not a dict, no
            `stop_reason`, a block without `type`, of a type neither union knows, or not
            valid for its type (a tool_use without name or input, ...).
    """
    import pydantic
    from anthropic._models import construct_type  # how the SDK builds the responses it receives
    from anthropic.types import Message

    if isinstance(raw, Message):
        return raw
    if not isinstance(cast(object, raw), Mapping):
        raise ConfigurationError(
            f"scripted response is not a valid Message: a response dict or a Message, not "
            f"{type(raw).__name__} {_short(raw)}"
        )
    if "stop_reason" not in raw:
        raise ConfigurationError(f"scripted response is not a valid Message: no stop_reason in {_short(raw)}")
    body: dict[str, Any] = {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "model": model,
        "stop_sequence": None,
        "usage": {"input_tokens": 0, "output_tokens": 0},
        **raw,
    }
    blocks = body.get("content", [])
    if not isinstance(blocks, list | tuple):
        raise ConfigurationError(
            f"scripted response is not a valid Message: its content is not a list: {_short(blocks)}"
        )
    content = [_block(index, block) for index, block in enumerate(cast(Sequence[object], blocks))]
    stop_reason = body.pop("stop_reason")
    try:  # the envelope: usage, container, stop_details ...
        Message.model_validate({**body, "content": [], "stop_reason": None})
    except pydantic.ValidationError as exc:
        raise ConfigurationError(f"scripted response is not a valid Message: {exc}") from exc
    message = cast(
        Message, construct_type(type_=Message, value={**body, "content": content, "stop_reason": None})
    )
    # Unknown stop reasons pass through unvalidated, exactly as the SDK's lenient parser does.
    object.__setattr__(message, "stop_reason", stop_reason)
    return message


def _block(index: int, block: object) -> dict[str, Any]:
    """A content block checked against the SDK's model of its type (beta types included)."""
    import pydantic

    if not isinstance(block, Mapping):
        raise ConfigurationError(
            f"scripted response is not a valid Message: content[{index}] is not a block object: "
            f"{_short(block)}"
        )
    data = dict(cast(Mapping[str, Any], block))
    kind = data.get("type")
    if not isinstance(kind, str):
        raise ConfigurationError(
            f"scripted response is not a valid Message: content[{index}] has no type: {_short(data)}"
        )
    if kind == "tool_use":
        data.setdefault("id", f"toolu_scripted_{index}")
    models = _block_models()
    model = models.get(kind)
    if model is None:
        known = ", ".join(sorted(models))
        raise ConfigurationError(
            f"scripted response is not a valid Message: content[{index}] has type {kind!r}, "
            f"which the SDK does not know: {known}"
        )
    try:
        model.model_validate(data)
    except pydantic.ValidationError as exc:
        raise ConfigurationError(
            f"scripted response is not a valid Message: content[{index}] is not a valid {kind} block: {exc}"
        ) from exc
    return data


@functools.cache
def _block_models() -> dict[str, Any]:
    """Block type -> the SDK's model of it (the plain API's where both have one)."""
    from anthropic.types import ContentBlock
    from anthropic.types.beta import BetaContentBlock

    models: dict[str, Any] = {}
    for union in (BetaContentBlock, ContentBlock):  # the plain API's model wins
        for model in typing.get_args(typing.get_args(union)[0]):
            for kind in typing.get_args(model.model_fields["type"].annotation):
                models[kind] = model
    return models


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@final
class ScriptedClient:
    """A deterministic stand-in for `AsyncAnthropic`: serves scripted responses in order.

    Every request is recorded in `requests` (keyword dicts, in order; `messages.create` and
    `beta.messages.create` serve the same script, and so do `messages.stream` and
    `beta.messages.stream`: each response as the API streams it, text split after each run of
    whitespace, docs/streaming.md). Dict responses are
    validated into real `anthropic.types.Message` objects up front, so a bad script fails at
    construction, not mid-run. The ids a response dict leaves out are numbered per client, in
    the order served: `msg_scripted_1`, ... for responses, `toolu_scripted_1`, ... for
    `tool_use` blocks, so no two tool calls of a script share an id. `platform` is the platform
    the loop takes it for (`boundloop.platforms`): `ScriptedClient(script, platform="bedrock")`
    builds and prices a loop as on Amazon Bedrock's client.
    """

    def __init__(
        self, responses: Iterable[ScriptItem], *, model: str = "scripted", platform: Platform = "anthropic"
    ) -> None:
        self.platform: Platform = platform
        self._script: list[ScriptItem] = []
        self._unnamed: dict[int, tuple[int, ...]] = {}
        """Script position -> the positions of a response dict's `tool_use` blocks without an id."""
        for item in responses:
            if _is_response_dict(item):
                unnamed = _unnamed_tool_uses(item)
                if unnamed:
                    self._unnamed[len(self._script)] = unnamed
            if not isinstance(item, BaseException) and not callable(
                item
            ):  # a function is checked when served
                item = parse_message(item, model=model)
            self._script.append(item)
        self._model = model
        self._served = 0
        self._ids = itertools.count(1)
        self._tool_ids = itertools.count(1)
        self.requests: list[dict[str, Any]] = []
        self.messages = _ScriptedMessages(self._create, beta=False)
        self.beta = _ScriptedBeta(_ScriptedMessages(self._create, beta=True))
        """`beta.messages.create`, where settings only the beta API takes send a request: the
        same script, the same `requests` (with its `betas`, if any)."""

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
        position = self._served
        item = self._script[position]
        self._served += 1
        if isinstance(item, BaseException):
            raise item
        unnamed = self._unnamed.get(position, ())
        if callable(item) and not isinstance(item, Message):
            served = item(request)
            if inspect.isawaitable(served):  # an `async def` function
                served = await served
            unnamed = _unnamed_tool_uses(served) if _is_response_dict(served) else ()
            item = served
        message = parse_message(item, model=str(request.get("model", self._model)))
        update: dict[str, object] = {}
        if message.id == "msg_scripted":
            update["id"] = f"msg_scripted_{next(self._ids)}"
        if unnamed:
            content = list(message.content)
            for index in unnamed:
                content[index] = content[index].model_copy(
                    update={"id": f"toolu_scripted_{next(self._tool_ids)}"}
                )
            update["content"] = content
        return message.model_copy(update=update) if update else message


def _is_response_dict(item: object) -> TypeGuard[Mapping[str, object]]:
    return isinstance(item, Mapping)


def _unnamed_tool_uses(raw: Mapping[str, object]) -> tuple[int, ...]:
    """The positions in a response dict's `content` of the `tool_use` blocks without an `id`."""
    content = raw.get("content")
    if not isinstance(content, Sequence) or isinstance(content, str | bytes):
        return ()
    return tuple(
        index
        for index, block in enumerate(cast(Sequence[object], content))
        if isinstance(block, Mapping)
        and cast(Mapping[str, object], block).get("type") == "tool_use"
        and "id" not in block
    )


@final
class _ScriptedMessages:
    def __init__(self, create: Callable[..., Awaitable[Message]], *, beta: bool) -> None:
        self._create = create
        self._beta = beta

    @property
    def create(self) -> Callable[..., Awaitable[Message]]:
        return self._create

    def stream(self, **request: Any) -> Any:
        """The SDK's stream manager serving the next response as its stream events
        (boundloop/_base/scripted_stream.py: how a response is split into deltas)."""
        from ._base.scripted_stream import stream_manager

        return stream_manager(self._create, request, beta=self._beta)


@final
class _ScriptedBeta:
    def __init__(self, messages: _ScriptedMessages) -> None:
        self.messages = messages


def __getattr__(name: str) -> object:
    """`SimulatedClient`, imported on first use (it loads the SDK, which `ScriptedClient` does not)."""
    if name == "SimulatedClient":
        from ._base.simulated import SimulatedClient
        from ._lazy import claim

        claim(__name__, SimulatedClient)
        globals()[name] = SimulatedClient
        return SimulatedClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
