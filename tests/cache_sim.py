"""A fake Messages API that bills prompt caching by the API's documented rules (no network).

`CacheSim` is the cache: given each request body (the JSON the SDK sends), it says what the API
would put in `usage`: `cache_read_input_tokens`, `cache_creation_input_tokens` (with its
`cache_creation` split into 5-minute and 1-hour writes) and `input_tokens`. `CachingAPI` is
tests/fake_api.py's `FakeAPI` with that cache in front: the real `anthropic.AsyncAnthropic` talks
to it over a `MockTransport`, and every 200 `Body` it serves has its usage's input side replaced
by the cache's figures (`output_tokens` stays what the script says). The tests and the benchmark
(benchmarks/caching.py) share it.

The rules implemented (the API's prompt caching documentation):

- **The prefix.** A request is read in the order tools -> system -> messages. Its blocks are each
  tool definition, each system text block (a string `system` is one block) and each content
  block of each message (a string `content` is one block). The prefix up to a block is every
  block before it and the block itself, under the request's model; a prefix matches an earlier
  one only when every block is the same JSON (the `cache_control` markers themselves are not part
  of it: a breakpoint that moves forward still finds the prefix it left).
- **Breakpoints.** A block with `cache_control` is a breakpoint. A top-level `cache_control`
  (automatic caching) puts one on the last cacheable block of the request (the last block that is
  not a thinking block), unless that block already is one. At most 4 breakpoints per request
  (automatic caching takes one of the 4); more is a 400 `invalid_request_error`, as is
  `cache_control` on a thinking block, or a 1-hour breakpoint after a 5-minute one (longer TTLs
  first).
- **Reads.** At each breakpoint the cache is checked at the breakpoint and at the block
  boundaries before it, up to 20 blocks back (`LOOKBACK_BLOCKS`); the longest prefix found in the
  cache, over all breakpoints, is read: its tokens are `cache_read_input_tokens`, and reading an
  entry refreshes its TTL.
- **Writes.** Every breakpoint after the read prefix whose prefix is at least the model's minimum
  cacheable length (`MIN_CACHEABLE_TOKENS`; shorter prefixes are silently not cached) is written:
  the tokens from the end of what was read or written before it up to the breakpoint are
  `cache_creation_input_tokens`, billed as a 5-minute or a 1-hour write by that breakpoint's `ttl`
  (default "5m"). Only breakpoints become entries, never the boundaries in between.
- **TTL.** An entry lives 5 minutes (or 1 hour) from its last write or read; the clock is
  injected (`clock=`), so a test can move time instead of waiting.
- **Input.** Every other token of the request (after the last cached breakpoint) is
  `input_tokens`.

Tokens are estimated, deterministically: a block's are the bytes of its canonical JSON (keys
sorted, no spaces, `cache_control` removed) divided by 4, rounded up. Not modelled: the other
request fields that also key the cache (`tool_choice`, `thinking`, images; they do not change
within the runs measured here), a cache entry written by a request still in flight (the runs
here send one request at a time), and the API's per-organisation cache isolation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal

import httpx2

from tests.fake_api import Body, FakeAPI, Reply, _error

JSON = dict[str, Any]
Ttl = Literal["5m", "1h"]

MAX_BREAKPOINTS: Final = 4
"""Blocks with `cache_control` one request may carry (automatic caching counts as one)."""
LOOKBACK_BLOCKS: Final = 20
"""How many block boundaries before a breakpoint the cache is checked at."""
TTL_S: Final[Mapping[str, float]] = {"5m": 300.0, "1h": 3600.0}
MIN_CACHEABLE_TOKENS: Final[Mapping[str, int]] = {
    "claude-opus-4-6": 4096,
    "claude-opus-4-5": 4096,
    "claude-haiku-4-5": 4096,
    "claude-sonnet-4-6": 1024,
    "claude-sonnet-4-5": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4": 1024,
    "claude-sonnet-4": 1024,
    "claude-3-5-haiku": 2048,
    "claude-3-haiku": 2048,
}
"""The smallest prefix the API caches, by model-name prefix (the documented figures)."""
DEFAULT_MIN_CACHEABLE: Final = 1024
_THINKING: Final = frozenset({"thinking", "redacted_thinking"})


class CacheRequestError(Exception):
    """The request breaks a caching rule: the API answers 400 `invalid_request_error`."""


def canonical(block: object) -> bytes:
    """A block's JSON as the cache compares it: keys sorted, no spaces, no `cache_control`."""
    if isinstance(block, dict):
        block = {key: value for key, value in block.items() if key != "cache_control"}
    return json.dumps(block, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def tokens_of(block: object) -> int:
    """The block's estimated tokens: its canonical JSON's bytes / 4, rounded up."""
    return math.ceil(len(canonical(block)) / 4)


def min_cacheable(model: str) -> int:
    """The model's minimum cacheable prefix (the longest matching name prefix; else 1,024)."""
    matches = [name for name in MIN_CACHEABLE_TOKENS if model.startswith(name)]
    return MIN_CACHEABLE_TOKENS[max(matches, key=len)] if matches else DEFAULT_MIN_CACHEABLE


def blocks_of(body: Mapping[str, Any]) -> list[JSON]:
    """The request's blocks in prefix order: tools, system, then each message's content."""
    blocks: list[JSON] = [dict(tool) for tool in body.get("tools") or ()]
    system = body.get("system")
    if isinstance(system, str):
        blocks.append({"type": "text", "text": system})
    elif system:
        blocks += [dict(block) for block in system]
    for message in body.get("messages") or ():
        content = message["content"]
        if isinstance(content, str):
            blocks.append({"type": "text", "text": content, "role": message["role"]})
        else:
            blocks += [{**block, "role": message["role"]} for block in content]
    return blocks


def breakpoints_of(body: Mapping[str, Any], blocks: list[JSON]) -> dict[int, Ttl]:
    """Where the request's breakpoints are (block index -> TTL); raises the API's 400s."""
    found: dict[int, Ttl] = {}
    for index, block in enumerate(blocks):
        control = block.get("cache_control")
        if control is None:
            continue
        if block.get("type") in _THINKING:
            raise CacheRequestError(f"blocks[{index}]: cache_control cannot be set on a thinking block")
        found[index] = control.get("ttl", "5m")
    top = body.get("cache_control")
    if top is not None:
        last = max((i for i, block in enumerate(blocks) if block.get("type") not in _THINKING), default=None)
        if last is not None and last not in found:
            found[last] = top.get("ttl", "5m")
    if len(found) > MAX_BREAKPOINTS:
        raise CacheRequestError(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(found)}."
        )
    ttls = [found[index] for index in sorted(found)]
    if any(earlier == "5m" and later == "1h" for earlier, later in itertools.pairwise(ttls)):
        raise CacheRequestError("a ttl='1h' cache_control block must not come after a ttl='5m' one")
    return found


@dataclasses.dataclass(frozen=True, slots=True)
class CacheUsage:
    """The input side of one response's `usage`, as the cache bills it."""

    input_tokens: int
    cache_read_input_tokens: int
    cache_creation_5m: int
    cache_creation_1h: int

    @property
    def cache_creation_input_tokens(self) -> int:
        """Both kinds of write."""
        return self.cache_creation_5m + self.cache_creation_1h

    def to_usage(self) -> JSON:
        """The fields of the API's `usage` this sets."""
        return {
            "input_tokens": self.input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.cache_creation_5m,
                "ephemeral_1h_input_tokens": self.cache_creation_1h,
            },
        }


@dataclasses.dataclass(slots=True)
class _Entry:
    ttl_s: float
    expires_at: float


class CacheSim:
    """The prompt cache of one organisation: entries by prefix, each with its expiry.

    Args:
        clock: seconds, monotonic (default `time.monotonic`); a test passes its own.
        min_tokens: the minimum cacheable prefix for every model (default: by model,
            `MIN_CACHEABLE_TOKENS`).
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic, min_tokens: int | None = None) -> None:
        self._clock = clock
        self._min_tokens = min_tokens
        self._entries: dict[bytes, _Entry] = {}

    def account(self, body: Mapping[str, Any]) -> CacheUsage:
        """Bill one request: read the longest cached prefix, write the breakpoints after it.

        Raises:
            CacheRequestError: a caching rule is broken (the API's 400).
        """
        now = self._clock()
        self._entries = {key: entry for key, entry in self._entries.items() if entry.expires_at > now}
        blocks = blocks_of(body)
        breakpoints = breakpoints_of(body, blocks)
        keys = _prefix_keys(str(body.get("model", "")), blocks)
        tokens = [tokens_of(block) for block in blocks]
        read_end = -1  # the last block read from the cache
        for point in breakpoints:
            for index in range(point, max(point - LOOKBACK_BLOCKS, 0) - 1, -1):
                entry = self._entries.get(keys[index])
                if entry is not None:
                    entry.expires_at = now + entry.ttl_s
                    read_end = max(read_end, index)
                    break
        minimum = self._min_tokens if self._min_tokens is not None else min_cacheable(str(body.get("model")))
        written = {"5m": 0, "1h": 0}
        cached_end = read_end
        for point in sorted(breakpoints):
            if point <= cached_end or sum(tokens[: point + 1]) < minimum:
                continue
            ttl = breakpoints[point]
            written[ttl] += sum(tokens[cached_end + 1 : point + 1])
            self._entries[keys[point]] = _Entry(TTL_S[ttl], now + TTL_S[ttl])
            cached_end = point
        read = sum(tokens[: read_end + 1])
        return CacheUsage(
            input_tokens=sum(tokens) - read - written["5m"] - written["1h"],
            cache_read_input_tokens=read,
            cache_creation_5m=written["5m"],
            cache_creation_1h=written["1h"],
        )


def _prefix_keys(model: str, blocks: Iterable[JSON]) -> list[bytes]:
    """The digest of each prefix: the model, then every block up to and including it."""
    digest = hashlib.sha256(model.encode())
    keys: list[bytes] = []
    for block in blocks:
        digest.update(canonical(block) + b"\n")
        keys.append(digest.copy().digest())
    return keys


class CachingAPI(FakeAPI):
    """`FakeAPI` whose 200 `Body` replies carry the cache's usage; a request breaking a caching
    rule is answered 400 before any reply is taken from the queue.

    `usages` holds each billed request's `CacheUsage`, in order.
    """

    def __init__(self, replies: Iterable[Reply] = (), *, cache: CacheSim | None = None) -> None:
        super().__init__(replies)
        self.cache = cache or CacheSim()
        self.usages: list[CacheUsage] = []
        self._billed: CacheUsage | None = None

    async def handler(self, request: httpx2.Request) -> httpx2.Response:
        """Bill the request, then answer it as `FakeAPI` does."""
        if request.method == "POST" and request.url.path == "/v1/messages":
            body: JSON = json.loads(request.content)
            try:
                self._billed = self.cache.account(body)
            except CacheRequestError as exc:
                self.requests.append(body)
                self.served.append("cache_rule")
                return _error(400, "invalid_request_error", str(exc))
        return await super().handler(request)

    async def _respond(self, reply: Reply, request: JSON) -> httpx2.Response:
        billed, self._billed = self._billed, None
        if isinstance(reply, Body) and reply.status == 200 and isinstance(reply.json, dict) and billed:
            usage: JSON = {**reply.json.get("usage", {}), **billed.to_usage()}
            self.usages.append(billed)
            reply = dataclasses.replace(reply, json={**reply.json, "usage": usage})
        return await super()._respond(reply, request)
