"""The rules every request the loop builds keeps, checked where the request is built.

The Messages API rejects a request whose transcript is not one it could have produced. The
loop only appends to the transcript, so each rule is a fact about what it appends:

- each assistant turn is sent back as received: the response's blocks, in order, each of
  its type and with every field the API sent (a block type the SDK does not model included);
- no user turn follows an assistant turn whose last block is a `server_tool_use` (or
  `mcp_tool_use`) without its result, unless the turn also calls client tools: the API runs
  such a call on a continuation, or, when the turn waits for client tools (a tool search
  ending a turn with a client `tool_use`), after their results, opening its next response
  with the call's result;
- a user turn after an assistant turn with client `tool_use` blocks opens with their
  `tool_result` blocks, one per call, ids matching, before anything else;
- the last response's `container` is sent as `container` with the next request;
- no 1-hour cache breakpoint comes after a 5-minute one (`_base/cache.py`'s `TTLOrder`; a
  run's check reads the order only when the request may hold a 1-hour breakpoint, as
  `add_breakpoints` tells: one that holds none cannot break it).

Consecutive messages of one role are one turn to the API (it joins them), and are read so.

A broken rule is a bug: `check_request` raises `InvalidRequest` and the request is not sent.
The transcript only grows (its last user turn replaced by a longer one, a trailing turn
dropped), so a `RequestChecker` checks each request from where the previous one it checked
ended: a run's checks cost what its transcript holds, once, not once per request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, cast, final

from anthropic.types import Message, MessageParam
from pydantic import BaseModel

from .._base.cache import TTLOrder, ttl_order_problem
from ..errors import InvalidRequest
from .blocks import BlockShape, block_shape, field_of

SERVER_CALLS: Final = frozenset({"server_tool_use", "mcp_tool_use"})
"""Blocks of a call the API runs itself; its result block comes in the same assistant turn."""


def unfinished_server_call(content: Sequence[object]) -> bool:
    """The turn ends in a server call without its result and calls no client tool: only a
    continuation may follow it (with a client `tool_use`, their results may: the API then
    answers the server call first in the next response)."""
    if not content:
        return False
    last = content[-1]
    kind = field_of(last, "type")
    if kind not in SERVER_CALLS:
        return False
    call_id = field_of(last, "id")
    return not any(
        field_of(block, "tool_use_id") == call_id or field_of(block, "type") == "tool_use"
        for block in content
    )


def drop_unfinished_server_turns(messages: list[MessageParam]) -> None:
    """Drop the trailing assistant turn when it ends in a server call without its result.

    The API runs a paused server call only on a continuation: a user turn after it is a 400.
    Before the final-answer note or a nudge the unfinished turn is dropped whole (a turn is sent
    as received or not at all; consecutive assistant messages are one turn, as the API reads
    them); the answer is asked from the transcript before it.
    """
    start = len(messages)
    while start > 0 and messages[start - 1]["role"] == "assistant":
        start -= 1
    blocks: list[object] = []
    for message in messages[start:]:
        content = message["content"]
        blocks += [{"type": "text"}] if isinstance(content, str) else list(content)
    if unfinished_server_call(blocks):
        del messages[start:]


def container_id(response: Message | None) -> str | None:
    """The id of the response's `container` (code execution's sandbox), when it has one."""
    found = getattr(getattr(response, "container", None), "id", None)
    return found if isinstance(found, str) and found else None


@final
class ResponseShape:
    """What the check of the next request reads of a response: its container's id, and each
    content block's type and the names of the fields the API sent (the SDK block's own set,
    not a copy). A run keeps this once the response is validated, and lets the SDK `Message`
    go: its blocks, usage and envelope objects (about 5 KiB for a turn of two calls) are not
    held while the turn's tools run."""

    __slots__ = ("blocks", "container", "message")

    def __init__(
        self, response: Message, blocks: list[BlockShape] | None = None, *, message: Message | None = None
    ) -> None:
        self.container = container_id(response)
        """`container_id` of the response."""
        self.blocks = [block_shape(block) for block in response.content] if blocks is None else blocks
        """Each block's `type` and the fields it came with (extra fields included): `blocks`
        when given (`received_turn` reads them as it makes the transcript's message)."""
        self.message = message
        """The response itself while its validation reads it (a shape made as it is received,
        `_core/propose.py`); None from then on."""


@final
class RequestChecker:
    """`check_request` for a run's requests in turn, each from where the one before ended."""

    __slots__ = ("_count", "_size", "_tail", "_ttl")

    def __init__(self) -> None:
        self._ttl: TTLOrder | None = None
        """The TTL order check, reading each message once; None: not read with the last request
        (or none checked yet)."""
        self._count = 0
        self._tail: object = None
        self._size = -1
        """How many blocks the tail held: a tail the loop extended in place is checked again."""

    def check(
        self,
        request: Mapping[str, Any],
        last: Message | ResponseShape | None,
        received: object,
        *,
        hour: bool = True,
    ) -> None:
        """`check_request`, from the first message the previous request did not hold as is.
        `hour=False`: the request holds no 1-hour cache breakpoint (`add_breakpoints` read it
        all), so the TTL order is not read; the next request that may hold one has every
        message read.

        Raises:
            InvalidRequest: the first rule the request breaks.
        """
        messages: list[object] = request.get("messages") or []
        count = self._count
        start = 0
        if 0 < count <= len(messages) and messages[count - 1] is self._tail:
            start = count if _size(self._tail) == self._size else count - 1
        problem = request_problem(request, last, received, start=start)
        if not hour:
            self._ttl = None  # not read with this request: the next one that may hold one, read whole
        elif problem is None:
            if self._ttl is None:
                self._ttl = TTLOrder()
                start = 0
            problem = self._ttl.problem(request, start)
        if problem is not None:
            raise InvalidRequest(problem)
        self._count = len(messages)
        self._tail = messages[-1] if messages else None
        self._size = _size(self._tail)


def _size(message: object) -> int:
    """The number of blocks of a message (a string's content: 1)."""
    content = message.get("content") if type(message) is dict else field_of(message, "content")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return len(content) if isinstance(content, list) else 1  # pyright: ignore[reportUnknownArgumentType]


def check_request(request: Mapping[str, Any], last: Message | ResponseShape | None, received: object) -> None:
    """Check a whole request before it is sent (a run's `RequestChecker` checks its requests in
    turn, each from the first message the one before did not hold).

    Args:
        request: the keyword arguments of `messages.create`.
        last: the last response (or its shape), whose `container` the request must carry.
        received: the transcript's message made from `last` (its assistant turn), checked
            block by block against the response when the request holds it.

    Raises:
        InvalidRequest: the first rule the request breaks.
    """
    problem = request_problem(request, last, received) or ttl_order_problem(request)
    if problem is not None:
        raise InvalidRequest(problem)


def request_problem(
    request: Mapping[str, Any], last: Message | ResponseShape | None, received: object, *, start: int = 0
) -> str | None:
    """The first rule `request` breaks (in its messages from `start`), or None."""
    shape = last if last is None or isinstance(last, ResponseShape) else ResponseShape(last)
    container = None if shape is None else shape.container
    if container is not None and request.get("container") != container:
        return f"the last response's container {container!r} is not sent with the next request"
    messages: list[Mapping[str, Any]] = request.get("messages") or []
    first = min(max(start, 0), len(messages))
    while 0 < first < len(messages) and _joined(messages[first - 1], messages[first]):
        first -= 1  # from the first message of the turn `start` is in
    previous: Mapping[str, Any] | None = messages[first - 1] if first else None
    for index in range(first, len(messages)):
        message = messages[index]
        if message.get("role") == "assistant":
            if message is received and shape is not None:
                problem = _as_received(_plain(message.get("content")), shape)
                if problem is not None:
                    return f"messages[{index}]: {problem}"
        elif previous is not None and previous.get("role") == "assistant":
            problem = _answers(_turn(messages, index - 1, -1), _turn(messages, index, 1))
            if problem is not None:
                return f"messages[{index}]: {problem}"
        previous = message
    return None


def _joined(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Two messages the API reads as one turn: both the assistant's, or neither."""
    return (before.get("role") == "assistant") == (after.get("role") == "assistant")


def _turn(messages: list[Mapping[str, Any]], index: int, step: int) -> list[Mapping[str, object]]:
    """The blocks of the turn holding `messages[index]`: its messages (walked from `index` by
    `step`) joined, as the API joins consecutive messages of one role (a string's content: one
    text block). The usual turn is one message: its blocks as they are."""
    end = index + step
    while 0 <= end < len(messages) and _joined(messages[index], messages[end]):
        end += step
    if end == index + step:
        return _plain(messages[index].get("content"))
    joined: list[Mapping[str, object]] = []
    for position in sorted(range(index, end, step)):
        content = messages[position].get("content")
        joined += [{"type": "text"}] if isinstance(content, str) else _plain(content)
    return joined


def _answers(blocks: list[Mapping[str, object]], answers: list[Mapping[str, object]]) -> str | None:
    """What is wrong with a user turn (its blocks, `answers`) after an assistant turn (its
    `blocks`), or None."""
    if unfinished_server_call(blocks):
        return (
            f"a user turn follows the unfinished {blocks[-1].get('type')} "
            f"{blocks[-1].get('id')!r}: only its continuation may"
        )
    calls = [block.get("id") for block in blocks if block.get("type") == "tool_use"]
    count = len(calls)
    # The ids of the tool_result blocks among the first `count`: fewer than `count` when a
    # block there is not a tool_result, or the turn holds fewer blocks.
    head = [block.get("tool_use_id") for block in answers[:count] if block.get("type") == "tool_result"]
    if count and (
        len(head) != count
        or (head != calls and sorted(map(str, head)) != sorted(map(str, calls)))  # any order
    ):
        return f"the tool_use blocks {calls} are not answered first, once each (found {head})"
    for block in answers[count:]:
        if block.get("type") == "tool_result":
            return f"a tool_result for no tool_use of the turn before: {block.get('tool_use_id')!r}"
    return None


def _plain(content: object) -> list[Mapping[str, object]]:
    """A message's blocks, each as a mapping of its fields (the transcript's: the dicts as they
    are; a string's content: none)."""
    if not isinstance(content, list):
        return []
    blocks: list[Any] = content  # pyright: ignore[reportUnknownVariableType]
    for block in blocks:
        if type(block) is not dict:
            return [item if type(item) is dict else _fields(item) for item in blocks]
    return blocks  # the transcript's: plain dicts, read as they are


def _fields(block: object) -> Mapping[str, object]:
    if isinstance(block, Mapping):
        return cast(Mapping[str, object], block)
    if isinstance(block, BaseModel):
        return dict(block)  # its fields and extra fields
    return {}


def _as_received(sent_blocks: list[Mapping[str, object]], response: ResponseShape) -> str | None:
    """Each block of the turn (`sent_blocks`) is the response's: its type, and every field the API sent."""
    blocks = response.blocks
    if len(sent_blocks) != len(blocks):
        return f"the assistant turn holds {len(sent_blocks)} blocks, the response {len(blocks)}"
    for position, (kind, fields) in enumerate(blocks):
        sent = sent_blocks[position]
        if sent.get("type") != kind:
            return f"block {position} is sent as {sent.get('type')!r}, received as {kind!r}"
        if not sent.keys() >= fields:
            return f"block {position} ({kind}) is sent without the fields {sorted(fields - sent.keys())}"
    return None
