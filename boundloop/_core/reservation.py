"""The reservation around each model call: the delegation tree's ledger and the run's budget pools.

Before a call is sent, its worst case (`claim`: the input estimate, exact with
`Budget.count_tokens`, and the `max_tokens` its own budget allows, at its model's price) is
reserved from the tree's ledger (`_core/ledger.py`, a run in a tree) and then from each budget
pool of the run (`boundloop/pools/`), each grant's output the next one's claim, so the tightest
clamps `max_tokens`. A ledger that cannot cover one output token stops the run at its ceiling
(`uncovered`); a pool whose store cannot be reached fails the call closed (`unreachable`). In
both cases what was held is released and no request is sent. While the call runs, the leases
of the pools whose holds have one (`BudgetPool.renewed`: a file's or a database's, not the
tree's ledger or a `MemoryPoolStore`'s, which die with the process) are renewed, by a task
beside the call; the response settles every grant with what it was billed, a failure or a
cancellation releases them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable

import anyio

from ..pools.ledger import Claim, Grant, Ledger, Shortfall
from ..pools.pool import BudgetPool
from ..records import Exceeded, Limit, StopReason
from ..statemachine.table import Trigger
from .answers import finish
from .budget import next_input_estimate, output_allowance
from .context import RunContext
from .pricing import call_price, ceiling_price


@dataclasses.dataclass(slots=True)
class Held:
    """What one model call holds: each ledger's grant, and the run's cost and tokens before it."""

    grants: list[tuple[Ledger, Grant]]
    before: tuple[float | None, int]

    @property
    def output_tokens(self) -> int:
        """The `max_tokens` the call is sent with: the last (tightest) grant's."""
        return self.grants[-1][1].output_tokens


def ledgers(ctx: RunContext) -> list[Ledger]:
    """The ledgers the run's next call reserves from: its tree's, then its pools."""
    found: list[Ledger] = [] if ctx.tree is None else [ctx.tree.ledger]
    found.extend(ctx.config.pools)
    return found


def claim(ctx: RunContext) -> Claim:
    """The next call's worst case, at its model's price (a model without one: the highest known)."""
    estimate = next_input_estimate(ctx)
    price = call_price(ctx) or ceiling_price(ctx.config.prices)
    price = price.at(estimate)
    return Claim(
        input_tokens=estimate,
        output_tokens=max(1, output_allowance(ctx)),
        input_usd=price.input_per_mtok / 1_000_000,
        output_usd=price.output_per_mtok / 1_000_000,
    )


async def reserve(ctx: RunContext, found: list[Ledger]) -> Held | Trigger:
    """Reserve the next call from each ledger; a ledger that cannot cover it, or cannot be
    reached, stops the run (its trigger returned) with nothing left held."""
    wanted = claim(ctx)
    held = Held(grants=[], before=marked(ctx))
    for ledger in found:
        try:
            granted = await ledger.reserve(wanted)
        except Exception as exc:  # the pool's store: fail closed, the call is not sent
            await _release(held)
            return unreachable(ctx, ledger, exc)
        if isinstance(granted, Shortfall):
            await _release(held)
            await show(ctx, [ledger])
            return uncovered(ctx, granted)
        held.grants.append((ledger, granted))
        wanted = dataclasses.replace(wanted, output_tokens=granted.output_tokens)
    return held


async def _release(held: Held) -> None:
    with anyio.CancelScope(shield=True):
        for ledger, grant in held.grants:
            await ledger.release(grant)


async def settle(ctx: RunContext, held: Held, *, billed: bool) -> None:
    """Settle each grant with what the call's response added to the run's cost and tokens, or
    release them when no response was accepted; never cut short by a cancellation. A pool's
    store failing here is recorded (the next call's reservation fails closed if it stays down)."""
    with anyio.CancelScope(shield=True):
        cost, tokens = marked(ctx)
        before_cost, before_tokens = held.before
        for ledger, grant in held.grants:
            try:
                if not billed:
                    await ledger.release(grant)
                    continue
                await ledger.settle(
                    grant,
                    # Not tracked (no price): the worst case stays spent.
                    cost_usd=grant.cost_usd if cost is None or before_cost is None else cost - before_cost,
                    tokens=tokens - before_tokens,
                )
            except Exception as exc:
                ctx.error("budget_pool", exc)
        await show(ctx, [ledger for ledger, _ in held.grants])


async def show(ctx: RunContext, found: list[Ledger]) -> None:
    """Set the loop's pool gauges (metrics on) from each pool's status: what the fleet has spent
    and holds, read after this process settled or was refused. A store failing here is skipped:
    metrics never fail a run."""
    metrics = ctx.config.metrics
    if metrics is None:
        return
    for ledger in found:
        if isinstance(ledger, BudgetPool):
            try:
                status = await ledger.status()
            except Exception:
                continue
            metrics.pool_usage(ledger.name, status.spent_usd, status.reserved_usd)


async def _renew(pools: list[BudgetPool], every: float) -> None:
    while True:
        await anyio.sleep(every)
        for pool in pools:
            with anyio.CancelScope(shield=True):
                try:
                    await pool.renew()
                except Exception:  # the next renewal tries again; until the lease ends the hold counts
                    continue


async def renewing(held: Held, call: Callable[[], Awaitable[Trigger]]) -> Trigger:
    """`call()`, the pools' holds renewed while it runs, every third of the shortest lease, so
    a hold outlives its lease only when its holder died; with no hold that has a lease, `call()`
    alone (no renewing task). What `call` raises is raised as itself once the renewals stopped
    (a task group would wrap it in a group)."""
    pools = [ledger for ledger, _ in held.grants if isinstance(ledger, BudgetPool) and ledger.renewed]
    if not pools:
        return await call()
    failure: Exception | None = None
    trigger = Trigger.HALT
    async with anyio.create_task_group() as group:
        group.start_soon(_renew, pools, min(pool.lease_s for pool in pools) / 3)
        try:
            trigger = await call()
        except Exception as exc:  # raised below, as itself
            failure = exc
        group.cancel_scope.cancel()
    if failure is not None:
        raise failure
    return trigger


async def around(ctx: RunContext, call: Callable[[int | None], Awaitable[Trigger]]) -> Trigger:
    """`call(max_tokens)` with the call reserved first (None: the run's budget decides), settled after."""
    found = ledgers(ctx)
    if not found:
        return await call(None)
    held = await reserve(ctx, found)
    if isinstance(held, Trigger):
        return held
    try:
        trigger = await renewing(held, lambda: call(held.output_tokens))
    except BaseException:
        await settle(ctx, held, billed=False)
        raise
    await settle(ctx, held, billed=trigger is Trigger.PROPOSED)
    return trigger


def marked(ctx: RunContext) -> tuple[float | None, int]:
    """The run's cost (None: not tracked) and tokens so far."""
    usage = ctx.state.usage
    return usage.cost_usd, usage.total_tokens


def uncovered(ctx: RunContext, shortfall: Shortfall) -> Trigger:
    """A ledger cannot cover the next call: it is not sent, and the run stops at the ceiling
    (`cost_budget`, `token_budget`; the pool named); a final-answer call is dropped, the stop's
    reason kept."""
    state = ctx.state
    whose = "the tree's" if shortfall.pool is None else f"the budget pool {shortfall.pool!r}:"
    where = "across the tree" if shortfall.pool is None else "in the pool's period"
    detail = (
        f"{whose} {shortfall.limit}={shortfall.value:g} cannot cover the next call "
        f"(spent and reserved {where}: {shortfall.used:g})"
    )
    if state.stop_reason is None:
        state.exceeded = Exceeded(
            limit=shortfall.limit, value=shortfall.value, used=shortfall.used, pool=shortfall.pool
        )
        finish(ctx, Limit.of(shortfall.limit).stop, detail)
    else:
        state.stop_detail = f"{state.stop_detail}; the final-answer call was not made: {detail}"
    state.final_call_due = False
    return Trigger.HALT


def unreachable(ctx: RunContext, ledger: Ledger, exc: Exception) -> Trigger:
    """A pool's store failed at the reservation: the call is not sent, and the run fails."""
    ctx.error("budget_pool", exc)
    state = ctx.state
    name = ledger.name if isinstance(ledger, BudgetPool) else "ledger"
    detail = (
        f"the budget pool {name!r} could not be reached ({type(exc).__name__}: {exc}), "
        "so the model call was not sent"
    )
    if state.stop_reason is None:
        finish(ctx, StopReason.FAILED, detail)
    else:
        state.stop_detail = f"{state.stop_detail}; the final-answer call was not made: {detail}"
    state.final_call_due = False
    return Trigger.HALT
