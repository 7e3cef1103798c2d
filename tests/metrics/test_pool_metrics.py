"""The budget pools' gauges on a real registry: `boundloop_pool_spent_usd{pool}` and
`boundloop_pool_reserved_usd{pool}`, set from the pool's store after each call a run settles (or
is refused), exactly what the fake API billed; labelled by the names the application gave its
pools, shared by the loops of a registry, never by a name the model wrote.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from boundloop import AgentLoop, Budget, BudgetPool, LoopMetrics, Observers, StopReason, tool
from tests.fake_api import MODEL
from tests.pool_api import PoolAPI, worst_nusd

FIRST_CALL = worst_nusd({"messages": [{}], "max_tokens": 100})
SECOND_CALL = worst_nusd({"messages": [{}, {}, {}], "max_tokens": 100})


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def loop_of(api: PoolAPI, metrics: LoopMetrics | None, **options: Any) -> AgentLoop:
    """A loop whose runs make two calls (a `lookup` of the model's key, then the answer)."""
    return AgentLoop(
        api.client(),
        model=MODEL,
        max_tokens=100,
        tools=[lookup],
        budget=Budget(max_steps=4, count_tokens=True),
        observers=Observers(metrics=metrics, tracing=None),
        **options,
    )


def gauges(registry: CollectorRegistry, pool: str) -> tuple[float | None, float | None]:
    """The pool's (spent, reserved) as scraped."""
    labels = {"pool": pool}
    return (
        registry.get_sample_value("boundloop_pool_spent_usd", labels),
        registry.get_sample_value("boundloop_pool_reserved_usd", labels),
    )


async def test_the_gauges_show_what_each_pool_spent_to_the_fakes_bill(
    registry: CollectorRegistry, metrics: LoopMetrics
) -> None:
    """Two runs of two loops on one registry, under a loop's pool and a run's pool: each pool's
    gauges show what its store says it spent (the fake's bills) and that nothing is held."""
    api = PoolAPI()
    daily = BudgetPool("tenant-a", max_cost_usd=1.0, period="day")
    team = BudgetPool("team", max_cost_usd=1.0)
    first = loop_of(api, metrics, name="support", pools=[daily])
    second = loop_of(api, metrics, name="billing")
    assert (await first.run("Look it up.")).stop_reason is StopReason.COMPLETED
    assert gauges(registry, "tenant-a") == ((FIRST_CALL + SECOND_CALL) / 1e9, 0.0)
    assert gauges(registry, "team") == (None, None)  # no run under it yet
    assert (await second.run("Look it up.", pools=[team])).stop_reason is StopReason.COMPLETED
    assert gauges(registry, "team") == ((FIRST_CALL + SECOND_CALL) / 1e9, 0.0)
    assert sum(api.billed) == 2 * (FIRST_CALL + SECOND_CALL)
    assert (await daily.status()).spent_usd == gauges(registry, "tenant-a")[0]


async def test_a_pool_that_stops_a_run_shows_what_it_spent_and_no_label_comes_from_the_model(
    registry: CollectorRegistry, metrics: LoopMetrics
) -> None:
    """A pool covering one call: the run stops `cost_budget` before its second, and the gauges
    show the first call's bill; the model's tool input never becomes a `pool` label."""
    api = PoolAPI(tool_input={"key": "evil-pool"})
    pool = BudgetPool("tenant-b", max_cost_usd=(FIRST_CALL + 1) / 1e9)
    result = await loop_of(api, metrics, pools=[pool]).run("Look it up.")
    assert result.stop_reason is StopReason.COST_BUDGET
    assert gauges(registry, "tenant-b") == (FIRST_CALL / 1e9, 0.0)
    pools = {
        sample.labels["pool"]
        for family in registry.collect()
        if family.name.startswith("boundloop_pool_")
        for sample in family.samples
    }
    assert pools == {"tenant-b"}
