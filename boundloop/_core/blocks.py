"""A response's content as the transcript keeps it: JSON, exactly the fields the API sent.

The SDK turns a content block object back into JSON on every request that carries it, so a
transcript of objects costs a dump per block per turn, growing with the run. Dumped once here,
the blocks are plain dicts from then on: the same JSON a checkpoint holds, so a fresh run and
a resumed one send identical requests. A `tool_use` or `text` block with only its usual fields
is copied by hand (its `input` dict shared: tool functions get copies; a `tool_use` with more
fields, such as `caller`, field by field, nested objects dumped); any other block — thinking
with its signature, server tool blocks, citations, a block type or field this SDK does not
model — is dumped by the SDK's own model with `exclude_unset`, which keeps exactly the keys and
values the API sent (extras included; the SDK does not keep the keys' order, so `type` comes
first and the rest in the SDK's field order, then the extras as received).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Final, cast

from anthropic.types import AssistantMessageParam, ContentBlock, Message, TextBlock, ToolUseBlock
from pydantic import BaseModel

from .._base.recorded import is_sdk_object, json_default
from .._base.transcript_json import ENVELOPE, response_of
from ..records import ModelResponse

_TOOL_USE_FIELDS: Final = frozenset({"type", "id", "name", "input"})
_TEXT_FIELDS: Final = frozenset({"type", "text"})


def assistant_message(content: Sequence[ContentBlock]) -> AssistantMessageParam:
    """The response as the transcript's assistant message: each block as the JSON the API sent."""
    return received_turn(content)[0]


def received_turn(content: Sequence[ContentBlock]) -> tuple[AssistantMessageParam, list[BlockShape]]:
    """`assistant_message`, and each block's `BlockShape` read in the same pass: what the check
    of the next request (`_core/invariant.py`) compares the transcript's message with."""
    blocks: list[Any] = []  # each a `ContentBlockParam`
    shapes: list[BlockShape] = []
    for block in content:
        json, shape = _block_json(block)
        blocks.append(json)
        shapes.append(shape)
    return {"role": "assistant", "content": blocks}, shapes


def response_record(response: Message, content: object) -> ModelResponse:
    """The record the state keeps of a response: its envelope as the JSON the API sent, and
    `content`, the transcript's blocks made from it (the same list: not a second copy).

    The record's own fields are read off the response and the rest of its envelope dumped
    once, in the SDK's order; a field of the wrong type is the `ValueError` of
    `response_of`, which reads the record from JSON.
    """
    sent = response.model_fields_set
    id_ = response.id if "id" in sent else None
    model = response.model if "model" in sent else None
    stop_reason = response.stop_reason  # as sent, a value the SDK does not know too
    stop_sequence = response.stop_sequence if "stop_sequence" in sent else None
    if (
        type(id_) is not str
        or type(model) is not str
        or (stop_reason is not None and type(stop_reason) is not str)
        or (stop_sequence is not None and type(stop_sequence) is not str)
    ):  # read as JSON is: the record, or the error naming the field
        envelope = _sent(response, _OWN)
        envelope["stop_reason"] = stop_reason
        envelope["usage"] = _sent(response.usage, _OWN)
        return response_of(envelope, cast(list[dict[str, Any]], content))
    return ModelResponse.of(
        id=id_,
        model=model,
        stop_reason=stop_reason,
        stop_sequence=stop_sequence,
        content_json=cast(list[dict[str, Any]], content),
        usage_json=_sent(response.usage, _OWN),
        extra_json=_sent(response, ENVELOPE) or None,
    )


def _sent(model: BaseModel, skip: frozenset[str]) -> dict[str, Any]:
    """The fields the API sent of an SDK object but those in `skip`, as JSON, in the SDK's
    order: a nested object dumped with `exclude_unset`, as `model_dump` would (~3x faster than
    it, which walks every field); its extra fields last."""
    sent = model.model_fields_set
    extra = model.model_extra
    if sent <= skip:  # nothing else sent (a response's usual envelope): no walk
        return dict(extra) if extra else {}
    key = (type(model), skip)
    names = _FIELDS.get(key)
    if names is None:
        names = _FIELDS[key] = tuple(name for name in type(model).model_fields if name not in skip)
    fields = {
        # A string or a count as it is, without a call (the usual value).
        name: value if type(value := getattr(model, name)) in _PLAIN else _json(value)
        for name in names
        if name in sent
    }
    return fields | extra if extra else fields


_TYPE: Final = frozenset({"type"})
"""A block's field `_block_json` writes first, as the API sends it."""
_OWN: Final = frozenset({"content", "usage"})
"""A response's fields `response_record` takes apart from the rest of its envelope."""
_FIELDS: dict[tuple[type[BaseModel], frozenset[str]], tuple[str, ...]] = {}
"""An SDK type's field names but those skipped, in its order, by (type, skipped)."""
_PLAIN: Final = frozenset({str, int, float, bool, type(None)})


def _json(value: object) -> object:
    if type(value) in _PLAIN:
        return value
    if isinstance(value, list):
        return [_json(item) for item in cast(list[object], value)]
    return json_default(value) if is_sdk_object(value) else value


def plain_block(block: object) -> object:
    """A content block as JSON: an SDK object dumped as above (once), anything else as itself."""
    return _block_json(cast(ContentBlock, block))[0] if is_sdk_object(block) else block


BlockShape = tuple[object, AbstractSet[str]]
"""A response block's `type` and the names of the fields the API sent (extra fields included):
the SDK block's own set, not a copy."""


def _block_json(block: ContentBlock) -> tuple[dict[str, Any], BlockShape]:
    """The block as JSON, and its `BlockShape` (read off the SDK block, not off the JSON)."""
    fields = block.model_fields_set
    extra = block.model_extra
    if not extra:  # a field the SDK does not model: dumped below, with the rest
        if isinstance(block, ToolUseBlock) and block.type == "tool_use":
            if fields <= _TOOL_USE_FIELDS:
                json = {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
                return json, ("tool_use", fields)
            # More fields sent (`caller`, `toolset_name`, null or not): read one by one, the
            # `input` dict shared, not copied as a dump would.
            return {"type": "tool_use", **_sent(block, _TYPE)}, ("tool_use", fields)
        if isinstance(block, TextBlock) and block.type == "text" and fields <= _TEXT_FIELDS:
            return {"type": "text", "text": block.text}, ("text", fields)
    # `type` first, as the API sends it; a block type the SDK does not know (built as the
    # union's first model, its fields kept as extras) keeps its own `type` and every field.
    dumped = block.model_dump(mode="json", exclude_unset=True, by_alias=True, warnings=False)
    kind = getattr(block, "type", None)  # every content block has one; a stray model may not
    return (dumped if kind is None else {"type": kind, **dumped}), block_shape(block)


def block_shape(block: object) -> BlockShape:
    """A block's `BlockShape`: an SDK block's `type` and the fields it came with (extra fields
    included); a mapping's keys."""
    kind: object = getattr(block, "type", None)
    if isinstance(block, BaseModel):
        extra = block.model_extra
        return kind, (block.model_fields_set | extra.keys() if extra else block.model_fields_set)
    fields = set(cast(Mapping[str, object], block)) if isinstance(block, Mapping) else set[str]()
    return kind, fields


def field_of(item: object, name: str) -> object:
    """A field of a block (or of usage) as a dict, an SDK model or any mapping holds it: a dict's
    key; a model's field (in its `__dict__`), else one of its extra fields (read without a
    `getattr` of an absent name, which pydantic answers by raising, at ~2 µs a call); None
    when it has none."""
    if type(item) is dict:  # the transcript's blocks: plain dicts, past the ABC checks below
        return item.get(name)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if isinstance(item, BaseModel):
        values: Mapping[str, object] = item.__dict__
        if name in values:
            return values[name]
        extra = item.model_extra
        return extra.get(name) if extra else None
    if isinstance(item, Mapping):
        return cast(Mapping[str, object], item).get(name)
    return getattr(item, name, None)
