"""The inspector's budget pools page (`/pools`): each pool of the pool store, and the runs a pool
stopped.

The pools come from the pool store the inspector was given (`app(..., pools=...)`, `boundloop
serve --pools STORE`): each pool's latest period, what it spent and what running calls hold,
and its ceiling. The runs come from the checkpoint store: the newest runs stopped `cost_budget`
or `token_budget` (a page of each) whose `exceeded.pool` names a pool, so a run a pool stopped
is listed even without the pool store.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Final

from ..checkpoint.paging import page_runs
from ..checkpoint.store import CheckpointStore
from ..errors import CheckpointCorrupt
from ..pools.store import NANO, PoolStore, PoolUsage
from ..records import StopReason
from ..state import LoopState, at_ceiling
from ._html import Html, cost, e, join
from ._runs import run_link

Redact = Callable[[str], str]

POOL_STOPS: Final = (StopReason.COST_BUDGET, StopReason.TOKEN_BUDGET)
"""The stop reasons a pool's ceiling gives a run."""


async def stopped_by_pools(store: CheckpointStore) -> list[tuple[str, LoopState]]:
    """The newest runs a budget pool stopped (a page of each pool stop reason), with the pool."""
    found: list[tuple[str, LoopState]] = []
    for reason in POOL_STOPS:
        page = await page_runs(store, status="stopped", stop_reason=str(reason))
        for row in page.runs:
            try:
                state = await store.load(row.task_id)
            except CheckpointCorrupt:
                continue
            if state is not None and state.exceeded is not None and state.exceeded.pool is not None:
                found.append((state.exceeded.pool, state))
    return found


def _ceiling(usage: PoolUsage) -> str:
    parts = [] if usage.max_nusd is None else [cost(usage.max_nusd / NANO)]
    if usage.max_tokens is not None:
        parts.append(f"{usage.max_tokens:,} tokens")
    return " and ".join(parts) or "-"


def _pool_row(usage: PoolUsage, stopped: int) -> Html:
    cells = [
        Html(f'<span class="pool">{e(usage.pool)}</span>'),
        e(usage.period or "-"),
        e(f"{cost(usage.spent_nusd / NANO)} ({usage.spent_tokens:,} tokens)"),
        e(f"{cost(usage.reserved_nusd / NANO)} in {usage.holds} call{'' if usage.holds == 1 else 's'}"),
        e(_ceiling(usage)),
        e(stopped),
    ]
    return Html("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")


def _stopped_row(pool: str, state: LoopState, redact: Redact) -> Html:
    cells = [
        e(pool),
        Html(f'<a class="task" href="{e(run_link(state.task_id))}">{e(state.task_id)}</a>'),
        e(state.stop_reason),
        Html(f'<span class="detail">{e(redact(state.stop_detail or ""))}</span>'),
        e(cost(state.usage.cost_usd)),
        e("yes" if at_ceiling(state) else "no"),
    ]
    return Html("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")


def pools_page(
    usages: list[PoolUsage] | str | None, stopped: list[tuple[str, LoopState]], redact: Redact
) -> Html:
    """The page: the pools (a list; None: no pool store given; a text: why it cannot be read),
    then the runs a pool stopped.

    Args:
        usages: each pool's latest period, from the pool store.
        stopped: the runs a pool stopped (`stopped_by_pools`).
        redact: the redactor of the run details.
    """
    by_pool: dict[str, int] = {}
    for pool, _ in stopped:
        by_pool[pool] = by_pool.get(pool, 0) + 1
    body = [Html("<h1>Budget pools</h1>")]
    if usages is None:
        body.append(
            Html(
                '<p class="note" id="no-pool-store">No pool store was given (<code>boundloop serve '
                "--pools STORE</code>): the runs a pool stopped are below.</p>"
            )
        )
    elif isinstance(usages, str):
        body.append(Html(f'<p class="error" id="pool-store-error">{e(usages)}</p>'))
    elif not usages:
        body.append(Html('<p id="no-pools">No budget pool in the pool store yet.</p>'))
    else:
        head = join(
            Html(f"<th>{e(name)}</th>")
            for name in ("pool", "period", "spent", "reserved now", "ceiling", "runs it stopped (listed)")
        )
        lines = join(_pool_row(usage, by_pool.get(usage.pool, 0)) for usage in usages)
        body.append(Html(f'<table id="pools"><thead><tr>{head}</tr></thead><tbody>{lines}</tbody></table>'))
    body.append(Html("<h2>Runs a pool stopped</h2>"))
    if not stopped:
        body.append(Html('<p id="none-stopped">No run in the store was stopped by a budget pool.</p>'))
    else:
        head = join(
            Html(f"<th>{e(name)}</th>")
            for name in ("pool", "task", "stop reason", "detail", "cost", "resumable")
        )
        lines = join(_stopped_row(pool, state, redact) for pool, state in stopped)
        body.append(
            Html(f'<table id="stopped-by-pools"><thead><tr>{head}</tr></thead><tbody>{lines}</tbody></table>')
        )
    return join(body)


async def read_pools(pools: PoolStore | None) -> list[PoolUsage] | str | None:
    """Each pool's latest period from `pools`; None without a pool store; the error's first line
    when the store cannot be read (the page still lists the runs)."""
    if pools is None:
        return None
    try:
        return await pools.list(time.time())
    except Exception as exc:  # the store's own errors: shown, never a 500
        reason = next(iter(str(exc).strip().splitlines()), "") or type(exc).__name__
        return f"The pool store cannot be read: {reason}"
