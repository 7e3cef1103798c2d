"""The caching fake API (tests/cache_sim.py) bills as the API's prompt caching rules say."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from tests.cache_sim import LOOKBACK_BLOCKS, CacheRequestError, CacheSim, CachingAPI, tokens_of
from tests.fake_api import MODEL, Body, message, text_block

JSON = dict[str, Any]
EPHEMERAL: JSON = {"type": "ephemeral"}
SYSTEM = "You review refunds. " * 400  # ~2,000 tokens: above the 1,024-token minimum
TOOL: JSON = {"name": "lookup", "description": "Look a key up.", "input_schema": {"type": "object"}}


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def request(*messages: JSON, system: object = SYSTEM, **fields: Any) -> JSON:
    """A request body as the SDK sends it."""
    return {"model": MODEL, "max_tokens": 100, "system": system, "messages": list(messages), **fields}


def user(*texts: str, cache: JSON | None = None) -> JSON:
    blocks: list[JSON] = [text_block(text) for text in texts]
    if cache is not None:
        blocks[-1] = {**blocks[-1], "cache_control": cache}
    return {"role": "user", "content": blocks}


def cached_system(ttl: str | None = None) -> list[JSON]:
    control = EPHEMERAL if ttl is None else {**EPHEMERAL, "ttl": ttl}
    return [{"type": "text", "text": SYSTEM, "cache_control": control}]


def test_an_identical_prefix_is_read_the_second_time() -> None:
    cache = CacheSim(clock=Clock())
    body = request(user("Refund O-104?"), system=cached_system())
    first, second = cache.account(body), cache.account(body)
    system_tokens = tokens_of({"type": "text", "text": SYSTEM})
    assert (first.cache_read_input_tokens, first.cache_creation_5m) == (0, system_tokens)
    assert (second.cache_read_input_tokens, second.cache_creation_input_tokens) == (system_tokens, 0)
    assert first.input_tokens == second.input_tokens > 0  # the user turn after the breakpoint


def test_a_changed_prefix_misses_and_is_written_again() -> None:
    cache = CacheSim(clock=Clock())
    cache.account(request(user("Refund O-104?"), system=cached_system()))
    changed = [{**cached_system()[0], "text": "Today is 2026-12-01. " + SYSTEM}]
    usage = cache.account(request(user("Refund O-104?"), system=changed))
    assert usage.cache_read_input_tokens == 0
    assert usage.cache_creation_5m == tokens_of(changed[0])


def test_automatic_caching_moves_the_breakpoint_forward_and_reads_the_previous_turn() -> None:
    cache = CacheSim(clock=Clock())
    turn_1 = [user("Refund O-104?")]
    first = cache.account(request(*turn_1, cache_control=EPHEMERAL))
    turn_2 = [*turn_1, {"role": "assistant", "content": [text_block("Looking.")]}, user("And O-105?")]
    second = cache.account(request(*turn_2, cache_control=EPHEMERAL))
    assert first.cache_read_input_tokens == 0
    assert first.input_tokens == 0  # the breakpoint is on the last block: everything is written
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens > 0  # the two new blocks


def test_a_cached_prefix_further_back_than_the_lookback_is_not_found() -> None:
    cache = CacheSim(clock=Clock())
    cache.account(request(user("start", cache=EPHEMERAL)))
    near = [user("start"), *[user(f"more {n}") for n in range(LOOKBACK_BLOCKS - 1)]]
    assert cache.account(request(*near, cache_control=EPHEMERAL)).cache_read_input_tokens > 0
    cache = CacheSim(clock=Clock())
    cache.account(request(user("start", cache=EPHEMERAL)))
    far = [user("start"), *[user(f"more {n}") for n in range(LOOKBACK_BLOCKS + 1)]]
    assert cache.account(request(*far, cache_control=EPHEMERAL)).cache_read_input_tokens == 0


def test_entries_expire_after_their_ttl_unless_read() -> None:
    clock = Clock()
    cache = CacheSim(clock=clock)
    body = request(user("Refund O-104?"), system=cached_system())
    cache.account(body)
    clock.now += 299
    assert cache.account(body).cache_read_input_tokens > 0  # read: its 5 minutes start again
    clock.now += 299
    assert cache.account(body).cache_read_input_tokens > 0
    clock.now += 301
    expired = cache.account(body)
    assert (expired.cache_read_input_tokens, expired.cache_creation_5m) == (0, tokens_of(cached_system()[0]))


def test_a_1h_breakpoint_outlives_five_minutes_and_is_billed_as_a_1h_write() -> None:
    clock = Clock()
    cache = CacheSim(clock=clock)
    body = request(user("Refund O-104?"), system=cached_system("1h"))
    first = cache.account(body)
    assert (first.cache_creation_5m, first.cache_creation_1h) == (0, tokens_of(cached_system()[0]))
    clock.now += 3_000
    assert cache.account(body).cache_read_input_tokens == first.cache_creation_1h
    clock.now += 3_601
    assert cache.account(body).cache_read_input_tokens == 0


def test_a_prefix_below_the_minimum_is_not_cached() -> None:
    cache = CacheSim(clock=Clock())
    short = request(user("Refund?", cache=EPHEMERAL), system="Be brief.")
    first, second = cache.account(short), cache.account(short)
    assert (first.cache_creation_input_tokens, second.cache_read_input_tokens) == (0, 0)
    assert second.input_tokens == first.input_tokens > 0


def test_more_than_four_breakpoints_is_a_400() -> None:
    cache = CacheSim(clock=Clock())
    four = request(*[user(f"q{n}", cache=EPHEMERAL) for n in range(4)], user("last"))
    cache.account(four)
    with pytest.raises(CacheRequestError, match="maximum of 4 blocks with cache_control"):
        cache.account({**four, "cache_control": EPHEMERAL})  # automatic caching takes a fifth slot
    with pytest.raises(CacheRequestError, match="Found 5"):
        cache.account(request(*[user(f"q{n}", cache=EPHEMERAL) for n in range(5)]))


def test_a_1h_breakpoint_after_a_5m_one_is_a_400() -> None:
    cache = CacheSim(clock=Clock())
    with pytest.raises(CacheRequestError, match="1h"):
        cache.account(request(user("q", cache={**EPHEMERAL, "ttl": "1h"}), system=cached_system("5m")))


async def test_the_sdk_sees_the_cache_usage_and_a_fifth_breakpoint_is_a_bad_request() -> None:
    api = CachingAPI([Body(json=message([text_block("ok")], n=n)) for n in range(2)], cache=CacheSim())
    client = api.client()
    system: Any = cached_system()
    messages: Any = [user("Refund O-104?")]
    first = await client.messages.create(model=MODEL, max_tokens=100, system=system, messages=messages)
    second = await client.messages.create(model=MODEL, max_tokens=100, system=system, messages=messages)
    assert first.usage.cache_creation_input_tokens == second.usage.cache_read_input_tokens
    assert second.usage.cache_read_input_tokens == tokens_of(system[0])
    assert first.usage.cache_creation is not None
    assert first.usage.cache_creation.ephemeral_5m_input_tokens == first.usage.cache_creation_input_tokens
    assert second.usage.output_tokens == 5  # the script's
    too_many: Any = [user(f"q{n}", cache=EPHEMERAL) for n in range(5)]
    with pytest.raises(anthropic.BadRequestError, match="maximum of 4"):
        await client.messages.create(model=MODEL, max_tokens=100, system=system, messages=too_many)
    assert api.served == ["Body", "Body", "cache_rule"]
    assert len(api.usages) == 2
