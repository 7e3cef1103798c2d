"""Pool stores: where a budget pool's spend and reservations live, and the interface a store keeps.

A `BudgetPool` keeps nothing itself: every reservation, settlement and release is one atomic
step of its `PoolStore`, so the processes (or machines) sharing the store never together
oversubscribe a pool. `MemoryPoolStore` is for one process; `SQLitePoolStore`
(`boundloop/pools/sqlite.py`) is shared by the processes of one machine. A store for a fleet
implements the same five methods.

Units. Money is in whole nanodollars (`nusd`: 1e-9 USD), so sums are exact integers in every
store; tokens are whole tokens. The pool converts: a claim's prices are rounded up, a settled
cost to the nearest nanodollar. Times are seconds since the epoch on the pool's clock (`now`).

The layout, as SQL (SQLite's; PostgreSQL's differs only in `BIGINT`/`DOUBLE PRECISION`):

    CREATE TABLE boundloop_pools (          -- one row per pool and period
        pool TEXT NOT NULL,
        period TEXT NOT NULL,               -- '2026-12-02T10' (hour), '2026-12-02' (day),
                                            -- '2026-12' (month), '' (no period); UTC
        spent_nusd INTEGER NOT NULL DEFAULT 0,
        spent_tokens INTEGER NOT NULL DEFAULT 0,
        max_nusd INTEGER,                   -- the ceilings the last reservation was held under
        max_tokens INTEGER,
        PRIMARY KEY (pool, period));
    CREATE TABLE boundloop_pool_holds (     -- one row per reservation not settled or released
        id INTEGER PRIMARY KEY,             -- `Hold.id`: random, 63 bits
        pool TEXT NOT NULL,
        period TEXT NOT NULL,               -- the period that reserved it is the one charged
        nusd INTEGER NOT NULL,
        tokens INTEGER NOT NULL,
        expires_at REAL NOT NULL,           -- the lease: after it, the hold no longer counts
        holder TEXT NOT NULL);              -- host:pid, for a person reading the table
    CREATE INDEX boundloop_pool_holds_live ON boundloop_pool_holds (pool, period, expires_at);

What each method must guarantee (`MemoryPoolStore` is the reference; every store passes the
same tests):

- `reserve(hold)`: atomically with respect to every other `reserve`, `settle` and `release` of
  the same pool and period: create the pool's row if missing and record the hold's ceilings
  on it; read `used` = spent + the live holds (`expires_at > hold.now`); decide with
  `ledger.fit` (tokens and nanodollars); insert the hold with the granted output and return
  the granted output tokens, or insert nothing and return `fit`'s `Shortfall` (in store
  units). SQLite: one `BEGIN IMMEDIATE` transaction; PostgreSQL: one transaction whose first
  statement is the upsert `INSERT ... ON CONFLICT (pool, period) DO UPDATE SET max_nusd = ...`,
  which locks the pool's row until commit (the sums then read every hold committed before).
- `settle(id, nusd=, tokens=)`: atomically delete the hold and, if it was there (live or
  expired), add `nusd` and `tokens` to the spend of the hold's own pool and period; if it was
  not there (settled or released already), change nothing. PostgreSQL: `WITH h AS (DELETE FROM
  boundloop_pool_holds WHERE id = %s RETURNING pool, period) UPDATE boundloop_pools p SET
  spent_nusd = spent_nusd + %s, spent_tokens = spent_tokens + %s FROM h WHERE p.pool = h.pool
  AND p.period = h.period`.
- `release(id)`: delete the hold; nothing is charged. Idempotent.
- `renew(id, expires_at)`: move the hold's lease to `expires_at` if later (a running call
  keeps its hold); nothing if the hold is gone.
- `usage(pool, period, now)`: the row's spend and ceilings and the live holds' sums (zeros for
  a pool or period never reserved in); `list(now)`: that, for each pool's latest period.

A store that cannot be reached raises (any exception): the loop fails the call closed, the
request not sent. A store may delete holds expired long ago (`SQLitePoolStore`: a day).

Leases are for holders that can die while their store lives on: the processes sharing a file or
a database. `MemoryPoolStore` lives and dies with its one holder, the process, so its holds have
no lease (`expires_at` is not read, `renew` does nothing): a hold counts until it is settled or
released, and a call under a pool on it renews nothing (`BudgetPool.renewed`).
"""

from __future__ import annotations

import builtins
import dataclasses
import math
from typing import Final, Protocol, final

from .ledger import Shortfall, fit

__all__ = ["NANO", "Hold", "MemoryPoolStore", "PoolStore", "PoolUsage", "cost_nusd", "price_nusd"]

NANO: Final = 1_000_000_000
"""Nanodollars in a dollar."""


def price_nusd(usd: float) -> int:
    """A worst-case price in whole nanodollars: rounded up (a claim never holds less than it may
    cost), after rounding away the float noise below a millionth of a nanodollar."""
    return math.ceil(round(usd * NANO, 6))


def cost_nusd(usd: float) -> int:
    """A billed cost in whole nanodollars, to the nearest."""
    return round(usd * NANO)


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Hold:
    """A reservation a pool asks its store to make: a claim, its pool, period and lease."""

    id: int
    """Random, 63 bits: unique across the processes sharing the store."""
    pool: str
    period: str
    """The period's key (`'2026-12-02'`; `''`: no period), charged at `settle`."""
    holder: str
    """Who holds it (`host:pid`), for people reading the store."""
    input_tokens: int
    output_tokens: int
    """The `max_tokens` wanted: the store may grant fewer (`ledger.fit`)."""
    input_nusd: int
    """The whole input's worst cost."""
    output_nusd: int
    """One output token's price."""
    max_nusd: int | None
    max_tokens: int | None
    now: float
    """The pool's clock: holds with `expires_at <= now` no longer count (a store with leases)."""
    expires_at: float

    def decide(self, used_nusd: int, used_tokens: int) -> int | Shortfall:
        """The output tokens this hold may take beside what is used, or why none (`ledger.fit`)."""
        return fit(
            self.output_tokens,
            input_tokens=self.input_tokens,
            input_cost=self.input_nusd,
            output_cost=self.output_nusd,
            used_tokens=used_tokens,
            used_cost=used_nusd,
            max_tokens=self.max_tokens,
            max_cost=self.max_nusd,
        )

    def held(self, output_tokens: int) -> tuple[int, int]:
        """`(nusd, tokens)` held when `output_tokens` are granted."""
        return self.input_nusd + output_tokens * self.output_nusd, self.input_tokens + output_tokens


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PoolUsage:
    """A pool's period as its store holds it (store units)."""

    pool: str
    period: str
    spent_nusd: int = 0
    spent_tokens: int = 0
    reserved_nusd: int = 0
    """The live holds' sum."""
    reserved_tokens: int = 0
    holds: int = 0
    """Live holds."""
    max_nusd: int | None = None
    """The ceiling the last reservation was held under (None: none yet, or not limited)."""
    max_tokens: int | None = None


class PoolStore(Protocol):
    """Where budget pools keep their spend and holds; each method one atomic step (module doc)."""

    async def reserve(self, hold: Hold) -> int | Shortfall:
        """Insert the hold with the output tokens `hold.decide` grants, or return its shortfall."""
        ...

    async def settle(self, hold_id: int, *, nusd: int, tokens: int) -> None:
        """Delete the hold and charge what was billed to its period (if it was still there)."""
        ...

    async def release(self, hold_id: int) -> None:
        """Delete the hold; nothing is charged."""
        ...

    async def renew(self, hold_id: int, expires_at: float) -> None:
        """Extend the hold's lease to `expires_at` (never shorten it)."""
        ...

    async def usage(self, pool: str, period: str, now: float) -> PoolUsage:
        """The pool's period: spend, live holds, ceilings."""
        ...

    async def list(self, now: float) -> builtins.list[PoolUsage]:
        """Every pool's latest period, by pool name."""
        ...


@final
@dataclasses.dataclass(slots=True, kw_only=True)
class _Row:
    spent_nusd: int = 0
    spent_tokens: int = 0
    max_nusd: int | None = None
    max_tokens: int | None = None


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Held:
    pool: str
    period: str
    nusd: int
    tokens: int


@final
class MemoryPoolStore:
    """A `PoolStore` in this process's memory (a pool shared by the runs of one process).

    No method awaits between its read and its write, so each is atomic among the tasks of an
    event loop; one store is for one event loop (its thread). Its holds have no lease: their
    holder is the process that holds the store, so a hold counts until it is settled or
    released (a cancelled call releases its hold), whatever `Hold.expires_at` says, and `renew`
    does nothing. It passes every conformance check but `LEASE_CHECKS`.
    """

    __slots__ = ("_holds", "_rows")

    def __init__(self) -> None:
        self._rows: dict[tuple[str, str], _Row] = {}
        self._holds: dict[int, _Held] = {}

    def _live(self, pool: str, period: str) -> tuple[int, int, int]:
        nusd = tokens = count = 0
        for held in self._holds.values():
            if held.pool == pool and held.period == period:
                nusd += held.nusd
                tokens += held.tokens
                count += 1
        return nusd, tokens, count

    async def reserve(self, hold: Hold) -> int | Shortfall:
        """See `PoolStore.reserve`."""
        row = self._rows.setdefault((hold.pool, hold.period), _Row())
        row.max_nusd, row.max_tokens = hold.max_nusd, hold.max_tokens
        reserved_nusd, reserved_tokens, _ = self._live(hold.pool, hold.period)
        granted = hold.decide(row.spent_nusd + reserved_nusd, row.spent_tokens + reserved_tokens)
        if isinstance(granted, Shortfall):
            return granted
        nusd, tokens = hold.held(granted)
        self._holds[hold.id] = _Held(pool=hold.pool, period=hold.period, nusd=nusd, tokens=tokens)
        return granted

    async def settle(self, hold_id: int, *, nusd: int, tokens: int) -> None:
        """See `PoolStore.settle`."""
        held = self._holds.pop(hold_id, None)
        if held is not None:
            row = self._rows[held.pool, held.period]
            row.spent_nusd += nusd
            row.spent_tokens += tokens

    async def release(self, hold_id: int) -> None:
        """See `PoolStore.release`."""
        self._holds.pop(hold_id, None)

    async def renew(self, hold_id: int, expires_at: float) -> None:
        """Nothing: a hold of this store has no lease (see the class)."""

    async def usage(self, pool: str, period: str, now: float) -> PoolUsage:
        """See `PoolStore.usage`."""
        row = self._rows.get((pool, period), _Row())
        nusd, tokens, count = self._live(pool, period)
        return PoolUsage(
            pool=pool,
            period=period,
            spent_nusd=row.spent_nusd,
            spent_tokens=row.spent_tokens,
            reserved_nusd=nusd,
            reserved_tokens=tokens,
            holds=count,
            max_nusd=row.max_nusd,
            max_tokens=row.max_tokens,
        )

    async def list(self, now: float) -> builtins.list[PoolUsage]:
        """See `PoolStore.list`."""
        latest: dict[str, str] = {}
        for pool, period in self._rows:
            if pool not in latest or period > latest[pool]:
                latest[pool] = period
        return [await self.usage(pool, latest[pool], now) for pool in sorted(latest)]
