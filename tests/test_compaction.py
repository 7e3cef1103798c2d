"""Server-side compaction and context editing (`AgentLoop(context=ContextManagement(...))`):
the request's edits and betas, the billed usage, the event, the transcript after a compaction
block, the retry after a full context window, checkpoints, resume and replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

import boundloop
from boundloop import (
    AgentLoop,
    Budget,
    Compaction,
    ConfigurationError,
    ContextManagement,
    ModelSettings,
    Observers,
    Policy,
    Price,
    SQLiteStore,
    StopReason,
    replay,
    tool,
)
from boundloop.events import Compacted
from boundloop.testing import ScriptedClient
from tests.api_rules import violations
from tests.docrun import python_blocks, runs_as_promised
from tests.helpers import text, tool_use
from tests.sdk_scripted import SDKScripted

JSON = dict[str, Any]
SUMMARY = {"type": "compaction", "content": "Earlier turns summarized.", "encrypted_content": "Epw_opaque"}
CLEAR_TOOLS: Any = {
    "type": "clear_tool_uses_20250919",
    "trigger": {"type": "input_tokens", "value": 30_000},
    "keep": {"type": "tool_uses", "value": 3},
}
CLEAR_THINKING: Any = {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}}


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def compacted(*content: JSON, stop_reason: str = "end_turn", compaction_in: int = 60_000) -> JSON:
    """A response whose request the API compacted: the block first, the compaction billed in
    `usage.iterations` (not in the top-level figures)."""
    return {
        "stop_reason": stop_reason,
        "content": [SUMMARY, *content],
        "usage": {
            "input_tokens": 900,
            "output_tokens": 50,
            "iterations": [
                {
                    "type": "compaction",
                    "input_tokens": compaction_in,
                    "output_tokens": 2_000,
                    "cache_read_input_tokens": 0,
                    "cache_creation_input_tokens": 0,
                },
                {
                    "type": "message",
                    "input_tokens": 900,
                    "output_tokens": 50,
                    "cache_read_input_tokens": 0,
                    "cache_creation_input_tokens": 0,
                },
            ],
        },
    }


def sent(agent: AgentLoop) -> list[JSON]:
    """The requests the loop's `ScriptedClient` received."""
    return cast(ScriptedClient, agent.client).requests


def loop(script: list[JSON], **options: Any) -> AgentLoop:
    settings: JSON = {
        "model": "claude-sonnet-4-6",
        "budget": Budget(max_steps=10),
        "observers": Observers(metrics=None),
        "tools": [lookup],
        "context": ContextManagement(compaction=Compaction(trigger_tokens=50_000)),
    }
    return AgentLoop(ScriptedClient(script), **(settings | options))


async def test_the_request_carries_the_compact_edit_and_its_beta() -> None:
    """Compaction and context editing are `context_management` edits with their betas, merged
    after the settings' own betas, thinking clearing first; the request goes to the beta API."""
    agent = loop(
        [text("done")],
        context=ContextManagement(
            compaction=Compaction(trigger_tokens=80_000, instructions="Keep the keys.", pause=True),
            edits=[CLEAR_TOOLS, CLEAR_THINKING],
        ),
        settings=ModelSettings(betas=["interleaved-thinking-2025-05-14"]),
    )
    await agent.run("go")
    request = sent(agent)[0]
    assert request["context_management"] == {
        "edits": [
            CLEAR_THINKING,
            CLEAR_TOOLS,
            {
                "type": "compact_20260112",
                "trigger": {"type": "input_tokens", "value": 80_000},
                "instructions": "Keep the keys.",
                "pause_after_compaction": True,
            },
        ]
    }
    assert request["betas"] == [
        "interleaved-thinking-2025-05-14",
        "context-management-2025-06-27",
        "compact-2026-01-12",
    ]


def test_an_edit_set_twice_is_a_configuration_error_naming_it() -> None:
    settings = ModelSettings(context_management={"edits": [CLEAR_TOOLS]})
    with pytest.raises(ConfigurationError, match="clear_tool_uses_20250919"):
        loop([], context=ContextManagement(edits=[CLEAR_TOOLS]), settings=settings)
    with pytest.raises(ConfigurationError, match="compact_20260112"):
        loop([], settings=ModelSettings(context_management={"edits": [{"type": "compact_20260112"}]}))
    with pytest.raises(ValueError, match="greater than or equal to 50000"):
        Compaction(trigger_tokens=10_000)  # below the API's minimum


def test_compaction_and_context_editing_are_contract_data() -> None:
    agent = loop(
        [],
        context=ContextManagement(
            compaction=Compaction(trigger_tokens=60_000, pause=True), edits=[CLEAR_TOOLS]
        ),
    )
    contract = agent.to_contract()
    assert contract.to_dict()["compaction"] == {"trigger_tokens": 60_000, "pause": True}
    spec = contract.spec
    assert spec.compaction == agent.config.spec.compaction
    assert spec.context_editing == (CLEAR_TOOLS,)
    plain = loop([], context=ContextManagement())
    assert plain.config.provenance.settings_sha256 is None  # nothing sent: nothing hashed
    assert agent.config.provenance.settings_sha256 is not None


async def test_a_compaction_is_billed_counted_and_reported() -> None:
    """The compaction iteration's tokens (left out of the top-level usage) count in the run's
    usage and cost; `Compacted` has the input before and the summary after."""
    price = Price(input_per_mtok=3.0, output_per_mtok=15.0)
    agent = loop(
        [compacted({"type": "text", "text": "done"})],
        prices={"claude-sonnet-4-6": price},
    )
    result = await agent.run("go")
    assert result.stop_reason is StopReason.COMPLETED
    usage = result.state.usage
    assert (usage.input_tokens, usage.output_tokens) == (60_900, 2_050)
    assert usage.cost_usd == pytest.approx((60_900 * 3.0 + 2_050 * 15.0) / 1e6)
    events = [event for event in result.events if isinstance(event, Compacted)]
    assert [(event.tokens_before, event.tokens_after) for event in events] == [(60_000, 2_000)]


async def test_a_compaction_counts_against_the_token_budget() -> None:
    """A compaction that spends the token budget stops the run before the next call."""
    agent = loop(
        [compacted(tool_use(("lookup", {"key": "a"}))["content"][0], stop_reason="tool_use"), text("x")],
        budget=Budget(max_steps=10, max_total_tokens=50_000),
    )
    result = await agent.run("go")
    assert result.stop_reason is StopReason.TOKEN_BUDGET
    assert len(sent(agent)) == 1


async def test_after_a_compaction_the_request_starts_at_the_block() -> None:
    """The transcript (and so the next request) keeps the opening and, from the turn holding
    the compaction block on, everything as received: the API drops what came before."""
    script = [
        tool_use(("lookup", {"key": "a"}), stop_reason="tool_use"),
        compacted(
            tool_use(("lookup", {"key": "b"}), ("lookup", {"key": "c"}))["content"][0], stop_reason="tool_use"
        ),
        text("done"),
    ]
    agent = loop(script)
    result = await agent.run("go")
    assert result.stop_reason is StopReason.COMPLETED
    requests = sent(agent)
    last = requests[2]["messages"]
    assert [message["role"] for message in last] == ["user", "assistant", "user"]
    assert last[0]["content"] == "go" or last[0]["content"][0]["text"] == "go"
    assert last[1]["content"][0] == SUMMARY
    assert result.state.messages[: len(last)] == last
    assert violations(requests, script) == []


async def test_pause_after_compaction_continues_the_turn() -> None:
    """pause=True: the API stops after the summary (stop_reason compaction); the turn is sent
    back as received and the model goes on."""
    script = [
        {
            "stop_reason": "compaction",
            "content": [SUMMARY],
            "usage": {"input_tokens": 10, "output_tokens": 5},
        },
        text("done"),
    ]
    agent = loop(script, context=ContextManagement(compaction=Compaction(trigger_tokens=50_000, pause=True)))
    result = await agent.run("go")
    assert result.stop_reason is StopReason.COMPLETED
    requests = sent(agent)
    assert requests[1]["messages"][-1] == {"role": "assistant", "content": [SUMMARY]}
    assert [type(event).__name__ for event in result.events].count("Compacted") == 1


async def test_a_full_context_window_compacts_once_and_retries() -> None:
    """model_context_window_exceeded with compaction on: the turn is dropped and the request
    sent again with the trigger at the API's minimum; the retry's answer completes the run."""
    script = [
        text("partial", stop_reason="model_context_window_exceeded"),
        compacted({"type": "text", "text": "done"}),
    ]
    agent = loop(script, context=ContextManagement(compaction=Compaction(trigger_tokens=180_000)))
    result = await agent.run("go")
    assert result.stop_reason is StopReason.COMPLETED
    first, retry = sent(agent)
    assert retry["messages"] == first["messages"]
    assert first["context_management"]["edits"][-1]["trigger"]["value"] == 180_000
    assert retry["context_management"]["edits"][-1]["trigger"]["value"] == 50_000


async def test_a_second_full_context_window_in_a_row_stops_context_exceeded() -> None:
    script = [
        text("partial", stop_reason="model_context_window_exceeded"),
        text("again", stop_reason="model_context_window_exceeded"),
    ]
    agent = loop(script)
    result = await agent.run("go")
    assert result.stop_reason is StopReason.CONTEXT_EXCEEDED
    assert len(sent(agent)) == 2


async def test_without_compaction_a_full_context_window_stops_at_once() -> None:
    agent = loop([text("partial", stop_reason="model_context_window_exceeded")], context=ContextManagement())
    result = await agent.run("go")
    assert result.stop_reason is StopReason.CONTEXT_EXCEEDED


async def test_a_run_compacted_mid_way_checkpoints_resumes_and_replays(tmp_path: Path) -> None:
    """Compacted, then paused for an approval: the checkpoint holds the compacted transcript;
    the resumed run sends it on; the recording replays identically."""
    script = [
        tool_use(("lookup", {"key": "a"}, "toolu_a"), stop_reason="tool_use"),
        compacted(tool_use(("lookup", {"key": "b"}, "toolu_b"))["content"][0], stop_reason="tool_use"),
        text("done"),
    ]
    store = SQLiteStore(tmp_path / "runs.db")
    agent = loop(script, store=store, policy=Policy(requires_approval={"lookup"}))
    first = await agent.run("go", task_id="t1")
    assert first.stop_reason is StopReason.NEEDS_HUMAN
    second = await agent.resume("t1", approvals={"toolu_a": True})  # the first lookup
    assert second.stop_reason is StopReason.NEEDS_HUMAN  # the second, after the compaction
    stored = await store.load("t1")
    assert stored is not None
    assert stored.messages[1]["content"][0] == SUMMARY  # type: ignore[index]
    done = await agent.resume("t1", approvals={"toolu_b": True})
    assert done.stop_reason is StopReason.COMPLETED
    requests = sent(agent)
    assert requests[-1]["messages"][:2] == stored.messages[:2]
    assert violations(requests, script) == []
    report = await replay([*first.events, *second.events, *done.events], agent)
    assert report.identical, report
    final = await store.load("t1")
    assert final is not None
    assert (await replay(final, agent)).identical


COST = Path(__file__).parent.parent / "docs" / "cost.md"


def _section_blocks() -> list[str]:
    text_ = COST.read_text(encoding="utf-8")
    section = text_.split("## Compaction and context editing", 1)[1].split("\n## ", 1)[0]
    return python_blocks(section)


@pytest.mark.parametrize("on_sdk", [False, True])
def test_the_cost_guide_compaction_example_runs(
    on_sdk: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/cost.md's compaction example prints what its comments say, on `ScriptedClient` and
    on the real SDK over a mock transport (tests/sdk_scripted.py)."""
    if on_sdk:
        monkeypatch.setattr(boundloop, "ScriptedClient", SDKScripted)
    (source,) = _section_blocks()
    runs_as_promised(source, tmp_path / "cost_compaction.py", capsys)
