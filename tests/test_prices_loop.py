"""A loop's price: genai-prices' or the caller's, and a model without one warns once and is not costed."""

from __future__ import annotations

import io
import math
import re
import warnings

import anyio
import pytest
from rich.console import Console

from boundloop import AgentLoop, Budget, LoopResult, LoopState, Observers, Price, ScriptedClient
from boundloop import prices as prices_module
from boundloop.cli._view import RunView
from boundloop.errors import ConfigurationError
from boundloop.prices import PRICES, UnpricedModelWarning
from boundloop.redaction import Redaction

ANSWER = {
    "stop_reason": "end_turn",
    "content": [{"type": "text", "text": "done"}],
    "usage": {"input_tokens": 1_000, "output_tokens": 200},
}


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test starts with no model warned about yet."""
    monkeypatch.setattr(prices_module, "_warned", set())


def build(model: str, **options: object) -> AgentLoop:
    settings: dict[str, object] = {
        "budget": Budget(max_steps=2),
        "observers": Observers(metrics=None),
    } | options
    return AgentLoop(ScriptedClient([ANSWER]), model=model, **settings)  # type: ignore[arg-type]


def summary(loop: AgentLoop, result: LoopResult) -> str:
    """The command's summary of a run."""
    out = io.StringIO()
    view = RunView(Console(file=out, width=200, color_system=None))
    view.start(loop, "Go.")
    view.summary(result)
    return out.getvalue()


def test_a_loop_on_an_unknown_model_warns_once_at_the_agentloop_line() -> None:
    """The warning points at the `AgentLoop(...)` line of the caller, and comes once per model."""
    with pytest.warns(
        UnpricedModelWarning, match=r"^no price known for model 'house-model-1': cost not tracked"
    ) as caught:
        AgentLoop(
            ScriptedClient([]),
            model="house-model-1",
            budget=Budget(max_steps=1),
            observers=Observers(metrics=None),
        )
    (warning,) = caught
    assert warning.filename == __file__
    with warnings.catch_warnings(record=True) as again:
        warnings.simplefilter("always")
        build("house-model-1")
    assert again == []


def test_an_unknown_models_cost_is_reported_as_not_tracked() -> None:
    """usage.cost_usd is None — in the result, its JSON, a checkpointed state — and the summary says so."""
    with pytest.warns(UnpricedModelWarning):
        loop = build("house-model-1")
    result = anyio.run(loop.run, "Go.")
    assert result.usage.input_tokens == 1_000
    assert result.usage.cost_usd is None
    assert result.to_dict()["usage"]["cost_usd"] is None
    assert LoopState.from_json(result.state.to_json()).usage.cost_usd is None
    assert re.search(r"^cost +not tracked \(no price for the model\)", summary(loop, result), re.MULTILINE)


def test_a_known_models_cost_is_tracked_at_the_genai_prices_price() -> None:
    """claude-sonnet-4-6: 1,000 input tokens at $3/MTok and 200 output at $15, shown in the summary."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loop = build("claude-sonnet-4-6")
    assert loop.config.price is PRICES["claude-sonnet-4-6"]
    result = anyio.run(loop.run, "Go.")
    assert result.usage.cost_usd == pytest.approx((1_000 * 3 + 200 * 15) / 1e6)
    assert re.search(r"^cost +\$0\.0060", summary(loop, result), re.MULTILINE)


def test_an_override_wins_and_never_warns() -> None:
    """prices={...} wins over genai-prices, for a known model and for one genai-prices lacks."""
    house = Price(input_per_mtok=1, output_per_mtok=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert build("claude-sonnet-4-6", prices={"claude-sonnet-4-6": house}).config.price is house
        loop = build("house-model-1", prices={"house-model-1": house})
    assert loop.config.price is house
    assert anyio.run(loop.run, "Go.").usage.cost_usd == pytest.approx(1_200 / 1e6)


def test_a_loop_that_fails_to_build_does_not_warn() -> None:
    """A cost budget without a price is an error, not a warning too; so is any other bad setting."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ConfigurationError, match="max_cost_usd needs a price for model 'house-model-1'"):
            build("house-model-1", budget=Budget(max_steps=2, max_cost_usd=1.0))
        with pytest.raises(ConfigurationError):
            build("house-model-1", redaction=Redaction(patterns=["(unclosed"]))


def test_a_cost_budget_sees_the_long_context_rate() -> None:
    """Above 200k input tokens claude-sonnet-4-5 costs double: the next call is clamped at that rate."""
    paused = {**ANSWER, "stop_reason": "pause_turn", "usage": {"input_tokens": 250_000, "output_tokens": 0}}
    client = ScriptedClient([paused, ANSWER])
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-5",
        budget=Budget(max_steps=3, max_cost_usd=3.5),
        observers=Observers(metrics=None),
        max_tokens=64_000,
    )
    anyio.run(loop.run, "Go.")
    spent = 250_000 * 6 / 1e6  # the paused call, all at the long-context input rate
    left = 3.5 - spent - 250_000 * 6.0 / 1_000_000  # the next call's estimated input, at that rate too
    assert client.requests[1]["max_tokens"] == math.floor(left * 1_000_000 / 22.5)  # 22,222, not 64,000


def test_an_unknown_models_cost_is_not_tracked_when_no_call_succeeds() -> None:
    """A run whose first model call fails has no usage to price: its cost is still None (not
    tracked), never 0.0 — the model has no price whatever happened."""
    with pytest.warns(UnpricedModelWarning):
        loop = AgentLoop(
            ScriptedClient([RuntimeError("the API is down")]),
            model="house-model-1",
            budget=Budget(max_steps=2),
            observers=Observers(metrics=None),
        )
    result = anyio.run(loop.run, "Go.")
    assert result.stop_reason == "failed"
    assert result.usage.cost_usd is None
    assert LoopState.from_json(result.state.to_json()).usage.cost_usd is None
