"""What caching saved: `Usage.cache_savings_usd`, summed per response at the run's prices, shown
by the CLI's summary and `--json`; on the real SDK over the caching fake API (tests/cache_sim.py)."""

from __future__ import annotations

import json
import re
import runpy
from pathlib import Path
from typing import Any

import pytest
from anthropic.types import Usage as ApiUsage

import boundloop
from boundloop import AgentLoop, Budget, LoopState, ModelSettings, Price, ScriptedClient, tool
from boundloop.cli import main
from boundloop.prices import resolve_price
from tests.cache_sim import CachingAPI
from tests.fake_api import MODEL, Body, message, text_block, tool_use_block
from tests.helpers import text, tool_use
from tests.sdk_scripted import SDKScripted

PRICE = Price(
    input_per_mtok=3.0,
    output_per_mtok=15.0,
    cache_read_per_mtok=0.3,
    cache_write_per_mtok=3.75,
    cache_write_1h_per_mtok=6.0,
)
CACHED: dict[str, object] = {
    "cache_read_input_tokens": 10_000,
    "cache_creation_input_tokens": 2_000,
    "cache_creation": {"ephemeral_5m_input_tokens": 1_500, "ephemeral_1h_input_tokens": 500},
}
SAVED = (10_000 * (3.0 - 0.3) - 1_500 * (3.75 - 3.0) - 500 * (6.0 - 3.0)) / 1e6
"""The reads' discount minus both writes' premiums: $0.024375."""


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return key


def test_a_response_saves_the_reads_discount_minus_the_writes_premium() -> None:
    usage = ApiUsage.model_validate({"input_tokens": 100, "output_tokens": 50, **CACHED})
    assert PRICE.cache_savings(usage) == pytest.approx(SAVED, abs=1e-12)
    plain = ApiUsage(input_tokens=100, output_tokens=50)
    assert PRICE.cache_savings(plain) == 0.0


def test_savings_use_the_price_the_response_is_billed_at() -> None:
    """Above a long-context threshold every token is billed at the tier's rates: so is what
    caching saved."""
    tier = Price(input_per_mtok=6.0, output_per_mtok=22.5, cache_read_per_mtok=0.6)
    price = Price(input_per_mtok=3.0, output_per_mtok=15.0, cache_read_per_mtok=0.3, tiers=((200_000, tier),))
    usage = ApiUsage(input_tokens=1_000, output_tokens=10, cache_read_input_tokens=250_000)
    assert price.cache_savings(usage) == pytest.approx(250_000 * (6.0 - 0.6) / 1e6)


@pytest.mark.parametrize(
    "billing",
    [{}, {"inference_geo": "us"}, {"speed": "fast"}, {"service_tier": "batch"}, {"input_tokens": 300_000}],
)
def test_savings_are_the_cost_uncached_minus_the_cost_as_billed(billing: dict[str, object]) -> None:
    """Computed from the cached tokens alone (no uncached copy of the usage is made and
    costed): still exactly what the docstring defines, at a geography's multiplier, the fast and
    batch rates and a long-context tier alike."""
    tier = Price(input_per_mtok=6.0, output_per_mtok=22.5, cache_read_per_mtok=0.6)
    price = Price(input_per_mtok=3.0, output_per_mtok=15.0, tiers=((200_000, tier),))  # default cache rates
    usage = ApiUsage.model_validate({"input_tokens": 100, "output_tokens": 50, **CACHED, **billing})
    read, written = usage.cache_read_input_tokens or 0, usage.cache_creation_input_tokens or 0
    uncached = usage.model_copy(
        update={
            "input_tokens": usage.input_tokens + read + written,
            "cache_read_input_tokens": 0,
            "cache_creation_input_tokens": 0,
            "cache_creation": None,
        }
    )
    expected = price.cost(uncached) - price.cost(usage)
    assert expected > 0
    assert price.cache_savings(usage) == pytest.approx(expected, rel=1e-12)


async def test_the_run_sums_each_responses_savings() -> None:
    script = [
        tool_use(("lookup", {"key": "a"}), input_tokens=100, cache_creation_input_tokens=20_000),
        text("done", input_tokens=50, cache_read_input_tokens=20_000, cache_creation_input_tokens=300),
    ]
    loop = AgentLoop(
        ScriptedClient(script), model=MODEL, tools=[lookup], prices={MODEL: PRICE}, budget=Budget(max_steps=3)
    )
    result = await loop.run("Look a up.")
    written = (20_000 + 300) * (3.75 - 3.0)  # no `cache_creation` split: 5-minute writes
    assert result.usage.cache_savings_usd == pytest.approx((20_000 * (3.0 - 0.3) - written) / 1e6)
    assert (result.usage.cache_read_input_tokens, result.usage.cache_creation_input_tokens) == (
        20_000,
        20_300,
    )
    stored = LoopState.from_json(result.state.to_json())
    assert stored.usage.cache_savings_usd == result.usage.cache_savings_usd


async def test_writes_that_are_never_read_are_a_negative_saving() -> None:
    loop = AgentLoop(
        ScriptedClient([text("done", cache_creation_input_tokens=4_000)]),
        model=MODEL,
        prices={MODEL: PRICE},
        budget=Budget(max_steps=1),
    )
    result = await loop.run("Hi.")
    assert result.usage.cache_savings_usd == pytest.approx(-4_000 * 0.75 / 1e6)


@pytest.mark.filterwarnings("ignore::boundloop.UnpricedModelWarning")
async def test_a_model_without_a_price_has_no_savings() -> None:
    client = ScriptedClient([text("done", cache_read_input_tokens=4_000)])
    loop = AgentLoop(client, model="no-such-model", budget=Budget(max_steps=1))
    result = await loop.run("Hi.")
    assert result.usage.cost_usd is None
    assert result.usage.cache_savings_usd is None


def cached_loop() -> AgentLoop:
    """The CLI's factory: one response that read 10,000 tokens from the cache and wrote 2,000."""
    response = text("done")
    response["usage"] = {"input_tokens": 100, "output_tokens": 50, **CACHED}
    client = ScriptedClient([response])
    return AgentLoop(client, model=MODEL, prices={MODEL: PRICE}, budget=Budget(max_steps=1))


def test_the_summary_shows_the_cache_tokens_and_the_savings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "tests.test_cache_savings:cached_loop", "--goal", "Hi."]) == 0
    out = capsys.readouterr().out
    assert "100 in / 50 out · cache 10000 read / 2000 written" in out
    assert f"· caching saved ${SAVED:.4f}" in out


def test_json_has_the_cache_tokens_and_the_savings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "tests.test_cache_savings:cached_loop", "--goal", "Hi.", "--json"]) == 0
    usage = json.loads(capsys.readouterr().out)["usage"]
    assert (usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"]) == (10_000, 2_000)
    assert usage["cache_savings_usd"] == round(SAVED, 6)


async def test_a_run_over_the_caching_api_saves_what_each_response_billed() -> None:
    """The real AsyncAnthropic over the caching fake: automatic caching (a top-level
    `cache_control`) reads each turn's prefix from the previous one; the run's savings are each
    billed response's, at the model's default price."""
    system = "You look keys up. " * 400
    replies: list[Any] = [
        Body(json=message([tool_use_block(f"toolu_01{n:04d}", "lookup", {"key": f"k{n}"})], "tool_use", n=n))
        for n in range(3)
    ]
    api = CachingAPI([*replies, Body(json=message([text_block("done")], n=3))])
    loop = AgentLoop(
        api.client(),
        model=MODEL,
        system=system,
        tools=[lookup],
        settings=ModelSettings(cache_control={"type": "ephemeral"}),
        budget=Budget(max_steps=5),
    )
    result = await loop.run("Look up k0, k1 and k2.")
    assert result.answer == "done"
    assert [usage.cache_read_input_tokens > 0 for usage in api.usages] == [False, True, True, True]
    assert result.usage.cache_read_input_tokens == sum(u.cache_read_input_tokens for u in api.usages)
    price = resolve_price(MODEL)
    assert price is not None
    expected = sum(price.cache_savings(response.usage) for response in result.state.responses)
    assert result.usage.cache_savings_usd == pytest.approx(expected)
    assert (result.usage.cache_savings_usd or 0.0) > 0


COST_DOC = Path(__file__).resolve().parents[1] / "docs" / "cost.md"


def caching_saved_blocks() -> list[str]:
    """The python blocks of docs/cost.md's "## What caching saved" section."""
    text = COST_DOC.read_text(encoding="utf-8").split("## What caching saved", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


@pytest.mark.parametrize("on_the_sdk", [False, True], ids=["scripted", "sdk"])
def test_the_cost_guide_savings_example_runs(
    on_the_sdk: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each block prints what its comments say, on `ScriptedClient` and on the real SDK."""
    if on_the_sdk:
        monkeypatch.setattr(boundloop, "ScriptedClient", SDKScripted)
    blocks = caching_saved_blocks()
    assert blocks
    for index, source in enumerate(blocks):
        script = tmp_path / f"cost_{index}.py"
        script.write_text(source, encoding="utf-8")
        runpy.run_path(str(script), run_name="__main__")
        promised = re.findall(r"^ *print\(.*\)  # (.*)$", source, flags=re.MULTILINE)
        assert promised
        assert capsys.readouterr().out.splitlines() == promised
