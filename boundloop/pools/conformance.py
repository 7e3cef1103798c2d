"""The pool store conformance suite: the behaviour every `PoolStore` must have.

Each check is an async function of a fresh, empty store; it raises `AssertionError` on a
failure. `SQLitePoolStore` and `PostgresPoolStore` pass them all, `MemoryPoolStore` all but
`LEASE_CHECKS` (its holds have no lease: they die with the process that holds them), see
tests/test_pool_conformance.py; run them for your own store:

```python
@pytest.mark.parametrize("check", POOL_CHECKS, ids=lambda check: check.__name__)
async def test_my_pool_store(check: PoolCheck) -> None:
    await check(MyPoolStore(...))
```

The checks use the store's units (`boundloop/pools/store.py`): nanodollars, tokens, and
seconds on the pool's clock, which they set (`Hold.now`), so they need no waiting.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Awaitable, Callable
from typing import Final, TypeAlias

import anyio

from .ledger import Shortfall
from .store import Hold, PoolStore, PoolUsage

__all__ = [
    "LEASE_CHECKS",
    "LEASE_S",
    "NOW",
    "POOL_CHECKS",
    "PoolCheck",
    "charges_a_settled_hold_once",
    "clamps_the_output_to_what_is_left",
    "covers_a_claim_within_its_ceiling",
    "keeps_pools_and_periods_apart",
    "knows_nothing_of_an_unknown_pool",
    "lists_each_pools_latest_period",
    "never_oversubscribes_under_racing_reservations",
    "refuses_a_claim_it_cannot_cover",
    "releases_without_charging",
    "renews_a_lease_only_forward",
    "sample_hold",
    "settles_to_the_period_that_reserved_it",
    "stops_counting_a_hold_whose_lease_ended",
    "takes_the_latest_ceilings",
]

PoolCheck: TypeAlias = Callable[[PoolStore], Awaitable[None]]

NOW: Final = 1_800_000_000.0
"""The pool's clock in the checks (seconds since the epoch)."""
LEASE_S: Final = 60.0

_ids = itertools.count(1)


def sample_hold(
    *,
    pool: str = "tenant-a",
    period: str = "2026-12-02",
    input_tokens: int = 100,
    output_tokens: int = 1_000,
    input_nusd: int = 300_000,
    output_nusd: int = 15_000,
    max_nusd: int | None = 100_000_000,
    max_tokens: int | None = None,
    now: float = NOW,
) -> Hold:
    """A hold of a new id: by default $0.0003 of input and 1,000 output tokens at $15 a million
    ($0.0153 in all) from a $0.10 pool, its lease `LEASE_S` from `now`."""
    return Hold(
        id=next(_ids),
        pool=pool,
        period=period,
        holder="conformance:0",
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        input_nusd=input_nusd,
        output_nusd=output_nusd,
        max_nusd=max_nusd,
        max_tokens=max_tokens,
        now=now,
        expires_at=now + LEASE_S,
    )


async def _granted(store: PoolStore, hold: Hold) -> int:
    granted = await store.reserve(hold)
    assert not isinstance(granted, Shortfall), f"{hold} was refused: {granted}"
    return granted


async def covers_a_claim_within_its_ceiling(store: PoolStore) -> None:
    """A claim the pool covers is granted whole, and held (counted in `usage`) until settled."""
    hold = sample_hold()
    assert await _granted(store, hold) == 1_000
    usage = await store.usage("tenant-a", "2026-12-02", NOW)
    assert usage == PoolUsage(
        pool="tenant-a",
        period="2026-12-02",
        reserved_nusd=300_000 + 1_000 * 15_000,
        reserved_tokens=1_100,
        holds=1,
        max_nusd=100_000_000,
    )


async def clamps_the_output_to_what_is_left(store: PoolStore) -> None:
    """A claim the pool covers only in part is granted the output tokens that fit (`ledger.fit`),
    under the cost ceiling and under the token ceiling, and holds only those."""
    await _granted(store, sample_hold(output_tokens=6_000))  # $0.0903 of the $0.10
    assert await _granted(store, sample_hold()) == (100_000_000 - 90_300_000 - 300_000) // 15_000
    assert (await store.usage("tenant-a", "2026-12-02", NOW)).reserved_nusd <= 100_000_000
    tokens = sample_hold(pool="tokens", max_nusd=None, max_tokens=1_500)
    assert await _granted(store, tokens) == 1_000
    assert await _granted(store, dataclasses.replace(tokens, id=next(_ids))) == 300


async def refuses_a_claim_it_cannot_cover(store: PoolStore) -> None:
    """A claim without room for one output token gets the ceiling's shortfall (in store units,
    with what is spent and held under it) and holds nothing."""
    await _granted(store, sample_hold(output_tokens=6_646))  # 99,990,000 of 100,000,000
    refused = await store.reserve(sample_hold())
    assert refused == Shortfall(limit="max_cost_usd", value=100_000_000, used=99_990_000)
    assert (await store.usage("tenant-a", "2026-12-02", NOW)).holds == 1
    tokens = sample_hold(pool="tokens", max_nusd=None, max_tokens=100)  # the input alone fills it
    assert await store.reserve(tokens) == Shortfall(limit="max_total_tokens", value=100, used=0)
    assert (await store.usage("tokens", "2026-12-02", NOW)).holds == 0


async def settles_to_the_period_that_reserved_it(store: PoolStore) -> None:
    """A hold settled after its period ended charges the period that reserved it, however late."""
    hold = sample_hold(period="2026-12-02")
    await _granted(store, hold)
    await _granted(store, sample_hold(period="2026-12-03", now=NOW + 10))
    await store.settle(hold.id, nusd=1_234, tokens=56)
    day = await store.usage("tenant-a", "2026-12-02", NOW + 10)
    assert (day.spent_nusd, day.spent_tokens, day.holds) == (1_234, 56, 0)
    after = await store.usage("tenant-a", "2026-12-03", NOW + 10)
    assert (after.spent_nusd, after.spent_tokens, after.holds) == (0, 0, 1)


async def charges_a_settled_hold_once(store: PoolStore) -> None:
    """Settling a hold twice, or after releasing it, charges it once or not at all."""
    hold = sample_hold()
    await _granted(store, hold)
    await store.settle(hold.id, nusd=1_000, tokens=10)
    await store.settle(hold.id, nusd=1_000, tokens=10)
    released = sample_hold()
    await _granted(store, released)
    await store.release(released.id)
    await store.settle(released.id, nusd=5_000, tokens=50)
    usage = await store.usage("tenant-a", "2026-12-02", NOW)
    assert (usage.spent_nusd, usage.spent_tokens, usage.reserved_nusd, usage.holds) == (1_000, 10, 0, 0)


async def releases_without_charging(store: PoolStore) -> None:
    """A released hold frees what it held and charges nothing; releasing again changes nothing."""
    hold = sample_hold(output_tokens=6_646)
    await _granted(store, hold)
    await store.release(hold.id)
    await store.release(hold.id)
    assert await _granted(store, sample_hold(output_tokens=6_646)) == 6_646
    usage = await store.usage("tenant-a", "2026-12-02", NOW)
    assert (usage.spent_nusd, usage.holds) == (0, 1)


async def stops_counting_a_hold_whose_lease_ended(store: PoolStore) -> None:
    """A hold past its lease (its holder died) no longer counts, so its room is granted again;
    a holder that was only slow still settles it, and the bill is charged."""
    slow = sample_hold(output_tokens=6_646)
    await _granted(store, slow)
    assert isinstance(await store.reserve(sample_hold(now=NOW + LEASE_S - 1)), Shortfall)
    later = NOW + LEASE_S
    assert (await store.usage("tenant-a", "2026-12-02", later)).holds == 0
    assert await _granted(store, sample_hold(now=later)) == 1_000
    await store.settle(slow.id, nusd=7_000, tokens=70)
    usage = await store.usage("tenant-a", "2026-12-02", later)
    assert (usage.spent_nusd, usage.spent_tokens, usage.holds) == (7_000, 70, 1)


async def renews_a_lease_only_forward(store: PoolStore) -> None:
    """`renew` moves a hold's lease later, never earlier; renewing a settled hold does nothing."""
    hold = sample_hold()
    await _granted(store, hold)
    await store.renew(hold.id, NOW + 300)
    await store.renew(hold.id, NOW + 1)
    assert (await store.usage("tenant-a", "2026-12-02", NOW + 299)).holds == 1
    assert (await store.usage("tenant-a", "2026-12-02", NOW + 300)).holds == 0
    await store.settle(hold.id, nusd=1, tokens=1)
    await store.renew(hold.id, NOW + 600)
    assert (await store.usage("tenant-a", "2026-12-02", NOW)).holds == 0


async def knows_nothing_of_an_unknown_pool(store: PoolStore) -> None:
    """A pool or period never reserved in has zeros and no ceiling; an empty store lists none."""
    assert await store.usage("nobody", "", NOW) == PoolUsage(pool="nobody", period="")
    assert await store.list(NOW) == []


async def lists_each_pools_latest_period(store: PoolStore) -> None:
    """`list` gives each pool's latest period, by pool name, with its spend and live holds."""
    old = sample_hold(pool="b-team", period="2026-11")
    await _granted(store, old)
    await store.settle(old.id, nusd=9, tokens=9)
    await _granted(store, sample_hold(pool="b-team", period="2026-12"))
    await _granted(store, sample_hold(pool="a-tenant", period="", max_nusd=None, max_tokens=5_000))
    listed = await store.list(NOW)
    assert [(usage.pool, usage.period) for usage in listed] == [("a-tenant", ""), ("b-team", "2026-12")]
    assert (listed[0].max_nusd, listed[0].max_tokens, listed[0].reserved_tokens) == (None, 5_000, 1_100)
    assert (listed[1].spent_nusd, listed[1].holds, listed[1].max_nusd) == (0, 1, 100_000_000)


async def keeps_pools_and_periods_apart(store: PoolStore) -> None:
    """Holds and spend of one pool, or one period, never count against another."""
    full = sample_hold(pool="x", output_tokens=6_646)
    await _granted(store, full)
    await store.settle(full.id, nusd=99_990_000, tokens=6_746)
    assert await _granted(store, sample_hold(pool="y")) == 1_000
    assert await _granted(store, sample_hold(pool="x", period="2026-12-03")) == 1_000
    assert isinstance(await store.reserve(sample_hold(pool="x")), Shortfall)


async def takes_the_latest_ceilings(store: PoolStore) -> None:
    """The ceilings are the reservation's own: a ceiling raised (on every process) lets the next
    claim through at once, and `usage` reports the latest."""
    await _granted(store, sample_hold(output_tokens=6_646))
    assert isinstance(await store.reserve(sample_hold()), Shortfall)
    assert await _granted(store, sample_hold(max_nusd=200_000_000)) == 1_000
    assert (await store.usage("tenant-a", "2026-12-02", NOW)).max_nusd == 200_000_000


async def never_oversubscribes_under_racing_reservations(store: PoolStore) -> None:
    """Forty claims racing for a pool that covers ten of them whole: what is granted together
    stays within the ceiling and fills it but for less than one claim, and the holds counted are
    the grants."""
    ceiling = 10 * 15_300_000
    grants: list[int] = []

    async def claim() -> None:
        granted = await store.reserve(sample_hold(pool="race", max_nusd=ceiling))
        if not isinstance(granted, Shortfall):
            grants.append(granted)

    async with anyio.create_task_group() as group:
        for _ in range(40):
            group.start_soon(claim)
    held = sum(300_000 + granted * 15_000 for granted in grants)
    usage = await store.usage("race", "2026-12-02", NOW)
    assert (usage.reserved_nusd, usage.holds) == (held, len(grants))
    assert ceiling - 15_300_000 < held <= ceiling
    assert 10 <= len(grants) <= 11


POOL_CHECKS: Final[tuple[PoolCheck, ...]] = (
    covers_a_claim_within_its_ceiling,
    clamps_the_output_to_what_is_left,
    refuses_a_claim_it_cannot_cover,
    settles_to_the_period_that_reserved_it,
    charges_a_settled_hold_once,
    releases_without_charging,
    stops_counting_a_hold_whose_lease_ended,
    renews_a_lease_only_forward,
    knows_nothing_of_an_unknown_pool,
    lists_each_pools_latest_period,
    keeps_pools_and_periods_apart,
    takes_the_latest_ceilings,
    never_oversubscribes_under_racing_reservations,
)
"""Every check, in the order they are documented."""

LEASE_CHECKS: Final[tuple[PoolCheck, ...]] = (
    stops_counting_a_hold_whose_lease_ended,
    renews_a_lease_only_forward,
)
"""The checks of leases, among `POOL_CHECKS`: for a store whose holds outlive their holder (a
file's, a database's); a store that dies with its holder needs no lease (`MemoryPoolStore`)."""
