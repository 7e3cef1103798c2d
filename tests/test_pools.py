"""Budget pools (docs/pools.md): ceilings many runs share, reserved before every model call.

On the real `AsyncAnthropic` over the fake API (`tests/pool_api.py`: `count_tokens`, each
request billed exactly its worst case). The processes sharing a SQLite pool, and a holder
killed with SIGKILL, are in `tests/test_pool_processes.py`.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import sys
from pathlib import Path
from typing import Any, final

import anyio
import pytest

from boundloop import (
    AgentLoop,
    Budget,
    BudgetExceeded,
    BudgetPool,
    ConfigurationError,
    MemoryPoolStore,
    MemoryStore,
    Observers,
    ScriptedClient,
    ScriptExhausted,
    SQLitePoolStore,
    StopReason,
    tool,
)
from boundloop.events import Stop
from boundloop.pools import Claim, Hold, PoolStore, PoolUsage, Shortfall
from tests.fake_api import MODEL
from tests.pool_api import OUTPUT_NUSD, PoolAPI, worst_nusd

NANO = 1_000_000_000
FIRST_CALL = worst_nusd({"messages": [{}], "max_tokens": 100})
"""A run's first call at max_tokens=100: 20 input tokens, 100 output ($0.00156)."""
SECOND_CALL = worst_nusd({"messages": [{}, {}, {}], "max_tokens": 100})
"""Its second call, after the tool's result: 60 input tokens ($0.00168)."""
RUN = FIRST_CALL + SECOND_CALL


def loop_of(api: PoolAPI, *, lookups: list[str] | None = None, **options: Any) -> AgentLoop:
    """A loop whose run makes two calls (a `lookup`, then the answer), counted exactly."""
    ran = [] if lookups is None else lookups

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        ran.append(key)
        return "value"

    settings: dict[str, Any] = {
        "model": MODEL,
        "max_tokens": 100,
        "budget": Budget(max_steps=4, count_tokens=True),
        "observers": Observers(metrics=None, tracing=None),
    }
    return AgentLoop(api.client(), tools=[lookup], **(settings | options))


def usd(nusd: int) -> float:
    return nusd / NANO


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0) -> dt.datetime:
    """A UTC datetime."""
    return dt.datetime(year, month, day, hour, minute, second, tzinfo=dt.UTC)


class Clock:
    """A settable clock for a pool."""

    def __init__(self, at: dt.datetime) -> None:
        self.at = at

    def __call__(self) -> dt.datetime:
        return self.at


def stores(tmp_path: Path) -> list[PoolStore]:
    return [MemoryPoolStore(), SQLitePoolStore(tmp_path / "pools.db")]


# -- the pool and its stores --------------------------------------------------------------


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_a_store_clamps_holds_settles_and_releases_exactly(tmp_path: Path, kind: str) -> None:
    """Both stores: a claim is clamped to what is left beside the holds, a shortfall says which
    ceiling, settling replaces the hold by the bill (in whole nanodollars), releasing frees it,
    and settling or releasing twice changes nothing."""
    store = MemoryPoolStore() if kind == "memory" else SQLitePoolStore(tmp_path / "pools.db")
    pool = BudgetPool("tenant-a", max_cost_usd=0.002, store=store)
    claim = Claim(input_tokens=20, output_tokens=100, input_usd=3e-6, output_usd=15e-6)
    first = await pool.reserve(claim)
    assert not isinstance(first, Shortfall)
    assert (first.output_tokens, first.tokens, first.cost_usd) == (100, 120, 0.00156)
    second = await pool.reserve(claim)  # $0.00044 left: 60,000 for the input, 25 output tokens
    assert not isinstance(second, Shortfall)
    assert second.output_tokens == (2_000_000 - 1_560_000 - 60_000) // OUTPUT_NUSD == 25
    refused = await pool.reserve(claim)
    assert refused == Shortfall(limit="max_cost_usd", value=0.002, used=0.001995, pool="tenant-a")
    status = await pool.status()
    assert (status.spent_usd, status.reserved_usd, status.reserved_tokens) == (0.0, 0.001995, 165)
    await pool.settle(first, cost_usd=0.00031, tokens=40)
    await pool.settle(first, cost_usd=0.00031, tokens=40)  # once only
    await pool.release(second)
    await pool.release(second)
    status = await pool.status()
    assert (status.spent_usd, status.spent_tokens, status.reserved_usd) == (0.00031, 40, 0.0)
    assert status.period is None
    assert status.period_start is None
    assert [usage.pool for usage in await store.list(0.0)] == ["tenant-a"]


async def test_a_token_ceiling_clamps_the_output() -> None:
    """`max_total_tokens`: the input and the output must fit; one token short is a shortfall."""
    pool = BudgetPool("tokens", max_total_tokens=150)
    granted = await pool.reserve(Claim(input_tokens=100, output_tokens=1000))
    assert not isinstance(granted, Shortfall)
    assert granted.output_tokens == 50
    assert await pool.reserve(Claim(input_tokens=0, output_tokens=10)) == Shortfall(
        limit="max_total_tokens", value=150, used=150, pool="tokens"
    )


async def test_a_hold_whose_lease_ended_no_longer_counts(tmp_path: Path) -> None:
    """A hold nobody renewed (its holder died) stops counting when `lease_s` has passed on the
    clock of the pool reading it; a settle that comes after still charges its period."""
    store = SQLitePoolStore(tmp_path / "pools.db")
    clock = Clock(dt.datetime(2026, 12, 2, 10, 0, tzinfo=dt.UTC))
    holder = BudgetPool("p", max_cost_usd=0.0015, store=store, lease_s=60, clock=clock)
    claim = Claim(input_tokens=0, output_tokens=100, input_usd=3e-6, output_usd=15e-6)
    held = await holder.reserve(claim)
    assert not isinstance(held, Shortfall)
    other = BudgetPool("p", max_cost_usd=0.0015, store=store, clock=clock)
    assert isinstance(await other.reserve(claim), Shortfall)
    clock.at += dt.timedelta(seconds=59)
    assert isinstance(await other.reserve(claim), Shortfall)
    clock.at += dt.timedelta(seconds=2)
    assert not isinstance(await other.reserve(claim), Shortfall)
    await holder.settle(held, cost_usd=0.0001, tokens=10)
    assert (await other.status()).spent_usd == 0.0001


async def test_a_memory_pools_hold_counts_until_it_is_settled() -> None:
    """A `MemoryPoolStore`'s hold has no lease (it dies with its process, the holder): it counts
    however long its call runs, and is not renewed."""
    clock = Clock(dt.datetime(2026, 12, 2, 10, 0, tzinfo=dt.UTC))
    holder = BudgetPool("p", max_cost_usd=0.0015, store=MemoryPoolStore(), lease_s=60, clock=clock)
    assert not holder.renewed
    claim = Claim(input_tokens=0, output_tokens=100, input_usd=3e-6, output_usd=15e-6)
    held = await holder.reserve(claim)
    assert not isinstance(held, Shortfall)
    other = BudgetPool("p", max_cost_usd=0.0015, store=holder.store, clock=clock)
    clock.at += dt.timedelta(days=2)
    assert isinstance(await other.reserve(claim), Shortfall)
    assert (await other.status()).reserved_usd == 0.0015
    await holder.settle(held, cost_usd=0.0001, tokens=10)
    assert not isinstance(await other.reserve(claim), Shortfall)


async def test_a_clock_set_back_changes_nothing() -> None:
    """Once a pool has read a time, an earlier reading counts as it: the period does not go
    back to the day before, and a lease does not grow shorter or longer."""
    clock = Clock(dt.datetime(2026, 12, 3, 0, 0, 5, tzinfo=dt.UTC))
    pool = BudgetPool("p", max_cost_usd=1.0, period="day", clock=clock)
    assert (await pool.status()).period_start == dt.datetime(2026, 12, 3, tzinfo=dt.UTC)
    clock.at = dt.datetime(2026, 12, 2, 23, 0, tzinfo=dt.UTC)  # an hour back, across midnight
    assert pool.now() == dt.datetime(2026, 12, 3, 0, 0, 5, tzinfo=dt.UTC)
    granted = await pool.reserve(Claim(input_tokens=0, output_tokens=10, output_usd=1e-6))
    assert not isinstance(granted, Shortfall)
    await pool.settle(granted, cost_usd=0.25, tokens=10)
    status = await pool.status()
    assert (status.period_start, status.spent_usd) == (dt.datetime(2026, 12, 3, tzinfo=dt.UTC), 0.25)
    assert (await pool.store.usage("p", "2026-12-02", 0.0)).spent_nusd == 0


@pytest.mark.parametrize(
    ("period", "before", "after", "keys"),
    [
        ("hour", utc(2026, 12, 2, 10, 59, 59), utc(2026, 12, 2, 11), ("2026-12-02T10", "2026-12-02T11")),
        ("day", utc(2026, 12, 2, 23, 59, 59), utc(2026, 12, 3), ("2026-12-02", "2026-12-03")),
        ("month", utc(2026, 12, 31, 23, 59, 59), utc(2027, 1, 1), ("2026-12", "2027-01")),
    ],
)
async def test_periods_roll_over_at_utc_boundaries(
    tmp_path: Path, period: Any, before: dt.datetime, after: dt.datetime, keys: tuple[str, str]
) -> None:
    """A reservation made a second before the boundary and settled after it is charged to the
    period that made it; the new period starts empty, its ceiling whole again."""
    clock = Clock(before)
    store = SQLitePoolStore(tmp_path / "pools.db")
    pool = BudgetPool("p", max_cost_usd=0.0015, period=period, store=store, clock=clock)
    claim = Claim(input_tokens=0, output_tokens=100, input_usd=3e-6, output_usd=15e-6)
    granted = await pool.reserve(claim)
    assert not isinstance(granted, Shortfall)
    assert isinstance(await pool.reserve(claim), Shortfall)
    clock.at = after
    await pool.settle(granted, cost_usd=0.0015, tokens=100)
    assert (await store.usage("p", keys[0], 0.0)).spent_nusd == 1_500_000
    status = await pool.status()
    assert (status.spent_usd, status.reserved_usd) == (0.0, 0.0)
    assert status.period_start == after
    assert not isinstance(await pool.reserve(claim), Shortfall)
    assert [usage.period for usage in await store.list(0.0)] == [keys[1]]


def test_a_pool_is_checked_when_made() -> None:
    """Pool names are checked like task ids; a pool needs a ceiling; two pools of one name are
    refused (a run would be charged twice); a clock must be aware."""
    with pytest.raises(
        ConfigurationError, match=r"pool name 'a\\nb' is invalid: it holds the control character"
    ):
        BudgetPool("a\nb", max_cost_usd=1.0)
    with pytest.raises(ConfigurationError, match="pool name '' is invalid: it is empty"):
        BudgetPool("", max_cost_usd=1.0)
    with pytest.raises(ConfigurationError, match="a pool name has at most 200"):
        BudgetPool("x" * 201, max_cost_usd=1.0)
    with pytest.raises(ConfigurationError, match="needs max_cost_usd or max_total_tokens"):
        BudgetPool("p")
    with pytest.raises(ConfigurationError, match="period is 'hour', 'day', 'month' or None"):
        BudgetPool("p", max_cost_usd=1.0, period="week")  # type: ignore[arg-type]
    naive = BudgetPool("p", max_cost_usd=1.0, clock=lambda: dt.datetime(2026, 12, 2))
    with pytest.raises(ConfigurationError, match="aware datetime"):
        naive.now()
    api = PoolAPI()
    with pytest.raises(ConfigurationError, match="two budget pools are named 'p'"):
        loop_of(api, pools=[BudgetPool("p", max_cost_usd=1.0), BudgetPool("p", max_cost_usd=2.0)])
    with pytest.raises(ConfigurationError, match="a list of BudgetPool"):
        loop_of(api, pools=BudgetPool("p", max_cost_usd=1.0))


# -- runs under pools ---------------------------------------------------------------------


async def test_a_pool_that_cannot_cover_a_call_stops_the_run_before_it_is_sent() -> None:
    """A pool covering the first call and no output token of the second: the second is not
    sent; the run stops `cost_budget`, its stop detail (saying it is resumable), its `Stop`
    event and `BudgetExceeded` naming the pool; the pool holds exactly what was billed."""
    api = PoolAPI()
    pool = BudgetPool("tenant-a", max_cost_usd=usd(FIRST_CALL + 60 * 3_000))  # the second's input only
    result = await loop_of(api, pools=[pool], store=MemoryStore()).run("Look it up.")

    assert result.stop_reason is StopReason.COST_BUDGET
    assert len(api.requests) == 1
    detail = result.state.stop_detail or ""
    assert detail.startswith("the budget pool 'tenant-a': max_cost_usd=0.00174 cannot cover the next call")
    assert detail.endswith("; resumable once the ceiling is raised")
    stop = next(event for event in result.events if isinstance(event, Stop))
    assert stop.limit is not None
    assert (stop.limit.limit, stop.limit.pool) == ("max_cost_usd", "tenant-a")
    with pytest.raises(BudgetExceeded) as raised:
        result.unwrap()
    assert (raised.value.limit, raised.value.pool, raised.value.value) == (
        "max_cost_usd",
        "tenant-a",
        0.00174,
    )
    status = await pool.status()
    assert (status.spent_usd, status.reserved_usd) == (usd(FIRST_CALL), 0.0)
    assert sum(api.billed) == FIRST_CALL


async def test_the_tightest_pool_clamps_max_tokens_and_every_pool_is_charged() -> None:
    """A loop's pool and a run's: each call reserves from both; the one with less room clamps
    `max_tokens`; both are charged what was billed."""
    api = PoolAPI()
    wide = BudgetPool("team-month", max_cost_usd=1.0, period="month")
    tight = BudgetPool(
        "burn-hour", max_cost_usd=usd(FIRST_CALL + 60 * 3_000 + 40 * OUTPUT_NUSD), period="hour"
    )
    result = await loop_of(api, pools=[wide]).run("Look it up.", pools=[tight])

    assert result.stop_reason is StopReason.COMPLETED
    assert [body["max_tokens"] for body in api.requests] == [100, 40]
    billed = usd(sum(api.billed))
    assert (await wide.status()).spent_usd == billed == (await tight.status()).spent_usd


async def test_a_pool_store_that_cannot_be_reached_fails_the_call_closed(tmp_path: Path) -> None:
    """A SQLite file whose write lock another process holds past the store's timeout, and one
    that cannot be opened: no request is sent, the run stops `failed` with one sentence naming
    the pool, and nothing is left held."""
    path = tmp_path / "pools.db"
    store = SQLitePoolStore(path, timeout_s=0.05)
    pool = BudgetPool("tenant-a", max_cost_usd=1.0, store=store)
    await pool.status()  # the tables exist
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    api = PoolAPI()
    try:
        result = await loop_of(api, pools=[pool]).run("Look it up.")
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert result.stop_reason is StopReason.FAILED
    assert api.requests == []
    assert result.state.stop_detail == (
        "the budget pool 'tenant-a' could not be reached (OperationalError: database is locked), "
        "so the model call was not sent"
    )
    assert (await pool.status()).reserved_usd == 0.0

    missing = BudgetPool("tenant-b", max_cost_usd=1.0, store=SQLitePoolStore(tmp_path / "no" / "pools.db"))
    result = await loop_of(api, pools=[missing]).run("Look it up.")
    assert (result.stop_reason, api.requests) == (StopReason.FAILED, [])
    assert "the budget pool 'tenant-b' could not be reached (OperationalError: unable to open" in (
        result.state.stop_detail or ""
    )


async def test_a_second_pool_failing_releases_what_the_first_held(tmp_path: Path) -> None:
    """Reserved from the first pool, then the second's store fails: the first's hold is
    released, nothing sent."""
    first = BudgetPool("first", max_cost_usd=1.0)
    broken = BudgetPool("broken", max_cost_usd=1.0, store=SQLitePoolStore(tmp_path / "no" / "x.db"))
    api = PoolAPI()
    result = await loop_of(api, pools=[first, broken]).run("Look it up.")
    assert (result.stop_reason, api.requests) == (StopReason.FAILED, [])
    status = await first.status()
    assert (status.spent_usd, status.reserved_usd) == (0.0, 0.0)


async def test_a_delegation_tree_charges_the_pools_of_every_run() -> None:
    """A lead with a pool delegates to a researcher (`as_tool`): the researcher's calls reserve
    from the lead's pool too, which is charged every call of the tree."""
    api = PoolAPI()
    pool = BudgetPool("tenant-a", max_cost_usd=1.0)
    researcher = loop_of(api, name="researcher")
    lead_api = PoolAPI(tool_input={"task": "the key"})
    lead = AgentLoop(
        lead_api.client(),
        model=MODEL,
        max_tokens=100,
        tools=[researcher.as_tool("lookup", description="Research one key.")],
        budget=Budget(max_steps=4, count_tokens=True),
        observers=Observers(metrics=None, tracing=None),
        pools=[pool],
    )
    result = await lead.run("Look it up.")
    assert result.stop_reason is StopReason.COMPLETED
    assert len(api.requests) == 2
    assert len(lead_api.requests) == 2
    assert (await pool.status()).spent_usd == usd(sum(api.billed) + sum(lead_api.billed))


async def test_a_run_stopped_by_a_pool_resumes_once_its_ceiling_is_raised() -> None:
    """Stopped by the pool after the tool ran: resumable; raising the pool's ceiling and
    resuming goes on where it stopped: the first call is not sent again, the tool not run again."""
    api = PoolAPI()
    ran: list[str] = []
    pool = BudgetPool("tenant-a", max_cost_usd=usd(FIRST_CALL))
    other = BudgetPool("team", max_cost_usd=1.0)
    loop = loop_of(api, lookups=ran, pools=[pool], store=MemoryStore())
    stopped = await loop.run("Look it up.", task_id="t1", pools=[other])
    assert (stopped.stop_reason, stopped.resumable, len(api.requests), ran) == (
        StopReason.COST_BUDGET,
        True,
        1,
        ["k"],
    )
    assert stopped.state.pools == ["team", "tenant-a"]
    with pytest.raises(ConfigurationError, match=r"ran under the budget pools 'team': give them again"):
        await loop.resume("t1")  # the run's own pool not given: refused, never run without it
    again = await loop.resume("t1", pools=[other])  # the ceiling is as it was: stops again, sends nothing
    assert (again.stop_reason, len(api.requests)) == (StopReason.COST_BUDGET, 1)
    pool.max_cost_usd = 1.0
    done = await loop.resume("t1", pools=[other])
    assert (done.stop_reason, done.answer, ran, len(api.requests)) == (
        StopReason.COMPLETED,
        "the answer",
        ["k"],
        2,
    )
    assert not done.resumable
    assert (await pool.status()).spent_usd == usd(RUN)


async def test_a_run_stopped_by_its_own_budget_resumes_with_a_higher_one() -> None:
    """`resume(task_id, budget=Budget(...))`: a run stopped by its own cost ceiling goes on with
    the raised one; a run stopped by `max_steps` likewise; what ran is not run again."""
    api = PoolAPI()
    ran: list[str] = []
    loop = loop_of(
        api,
        lookups=ran,
        store=MemoryStore(),
        budget=Budget(max_steps=4, max_cost_usd=usd(FIRST_CALL + 60 * 3_000), count_tokens=True),
    )
    stopped = await loop.run("Look it up.", task_id="t1")
    assert (stopped.stop_reason, stopped.resumable, ran) == (StopReason.COST_BUDGET, True, ["k"])
    done = await loop.resume("t1", budget=Budget(max_steps=4, max_cost_usd=1.0, count_tokens=True))
    assert (done.stop_reason, ran, len(api.requests)) == (StopReason.COMPLETED, ["k"], 2)

    steps = loop_of(api, lookups=ran, store=MemoryStore(), budget=Budget(max_steps=1))
    stopped = await steps.run("Look it up.", task_id="t2")
    assert (stopped.stop_reason, stopped.resumable) == (StopReason.MAX_STEPS, True)
    done = await steps.resume("t2", budget=Budget(max_steps=2))
    assert (done.stop_reason, ran, len(api.requests)) == (StopReason.COMPLETED, ["k", "k"], 4)


async def test_a_run_that_answered_at_its_limit_is_not_resumable() -> None:
    """`on_exhausted="final_answer"`: the run's last turn is its answer, so there is nothing to
    go on from: not resumable, and `resume` refuses it."""
    api = PoolAPI()
    loop = loop_of(api, store=MemoryStore(), budget=Budget(max_steps=1, on_exhausted="final_answer"))
    result = await loop.run("Look it up.", task_id="t1")
    assert (result.stop_reason, result.resumable) == (StopReason.MAX_STEPS, False)
    from boundloop import NotResumable

    with pytest.raises(NotResumable):
        await loop.resume("t1", budget=Budget(max_steps=5))


@final
class Watched:
    """A `PoolStore` of the user's own: a `SQLitePoolStore` that says when a hold is renewed."""

    def __init__(self, path: Path) -> None:
        self.inner = SQLitePoolStore(path)
        self.renewed = anyio.Event()

    async def reserve(self, hold: Hold) -> int | Shortfall:
        return await self.inner.reserve(hold)

    async def settle(self, hold_id: int, *, nusd: int, tokens: int) -> None:
        await self.inner.settle(hold_id, nusd=nusd, tokens=tokens)

    async def release(self, hold_id: int) -> None:
        await self.inner.release(hold_id)

    async def renew(self, hold_id: int, expires_at: float) -> None:
        await self.inner.renew(hold_id, expires_at)
        self.renewed.set()

    async def usage(self, pool: str, period: str, now: float) -> PoolUsage:
        return await self.inner.usage(pool, period, now)

    async def list(self, now: float) -> list[PoolUsage]:
        return await self.inner.list(now)


async def test_a_running_call_renews_its_holds(tmp_path: Path) -> None:
    """While a model call runs, its pools' holds are renewed (every third of the lease): with
    the pool's clock moved far past the lease, the hold has lapsed until the next renewal, and
    counts again after it, so a live holder's hold never lapses for good. The store is one of
    the user's own (`PoolStore`): renewed, as a store whose holds may outlive their holder."""
    store = Watched(tmp_path / "pools.db")
    clock = Clock(dt.datetime(2026, 12, 2, 10, 0, tzinfo=dt.UTC))
    pool = BudgetPool("p", max_cost_usd=1.0, store=store, lease_s=0.3, clock=clock)
    api = PoolAPI()
    answer = api.handler
    seen: list[int] = []

    async def held_in_flight(request: Any) -> Any:
        if request.url.path.endswith("/count_tokens"):
            return await answer(request)
        clock.at += dt.timedelta(hours=1)
        store.renewed = anyio.Event()  # a renewal at the new time
        later = clock.at.timestamp()
        seen.append((await store.usage("p", "", later)).holds)  # lapsed: not renewed at this time yet
        with anyio.fail_after(5):
            await store.renewed.wait()
        seen.append((await store.usage("p", "", later)).holds)
        return await answer(request)

    api.handler = held_in_flight  # type: ignore[method-assign]
    loop = loop_of(api, pools=[pool], budget=Budget(max_steps=1, count_tokens=True))
    result = await loop.run("Look it up.")
    assert result.stop_reason is StopReason.MAX_STEPS
    assert seen == [0, 1]
    assert (await pool.status()).reserved_usd == 0.0


async def test_only_a_call_whose_holds_can_lapse_runs_a_renewer(tmp_path: Path) -> None:
    """A call under a pool whose holds have a lease (SQLite here) runs one task beside it that
    renews them; under a `MemoryPoolStore`'s pool, whose holds die with the process, it runs as
    many tasks as a call under no pool: no renewer is started."""
    tasks: list[int] = []

    async def one_call(pools: list[BudgetPool]) -> None:
        api = PoolAPI()
        answer = api.handler

        async def counted(request: Any) -> Any:
            if not request.url.path.endswith("/count_tokens"):
                tasks.append(len(anyio.get_running_tasks()))
            return await answer(request)

        api.handler = counted  # type: ignore[method-assign]
        loop = loop_of(api, pools=pools, budget=Budget(max_steps=1, count_tokens=True))
        assert (await loop.run("Look it up.")).stop_reason is StopReason.MAX_STEPS

    await one_call([])
    await one_call([BudgetPool("p", max_cost_usd=1.0, store=MemoryPoolStore())])
    await one_call([BudgetPool("p", max_cost_usd=1.0, store=SQLitePoolStore(tmp_path / "pools.db"))])
    none, memory, sqlite = tasks
    assert (memory, sqlite) == (none, none + 1)


async def test_an_error_of_a_call_under_pools_is_raised_as_itself() -> None:
    """The renewals run beside the call in a task group; what the call raises (a test script
    running out) still leaves `run()` as itself, not wrapped in a group, its hold released."""
    pool = BudgetPool("p", max_cost_usd=1.0)
    loop = AgentLoop(
        ScriptedClient([]),
        model=MODEL,
        budget=Budget(max_steps=2),
        observers=Observers(metrics=None, tracing=None),
        pools=[pool],
    )
    with pytest.raises(ScriptExhausted):
        await loop.run("Look it up.")
    assert (await pool.status()).reserved_usd == 0.0


_SQLITE_OPENED: list[str] = []


def _count_sqlite_connects(event: str, args: tuple[Any, ...]) -> None:
    if event == "sqlite3.connect" and _SQLITE_OPENED[:1] == ["counting"]:
        _SQLITE_OPENED.append(str(args[0]))


sys.addaudithook(_count_sqlite_connects)  # the interpreter's audit events: every sqlite3.connect


async def test_a_sqlite_pool_store_keeps_its_connections_open(tmp_path: Path) -> None:
    """A `SQLitePoolStore` opens a connection once, not for each statement: ten reservations one
    after another, their settlements and reads open one; ten at once open at most ten, kept for
    the next ten. A statement that fails (the write lock held past `timeout_s`) closes its
    connection and the next statement opens a new one."""
    path = tmp_path / "pools.db"
    store = SQLitePoolStore(path)
    pool = BudgetPool("p", max_cost_usd=1.0, store=store)
    claim = Claim(input_tokens=10, output_tokens=10, input_usd=3e-6, output_usd=15e-6)
    _SQLITE_OPENED[:] = ["counting"]
    try:
        for _ in range(10):
            granted = await pool.reserve(claim)
            assert not isinstance(granted, Shortfall)
            await pool.settle(granted, cost_usd=0.0001, tokens=20)
            await pool.status()
        assert _SQLITE_OPENED[1:] == [str(path)]

        async def reserve() -> None:
            assert not isinstance(await pool.reserve(claim), Shortfall)

        for _ in range(2):
            async with anyio.create_task_group() as group:
                for _ in range(10):
                    group.start_soon(reserve)
        assert 1 < len(_SQLITE_OPENED[1:]) <= 10

        impatient = SQLitePoolStore(path, timeout_s=0.05)
        waits = BudgetPool("p", max_cost_usd=1.0, store=impatient)
        _SQLITE_OPENED[:] = ["counting"]
        assert not isinstance(await waits.reserve(claim), Shortfall)
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process's writer, holding the lock
        with pytest.raises(sqlite3.OperationalError, match="locked"):
            await waits.reserve(claim)
        other.execute("ROLLBACK")
        other.close()
        assert len(_SQLITE_OPENED[1:]) == 2  # its first, and the other writer's
        assert not isinstance(await waits.reserve(claim), Shortfall)
        assert len(_SQLITE_OPENED[1:]) == 3  # the failed statement's connection was closed
        await impatient.aclose()
    finally:
        _SQLITE_OPENED[:] = []
        await store.aclose()
