"""Prompt caching: `CacheSettings`, and the cache breakpoints the loop adds to each request.

With `cache="auto"` (the default) every request carries the API's automatic caching (the
top-level `cache_control`, which marks the request's last cacheable block, so the whole
transcript so far is cached and read back by the next request) and, as a fixed breakpoint, the
system prompt as one text block with `cache_control` (the last tool definition when there is no
system prompt): tools and system are what every run of the loop shares. When a turn adds
`LOOKBACK_BLOCKS` blocks or more, the previous request's last user turn is marked too, on a copy
(the API looks back at most that many blocks from a breakpoint for an earlier entry). Never more
than `MAX_BREAKPOINTS` in one request, counting the ones the tools or history carry already.
The stored transcript is never changed: only the request's copies of what is marked.
docs/cost.md "Prompt caching" has the rules this follows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal, cast, final

from pydantic import BaseModel, ConfigDict, Field

from .._lazy import claim
from ..errors import ConfigurationError

MAX_BREAKPOINTS: Final = 4
"""The most `cache_control` breakpoints one request may carry (automatic caching counts one)."""
LOOKBACK_BLOCKS: Final = 20
"""How many blocks before a breakpoint the API checks for an earlier cache entry."""

CacheMode = Literal["auto", "off"]


@final
class CacheSettings(BaseModel):
    """How `cache="auto"` caches, for the settings that are not its defaults.

    `AgentLoop(cache=CacheSettings(ttl="1h"))`: breakpoints written for an hour (written at
    twice the input price instead of 1.25 times; worth it when turns are more than five
    minutes apart, e.g. a run that waits for a human). `prefix=False`: no fixed breakpoint on
    the system prompt (or last tool), only the automatic one on the transcript.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", title="cache_settings")

    ttl: Literal["5m", "1h"] = Field(default="5m", description="How long a cache entry lives.")
    prefix: bool = Field(
        default=True,
        strict=True,
        description="A fixed breakpoint after the tools and system prompt (what every run of "
        "the loop shares), besides the automatic one on the transcript.",
    )

    def control(self) -> dict[str, str]:
        """The `cache_control` the loop sends: the 5 minute default leaves `ttl` out."""
        return {"type": "ephemeral"} if self.ttl == "5m" else {"type": "ephemeral", "ttl": self.ttl}


def cache_settings(cache: CacheMode | CacheSettings) -> CacheSettings | None:
    """The settings a loop's `cache` stands for; None: off."""
    if cache == "off":
        return None
    return CacheSettings() if cache == "auto" else cache


def check_cache(cache: CacheMode | CacheSettings, settings: Mapping[str, Any]) -> None:
    """`cache="off"` sends no `cache_control`: settings that send one contradict it.

    Raises:
        ConfigurationError: they do.
    """
    if cache == "off" and settings.get("cache_control"):
        raise ConfigurationError(
            'cache="off" sends no cache_control, but the model settings set cache_control: '
            "leave one of them out"
        )


def cache_sha256(cache: CacheMode | CacheSettings) -> str | None:
    """The provenance hash of a loop's cache setting; None for the default (`"auto"`, or
    `CacheSettings()`), so a loop that leaves it keeps the provenance it had before."""
    settings = cache_settings(cache)
    if settings == CacheSettings():
        return None
    data: object = "off" if settings is None else settings.model_dump(mode="json")
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def add_breakpoints(
    request: dict[str, Any],
    settings: CacheSettings | None,
    markers: MessageMarkers | None = None,
    *,
    automatic: bool = True,
) -> bool:
    """Add the loop's cache breakpoints to a built request (its `tools`, `system` and messages
    are replaced by copies where marked; what they were built from is left as it was).

    Nothing is added when caching is off, or when the request carries a top-level
    `cache_control` already (the run's `ModelSettings(cache_control=...)`: the user's wins).
    `markers`, the run's count of the breakpoints its transcript holds, counts only the
    messages added since the run's previous request, and marks the run's tools and system
    prompt once (without it: all of them, each time). `automatic=False` (a platform without
    automatic caching, `boundloop.platforms`): the breakpoint the top-level `cache_control` would
    put on the request's last block is put there as a block breakpoint, on a copy.

    Returns whether the request may hold a 1-hour breakpoint (what the TTL order check,
    `TTLOrder`, guards): False only when its tools, system prompt and messages were read and
    hold none, and the loop's own are written for 5 minutes; True when caching is off or the
    caller's top-level `cache_control` is sent (nothing read).
    """
    if settings is None or "cache_control" in request:
        return True
    markers = MessageMarkers() if markers is None else markers
    head = markers.head(request, settings)
    free = MAX_BREAKPOINTS - head.count - markers.count(request["messages"])
    hour = settings.ttl == "1h" or head.hour or markers.hour()
    if free <= 0:
        return hour
    # 1-hour entries must come before 5-minute ones: after a 5-minute breakpoint of the caller's
    # (tools, system prompt, history), the loop's own breakpoints are written for 5 minutes.
    five = head.five or (head.control.get("ttl") == "1h" and markers.five_in(len(request["messages"])))
    control = FIVE_MINUTES if five else head.control
    if automatic:
        request["cache_control"] = control  # automatic: the last cacheable block, moving with the transcript
        free -= 1
    elif _mark_last(request, control):  # the same block, marked: the platform has no automatic caching
        free -= 1
    if free and head.marked:
        request.update(head.marked)
        free -= 1
    if free:
        _mark_lookback(request, head.control, FIVE_MINUTES if head.five else None, markers)
    return hour


@final
@dataclasses.dataclass(frozen=True, slots=True)
class Head:
    """What a request's tools and system prompt hold and get: the same for every request of a run."""

    count: int
    """The breakpoints they carry already."""
    control: dict[str, str]
    """The `cache_control` the loop sends."""
    marked: dict[str, Any]
    """The fixed breakpoint: `system` (or `tools`) with it, to put in the request; {}: none."""
    source: tuple[object, object, object]
    """The system prompt, tools and settings it was made from (the objects themselves)."""
    five: bool = False
    """With a 1-hour `control`: the tools or system prompt hold a 5-minute breakpoint, so every
    breakpoint after them is written for 5 minutes."""
    hour: bool = False
    """The tools or system prompt hold a 1-hour breakpoint."""

    def made_from(self, system: object, tools: object, settings: object) -> bool:
        """Whether it was made from these very objects."""
        source = self.source
        return source[0] is system and source[1] is tools and source[2] is settings


def _head(request: Mapping[str, Any], settings: CacheSettings) -> Head:
    count = 0
    tools: list[Mapping[str, Any]] = request.get("tools") or []
    for tool in tools:
        count += 1 if tool.get("cache_control") else 0
    system = request.get("system")
    if isinstance(system, list):
        count += sum(1 for block in cast("list[Mapping[str, Any]]", system) if block.get("cache_control"))
    control = settings.control()
    marked: dict[str, Any] = {}
    five = False
    hour = any(_ttl(tool) == "1h" for tool in tools) or (
        isinstance(system, list) and any(_ttl(block) == "1h" for block in cast("list[object]", system))
    )
    if control.get("ttl") == "1h":
        five = any(_ttl(tool) == "5m" for tool in tools) or (
            isinstance(system, list) and any(_ttl(block) == "5m" for block in cast("list[object]", system))
        )
    if settings.prefix:
        before = five or any(_ttl(tool) == "5m" for tool in tools[:-1] if system is None)
        _mark_prefix(marked, request, FIVE_MINUTES if before else control)
    source = (request.get("system"), request.get("tools"), settings)  # as sent: the locals are narrowed
    return Head(count=count, control=control, marked=marked, source=source, five=five, hour=hour)


FIVE_MINUTES: Final = {"type": "ephemeral"}
"""The `cache_control` of a 5-minute breakpoint (the API's default TTL)."""


def _ttl(block: object) -> str | None:
    """The TTL of a block's (or tool's) `cache_control` breakpoint; None: it has none."""
    control: object = (
        cast(Mapping[str, object], block).get("cache_control")
        if type(block) is dict or isinstance(block, Mapping)  # a dict: past the ABC check
        else getattr(block, "cache_control", None)
    )
    if not control:
        return None
    ttl = (
        cast(Mapping[str, object], control).get("ttl")
        if type(control) is dict or isinstance(control, Mapping)  # a dict: past the ABC check
        else None
    )
    return ttl if isinstance(ttl, str) else "5m"


def ttl_order_problem(request: Mapping[str, Any]) -> str | None:
    """A 1-hour breakpoint after a 5-minute one, which the API refuses (the order is tools,
    system, messages, then the top-level automatic breakpoint on the last block); None: in order."""
    return TTLOrder().problem(request)


@final
class TTLOrder:
    """`ttl_order_problem` for a run's requests in turn: the messages a request shares with the
    one checked before (those before `start`, the same objects) are not read again."""

    __slots__ = ("_fives", "_head", "_head_of")

    def __init__(self) -> None:
        self._head: str | None = None
        """Where the tools and system prompt hold their first 5-minute breakpoint."""
        self._head_of: tuple[object, object] | None = None
        """The tools and system prompt `_head` was read from (a run sends the same objects)."""
        self._fives: list[str | None] = []
        """For each message checked: where the first 5-minute breakpoint of the messages up to it is."""

    def problem(self, request: Mapping[str, Any], start: int = 0) -> str | None:
        """The first 1-hour breakpoint after a 5-minute one, or None (messages from `start` read)."""
        tools, system = request.get("tools"), request.get("system")
        known = self._head_of
        if known is not None and known[0] is tools and known[1] is system:
            five = self._head  # the same tools and system prompt as the request before
        else:
            five = None
            heads = [*(tools or ()), *(cast("list[object]", system) if isinstance(system, list) else ())]
            for index, item in enumerate(heads):
                ttl = _ttl(item)
                if ttl == "5m" and five is None:
                    five = f"the tools and system's block {index}"
                elif ttl == "1h" and five is not None:
                    self._head_of = None
                    return _after(f"the tools and system's block {index}", five)
            self._head_of = (tools, system)
        fives = self._fives
        if five != self._head or start > len(fives):
            start = 0  # the head changed: every message is read again against it
        self._head = five
        del fives[start:]
        first = fives[-1] if fives else None  # the messages' own first 5-minute breakpoint
        messages: list[Mapping[str, Any]] = request.get("messages") or []
        for index in range(start, len(messages)):
            content = messages[index].get("content")
            blocks: list[object] = content if isinstance(content, list) else []  # pyright: ignore[reportUnknownVariableType]
            for at, block in enumerate(blocks):
                # the transcript's blocks are plain dicts: most have no breakpoint at all
                if type(block) is dict and "cache_control" not in block:
                    continue
                ttl = _ttl(block)  # pyright: ignore[reportUnknownArgumentType]
                if ttl == "5m" and first is None:
                    first = f"messages[{index}].content[{at}]"
                elif ttl == "1h" and (five or first) is not None:
                    del fives[:]
                    return _after(f"messages[{index}].content[{at}]", five or first)
            fives.append(first)
        if _ttl(request) == "1h" and (five or first) is not None:
            return _after("the top-level cache_control", five or first)
        return None


def _after(where: str, five: str | None) -> str:
    return f"{where} is a 1-hour cache breakpoint after the 5-minute one at {five}"


def count_breakpoints(request: Mapping[str, Any], markers: MessageMarkers | None = None) -> int:
    """The `cache_control` breakpoints in a request: top-level, tools, system, message blocks."""
    count = (1 if request.get("cache_control") else 0) + _head(request, CacheSettings(prefix=False)).count
    messages: list[Mapping[str, Any]] = request.get("messages") or []
    return count + (MessageMarkers() if markers is None else markers).count(messages)


def _markers_in(message: Mapping[str, Any]) -> tuple[int, int, int]:
    """The breakpoints in a message's blocks, and how many of them are for 5 minutes and for 1
    hour (one pass)."""
    content = message.get("content")
    if not isinstance(content, list):
        return 0, 0, 0
    count = fives = hours = 0
    blocks: list[object] = content  # pyright: ignore[reportUnknownVariableType]
    for block in blocks:
        # the transcript's blocks are plain dicts, and most carry no breakpoint at all
        if type(block) is dict and "cache_control" not in block:
            continue
        if _marked(block):  # pyright: ignore[reportUnknownArgumentType]
            count += 1
        ttl = _ttl(block)  # pyright: ignore[reportUnknownArgumentType]
        if ttl == "5m":
            fives += 1
        elif ttl == "1h":
            hours += 1
    return count, fives, hours


@final
class Heads:
    """The `Head` of a loop's requests, made once for the tools, system prompt and settings every
    request of its runs carries (the same objects), and shared by its runs: one entry, made again
    when a request carries others."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: Head | None = None
        """The last head made."""

    def head(self, request: Mapping[str, Any], settings: CacheSettings) -> Head:
        """The request's `Head`."""
        last = self._last
        if last is not None and last.made_from(request.get("system"), request.get("tools"), settings):
            return last
        head = self._last = _head(request, settings)
        return head


@final
class MessageMarkers:
    """The breakpoints a run's transcript holds, counted once per message: each request counts
    the messages after the prefix it shares (the same objects) with the one before, and its last
    message again (a turn the loop extends in place, as the final-answer note does). A
    transcript that kept its first message and the previous request's last-but-one is taken to
    have grown at its end; otherwise the shared prefix is looked for.

    Args:
        heads: the loop's `Heads`, which its runs share (default: the run's own). The markers
            keep the head they were last given: runs whose requests carry tools of their own
            (a loop with MCP toolsets, connected for each run) make theirs once a run, however
            many run at once.
    """

    __slots__ = ("_fives", "_head", "_heads", "_hours", "_messages", "_totals")

    def __init__(self, heads: Heads | None = None) -> None:
        self._messages: list[object] = []
        self._totals: list[int] = []
        """The breakpoints in the first k+1 messages, for each k."""
        self._fives: list[int] = []
        """The 5-minute breakpoints among them."""
        self._hours: list[int] = []
        """The 1-hour breakpoints among them."""
        self._heads = Heads() if heads is None else heads
        self._head: Head | None = None

    def head(self, request: Mapping[str, Any], settings: CacheSettings) -> Head:
        """The request's `Head` (its tools' and system prompt's breakpoints)."""
        head = self._head
        if head is None or not head.made_from(request.get("system"), request.get("tools"), settings):
            head = self._head = self._heads.head(request, settings)
        return head

    def count(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """The breakpoints in the blocks of `messages`."""
        seen = self._messages
        limit = min(len(seen), len(messages) - 1)
        if limit > 0 and seen[0] is messages[0] and seen[limit - 1] is messages[limit - 1]:
            same = limit  # the transcript grew at its end, as it does turn by turn
        else:  # changed elsewhere (a compaction dropped its head): the shared prefix, found
            same = 0
            while same < limit and seen[same] is messages[same]:
                same += 1
        del seen[same:], self._totals[same:], self._fives[same:], self._hours[same:]
        total = self._totals[-1] if self._totals else 0
        fives = self._fives[-1] if self._fives else 0
        hours = self._hours[-1] if self._hours else 0
        for message in messages[same:]:
            marked, five, hour = _markers_in(message)
            total += marked
            fives += five
            hours += hour
            seen.append(message)
            self._totals.append(total)
            self._fives.append(fives)
            self._hours.append(hours)
        return total

    def five_in(self, end: int) -> bool:
        """A 5-minute breakpoint in the first `end` messages `count` was last given."""
        end = min(end, len(self._fives))
        return end > 0 and self._fives[end - 1] > 0

    def hour(self) -> bool:
        """A 1-hour breakpoint in the messages `count` was last given."""
        return bool(self._hours) and self._hours[-1] > 0


def _marked(block: object) -> bool:
    if type(block) is dict:  # the transcript's blocks: plain dicts, past the ABC check below
        return bool(block.get("cache_control"))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    if isinstance(block, Mapping):
        return bool(cast(Mapping[str, object], block).get("cache_control"))
    return bool(getattr(block, "cache_control", None))


def _mark_prefix(marked: dict[str, Any], request: Mapping[str, Any], control: dict[str, str]) -> None:
    """Into `marked`: the system prompt as one text block with `control`; without one, the last
    tool. Nothing: nothing to mark (no system prompt and no tools, or the last tool is marked)."""
    system = request.get("system")
    if isinstance(system, str) and system:
        marked["system"] = [{"type": "text", "text": system, "cache_control": control}]
        return
    tools: list[Mapping[str, Any]] = request.get("tools") or []
    if system is None and tools and not tools[-1].get("cache_control"):
        marked["tools"] = [*tools[:-1], {**tools[-1], "cache_control": control}]


def _mark_last(request: dict[str, Any], control: dict[str, str]) -> bool:
    """Mark the last block of the request's last message (on a copy), where automatic caching
    puts its breakpoint; False: it is not a block that can take one (or holds one already)."""
    messages: list[Mapping[str, Any]] = request.get("messages") or []
    if not messages:
        return False
    message = messages[-1]
    content = message.get("content")
    if isinstance(content, str):
        blocks: list[object] = [{"type": "text", "text": content}]
    elif isinstance(content, list) and content:
        blocks = cast("list[object]", content)  # pyright: ignore[reportUnnecessaryCast]
    else:
        return False
    if not isinstance(blocks[-1], Mapping):
        return False
    last = cast(Mapping[str, Any], blocks[-1])
    if _marked(last) or last.get("type") in _UNMARKABLE:
        return False
    copy = list(messages)
    copy[-1] = {**message, "content": [*blocks[:-1], {**last, "cache_control": control}]}
    request["messages"] = copy
    return True


_UNMARKABLE: Final = frozenset({"thinking", "redacted_thinking"})
"""Blocks that cannot carry `cache_control` (the API caches them with the blocks around them)."""


def _mark_lookback(
    request: dict[str, Any], control: dict[str, str], five: dict[str, str] | None, markers: MessageMarkers
) -> None:
    """When `LOOKBACK_BLOCKS` blocks or more follow the last user turn before the newest
    assistant turn, mark that turn's last block (on a copy): the previous request ended there,
    so this request reads its cache entry exactly. `five`: the 5-minute control a 1-hour
    `control` gives way to after a 5-minute breakpoint (given: one is before the messages;
    `markers`, counted on these messages, knows those in them)."""
    messages: list[Mapping[str, Any]] = request.get("messages") or []
    after = 0
    assistant = False
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        content = message.get("content")
        if message.get("role") == "user" and assistant:
            if after < LOOKBACK_BLOCKS or not isinstance(content, list) or not content:
                return
            blocks = cast("list[object]", content)  # pyright: ignore[reportUnnecessaryCast]
            last = blocks[-1]
            if not isinstance(last, Mapping):
                return
            block = cast(Mapping[str, Any], last)
            if block.get("cache_control"):
                return
            if control.get("ttl") == "1h" and (five is not None or markers.five_in(index + 1)):
                control = FIVE_MINUTES
            marked = {**block, "cache_control": control}
            copy = list(messages)
            copy[index] = {**message, "content": [*blocks[:-1], marked]}
            request["messages"] = copy
            return
        assistant = assistant or message.get("role") == "assistant"
        after += len(content) if isinstance(content, list) else 1  # pyright: ignore[reportUnknownArgumentType]


claim("boundloop", CacheSettings)  # reported at its public home
