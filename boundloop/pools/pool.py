"""BudgetPool: a ceiling many runs share (a tenant's day, a team's month), kept in a store.

A pool is a `Ledger` (`boundloop/pools/ledger.py`) over a `PoolStore`: every model call of a
run under the pool reserves its worst case before it is sent (`reserve`), and settles what it
was billed (`settle`) or releases the hold (`release`), each one atomic step of the store. The
period's key comes from the pool's clock in UTC; a reservation is charged to the period that
made it, however late it settles. The clock only moves forward: a reading earlier than one seen
before counts as the one seen before, so a clock set back neither reopens a closed period nor
shortens a lease.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import secrets
import socket
from collections.abc import Callable, Iterable
from typing import Final, Literal, TypeAlias, final

from .._base.names import name_problem
from ..errors import ConfigurationError
from .ledger import Claim, Grant, Shortfall
from .store import NANO, Hold, MemoryPoolStore, PoolStore, PoolUsage, cost_nusd, price_nusd

__all__ = ["BudgetPool", "Period", "PoolStatus", "joined_pools", "period_of"]

Period: TypeAlias = Literal["hour", "day", "month"]

_HOLDER: Final = f"{socket.gethostname()}:{os.getpid()}"


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def period_of(period: Period | None, at: dt.datetime) -> tuple[str, dt.datetime | None]:
    """The key of the period holding `at` (an aware datetime), and its start in UTC: `'2026-12-02T10'`
    (hour), `'2026-12-02'` (day), `'2026-12'` (month); `('', None)` without a period."""
    if period is None:
        return "", None
    utc = at.astimezone(dt.UTC)
    if period == "hour":
        start = utc.replace(minute=0, second=0, microsecond=0)
        return start.strftime("%Y-%m-%dT%H"), start
    if period == "day":
        start = utc.replace(hour=0, minute=0, second=0, microsecond=0)
        return start.strftime("%Y-%m-%d"), start
    start = utc.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return start.strftime("%Y-%m"), start


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PoolStatus:
    """A pool's current period: what is spent, what running calls hold, and its ceilings."""

    name: str
    period: Period | None
    period_start: dt.datetime | None
    """The current period's start (UTC); None: the pool has no period."""
    spent_usd: float
    reserved_usd: float
    """Held by calls not yet settled (live leases)."""
    spent_tokens: int
    reserved_tokens: int
    max_cost_usd: float | None
    max_total_tokens: int | None


@final
class BudgetPool:
    """A cost or token ceiling shared by every run given it, for a period (`AgentLoop(pools=...)`,
    `run(goal, pools=...)`): each model call of those runs reserves its worst case from the pool
    before it is sent.

    Args:
        name: the pool's name in its store (checked like a task id: 1 to 200 characters, no
            control character).
        max_cost_usd: the ceiling in dollars per period (None: cost is not limited).
        max_total_tokens: the ceiling in tokens per period (None: tokens are not limited).
        period: `"hour"`, `"day"`, `"month"` (UTC boundaries), or None: one period forever.
        store: where the spend is kept (default: a new `MemoryPoolStore`, this pool's alone).
        lease_s: how long a hold outlives a holder that stopped renewing it (a process that
            died): after it, the hold no longer counts. A running call renews its holds
            (`renewed`); a `MemoryPoolStore`'s holds have no lease.
        clock: a zero-argument callable returning an aware datetime (default: now in UTC).

    Raises:
        ConfigurationError: a bad name, no ceiling, a negative or non-finite ceiling, a bad
            period, a lease not above 0.
    """

    __slots__ = (
        "_clock",
        "_held",
        "_latest",
        "lease_s",
        "max_cost_usd",
        "max_total_tokens",
        "name",
        "period",
        "store",
    )

    def __init__(
        self,
        name: str,
        *,
        max_cost_usd: float | None = None,
        max_total_tokens: int | None = None,
        period: Period | None = None,
        store: PoolStore | None = None,
        lease_s: float = 60.0,
        clock: Callable[[], dt.datetime] | None = None,
    ) -> None:
        problem = name_problem(name, "pool name")
        if problem is not None:
            shown = repr(name)
            raise ConfigurationError(
                f"pool name {shown if len(shown) <= 80 else shown[:77] + '...'} is invalid: {problem}"
            )
        if max_cost_usd is None and max_total_tokens is None:
            raise ConfigurationError(f"budget pool {name!r} needs max_cost_usd or max_total_tokens")
        if max_cost_usd is not None and not 0 <= max_cost_usd < float("inf"):
            raise ConfigurationError(f"budget pool {name!r}: max_cost_usd must be a finite number >= 0")
        if max_total_tokens is not None and (isinstance(max_total_tokens, bool) or max_total_tokens < 0):
            raise ConfigurationError(f"budget pool {name!r}: max_total_tokens must be an int >= 0")
        if period not in (None, "hour", "day", "month"):
            raise ConfigurationError(f"budget pool {name!r}: period is 'hour', 'day', 'month' or None")
        if not 0 < lease_s < float("inf"):
            raise ConfigurationError(f"budget pool {name!r}: lease_s must be above 0")
        self.name = name
        self.max_cost_usd = max_cost_usd
        """The ceiling in dollars per period: raise it (on every process) and stopped runs may resume."""
        self.max_total_tokens = max_total_tokens
        self.period: Period | None = period
        self.store: PoolStore = MemoryPoolStore() if store is None else store
        self.lease_s = lease_s
        self._clock = _utc_now if clock is None else clock
        self._latest: dt.datetime | None = None
        self._held: set[int] = set()
        """The ids of this process's grants from the pool not yet settled or released."""

    def __repr__(self) -> str:
        return f"BudgetPool({self.name!r}, max_cost_usd={self.max_cost_usd!r}, period={self.period!r})"

    @property
    def renewed(self) -> bool:
        """Whether a running call renews its holds in this pool: its store's holds can outlive
        their holder, so they have a lease (every store but `MemoryPoolStore`, whose holds die
        with the process that holds them; a store of your own is renewed)."""
        return not isinstance(self.store, MemoryPoolStore)

    def now(self) -> dt.datetime:
        """The pool's clock, never going back (a reading earlier than the latest counts as it).

        Raises:
            ConfigurationError: the clock returned a naive datetime.
        """
        reading = self._clock()
        if reading.tzinfo is None:
            raise ConfigurationError(f"budget pool {self.name!r}: its clock must return an aware datetime")
        if self._latest is None or reading > self._latest:
            self._latest = reading
        return self._latest

    async def reserve(self, claim: Claim) -> Grant | Shortfall:
        """Hold the claim's worst case in the store for the current period (see `Ledger`).

        A shortfall names this pool, its value and use in dollars (`max_cost_usd`) or tokens.
        Raises what the store raises when it cannot be reached: the call must not be sent.
        """
        now = self.now()
        key, _ = period_of(self.period, now)
        stamp = now.timestamp()
        hold = Hold(
            id=secrets.randbits(63),
            pool=self.name,
            period=key,
            holder=_HOLDER,
            input_tokens=claim.input_tokens,
            output_tokens=claim.output_tokens,
            input_nusd=price_nusd(claim.input_tokens * claim.input_usd),
            output_nusd=price_nusd(claim.output_usd),
            max_nusd=None if self.max_cost_usd is None else cost_nusd(self.max_cost_usd),
            max_tokens=self.max_total_tokens,
            now=stamp,
            expires_at=stamp + self.lease_s,
        )
        granted = await self.store.reserve(hold)
        if isinstance(granted, Shortfall):
            if granted.limit == "max_cost_usd":
                return Shortfall(
                    limit=granted.limit, value=granted.value / NANO, used=granted.used / NANO, pool=self.name
                )
            return dataclasses.replace(granted, pool=self.name)
        nusd, tokens = hold.held(granted)
        grant = Grant(id=hold.id, output_tokens=granted, tokens=tokens, cost_usd=nusd / NANO)
        self._held.add(grant.id)
        return grant

    async def settle(self, grant: Grant, *, cost_usd: float, tokens: int) -> None:
        """Charge what the call was billed to the period that reserved it (see `Ledger`)."""
        if grant.id in self._held:
            self._held.discard(grant.id)
            await self.store.settle(grant.id, nusd=cost_nusd(cost_usd), tokens=tokens)

    async def release(self, grant: Grant) -> None:
        """Free the grant's hold: nothing was billed (see `Ledger`)."""
        if grant.id in self._held:
            self._held.discard(grant.id)
            await self.store.release(grant.id)

    async def renew(self) -> None:
        """Extend the lease of every hold this process has in the pool (a call still running)."""
        expires_at = self.now().timestamp() + self.lease_s
        for grant_id in list(self._held):
            await self.store.renew(grant_id, expires_at)

    async def status(self) -> PoolStatus:
        """The current period's spend, holds and ceilings.

        Raises:
            Exception: what the store raises when it cannot be reached.
        """
        now = self.now()
        key, start = period_of(self.period, now)
        usage: PoolUsage = await self.store.usage(self.name, key, now.timestamp())
        return PoolStatus(
            name=self.name,
            period=self.period,
            period_start=start,
            spent_usd=usage.spent_nusd / NANO,
            reserved_usd=usage.reserved_nusd / NANO,
            spent_tokens=usage.spent_tokens,
            reserved_tokens=usage.reserved_tokens,
            max_cost_usd=self.max_cost_usd,
            max_total_tokens=self.max_total_tokens,
        )


def joined_pools(first: tuple[BudgetPool, ...], more: Iterable[object]) -> tuple[BudgetPool, ...]:
    """`first`, then each pool of `more` not in it already (one pool given twice counts once):
    a loop's pools and a run's.

    Raises:
        ConfigurationError: one of `more` is not a `BudgetPool`, or two pools share a name.
    """
    pools = list(first)
    if isinstance(more, BudgetPool | str):
        raise ConfigurationError("pools must be a list of BudgetPool, not one")
    for pool in more:
        if not isinstance(pool, BudgetPool):
            raise ConfigurationError(f"pools must be BudgetPool objects, got {type(pool).__name__}")
        if any(pool is seen for seen in pools):
            continue
        if any(pool.name == seen.name for seen in pools):
            raise ConfigurationError(
                f"two budget pools are named {pool.name!r}: a run would be charged twice"
            )
        pools.append(pool)
    return tuple(pools)
