"""The transcript and the responses of `LoopState` as JSON, without loading pydantic or the SDK.

Each field carries its own validator and serialiser (`_Plain`), so pydantic never builds a
schema of the SDK's types when `LoopState`'s adapter is built; type checkers still see them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Final, TypeAlias, cast, final

from ..records import ModelResponse
from .recorded import is_sdk_object, json_default

if TYPE_CHECKING:
    from anthropic.types import MessageParam
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


ENVELOPE: Final = frozenset(
    {"id", "type", "role", "model", "content", "stop_reason", "stop_sequence", "usage"}
)
"""The fields of a response `ModelResponse` keeps in fields of its own (or knows: type, role)."""


def response_of(data: Mapping[str, Any], content: list[dict[str, Any]]) -> ModelResponse:
    """A response's record from its JSON (`content`: its blocks, as the transcript holds them).

    Raises:
        ValueError: a field has the wrong type.
    """
    id_, model, usage = data.get("id"), data.get("model"), data.get("usage")
    stop_reason, stop_sequence = data.get("stop_reason"), data.get("stop_sequence")
    if not isinstance(id_, str) or not isinstance(model, str) or not isinstance(usage, dict):
        raise ValueError(f"not a Message: {dict(data)!r}")
    if not (stop_reason is None or isinstance(stop_reason, str)) or not (
        stop_sequence is None or isinstance(stop_sequence, str)
    ):
        raise ValueError(f"not a Message: {dict(data)!r}")
    extra = {key: value for key, value in data.items() if key not in ENVELOPE}
    return ModelResponse.of(
        id=id_,
        model=model,
        stop_reason=stop_reason,
        stop_sequence=stop_sequence,
        content_json=content,
        usage_json=cast(dict[str, Any], usage),
        extra_json=extra or None,
    )


def _load_responses(raw: object) -> list[ModelResponse]:
    """Stored responses (each the JSON the API sent, as `ModelResponse.json` writes it)."""
    if not isinstance(raw, list):
        raise ValueError("responses must be a list")
    responses: list[ModelResponse] = []
    for each in cast(list[object], raw):
        item = each
        if isinstance(item, ModelResponse):
            responses.append(item)
            continue
        if is_sdk_object(item):  # an SDK `Message`, given to the state as it is
            item = json_default(item)
        if not isinstance(item, dict):
            raise ValueError(f"not a Message: {item!r}")
        data = cast(dict[str, Any], item)
        content = data.get("content")
        if not isinstance(content, list):
            raise ValueError(f"not a Message: its content is not a list: {data!r}")
        responses.append(response_of(data, cast(list[dict[str, Any]], content)))
    return responses


def _dump_responses(responses: list[ModelResponse]) -> list[object]:
    # An SDK `Message` given to a state by hand is written as the API sent it, as a record is.
    return [json_default(response) if is_sdk_object(response) else response.json() for response in responses]


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
    Responses: TypeAlias = list[ModelResponse]
else:  # what pydantic reads when the adapter is built; no SDK type is needed for it
    Messages = Annotated[list[Any], _Plain(_load_messages, _dump_messages)]
    Responses = Annotated[list[Any], _Plain(_load_responses, _dump_responses)]
