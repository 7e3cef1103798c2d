"""The transcript and the responses of `LoopState` as JSON, without loading pydantic or the SDK.

Each field carries its own validator and serialiser (`_Plain`), so pydantic never builds a
schema of the SDK's types when `LoopState`'s adapter is built; type checkers still see them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, TypeAlias, final

from .recorded import is_sdk_object, json_default

if TYPE_CHECKING:
    from anthropic.types import Message, MessageParam
    from pydantic_core import CoreSchema


def _dump_messages(messages: list[MessageParam]) -> list[dict[str, Any]]:
    """Messages with SDK content blocks dumped exactly as the API sent them."""
    plain: list[dict[str, Any]] = []
    for message in messages:
        content = message["content"]
        if isinstance(content, str):
            plain.append(dict(message))
        else:
            plain.append({**message, "content": [_plain_block(block) for block in content]})
    return plain


def _plain_block(block: object) -> object:
    """An SDK block as its JSON dict; a dict block as itself."""
    return json_default(block) if is_sdk_object(block) else block


def _load_messages(raw: object) -> list[MessageParam]:
    if not isinstance(raw, list):
        raise ValueError("messages must be a list")
    for message in raw:  # pyright: ignore[reportUnknownVariableType]
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):  # pyright: ignore[reportUnknownMemberType]
            raise ValueError(f"not a message: {message!r}")
    return raw  # pyright: ignore[reportUnknownVariableType]


def _load_responses(raw: object) -> list[Message]:
    """Stored responses, rebuilt as the SDK builds them (leniently: an unknown stop_reason stays)."""
    from anthropic.types import Message

    if not isinstance(raw, list):
        raise ValueError("responses must be a list")
    messages: list[Message] = []
    for item in raw:  # pyright: ignore[reportUnknownVariableType]
        if isinstance(item, Message):
            messages.append(item)
        elif isinstance(item, dict):
            messages.append(Message.model_construct(**item))  # pyright: ignore[reportUnknownArgumentType]
        else:
            raise ValueError(f"not a Message: {item!r}")
    return messages


def _dump_responses(responses: list[Message]) -> list[object]:
    return [json_default(response) for response in responses]


@final
class _Plain:
    """pydantic metadata: validate with `load`, serialise with `dump`, and build no schema of
    the annotated type (pydantic's `PlainValidator` would: of every SDK type in a message)."""

    __slots__ = ("_dump", "_load")

    def __init__(self, load: Callable[[object], object], dump: Callable[[Any], object]) -> None:
        self._load = load
        self._dump = dump

    def __get_pydantic_core_schema__(self, source: object, handler: object) -> CoreSchema:
        from pydantic_core import core_schema

        return core_schema.no_info_plain_validator_function(
            self._load, serialization=core_schema.plain_serializer_function_ser_schema(self._dump)
        )


if TYPE_CHECKING:
    Messages: TypeAlias = list[MessageParam]
    Responses: TypeAlias = list[Message]
else:  # what pydantic reads when the adapter is built; no SDK type is needed for it
    Messages = Annotated[list[Any], _Plain(_load_messages, _dump_messages)]
    Responses = Annotated[list[Any], _Plain(_load_responses, _dump_responses)]
