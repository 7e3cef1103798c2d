"""Replay: a recorded run re-driven with no model and no tools reproduces its trajectory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from boundloop import Policy, ScriptedClient, StopReason, replay
from tests.test_continuation import EXTRA
from tests.test_loop import TRAJECTORIES, make_loop

JSON = dict[str, Any]
CASES = [pytest.param(p.values[0], p.values[1], id=p.id) for p in TRAJECTORIES] + [
    pytest.param(p.values[0], p.values[1], id=p.id) for p in EXTRA
]


@pytest.mark.parametrize(("script", "options"), CASES)
async def test_replay_reproduces_every_trajectory(script: list[JSON], options: JSON, tmp_path: Path) -> None:
    """From the state, from the trace file, and through the same loop: the same trajectory."""
    loop = make_loop(ScriptedClient(script), **options)
    result = await loop.run("goal")
    from_state = await replay(result.state)
    assert from_state.identical, from_state.describe()
    assert from_state.provenance_changes == []
    assert from_state.result is not None
    assert from_state.result.stop_reason is result.stop_reason
    path = tmp_path / "run.jsonl"
    await anyio.to_thread.run_sync(result.write_events, path)
    from_trace = await replay(path)
    assert from_trace.identical, from_trace.describe()
    assert len(from_trace.expected) > len(from_state.expected)  # transitions and decisions too
    through_loop = await replay(result.state, make_loop(ScriptedClient([]), **options))
    assert through_loop.identical, through_loop.describe()


async def test_a_policy_change_shows_the_first_divergence(tmp_path: Path) -> None:
    """Forbidding a tool the run used makes replay report where the trajectories part."""
    script = [
        {
            "stop_reason": "tool_use",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"key": "a"}}],
        },
        {"stop_reason": "end_turn", "content": [{"type": "text", "text": "value-a"}]},
    ]
    result = await make_loop(ScriptedClient(script)).run("goal")
    path = tmp_path / "run.jsonl"
    await anyio.to_thread.run_sync(result.write_events, path)
    stricter = make_loop(ScriptedClient([]), policy=Policy(forbidden={"lookup"}))
    report = await replay(path, stricter)
    assert not report.identical
    divergence = report.divergence
    assert divergence is not None
    assert divergence.expected == "decide lookup toolu_1: execute"
    assert divergence.got == "decide lookup toolu_1: block"
    assert "the policy differs from the recording's" in report.provenance_changes
    assert report.result is not None
    assert report.result.stop_reason is StopReason.POLICY_BLOCKED
    assert "diverged at step" in report.describe()
    assert report.to_dict()["identical"] is False


async def test_a_file_that_is_not_a_recording_is_refused(tmp_path: Path) -> None:
    """Replay names what is wrong with its source instead of crashing inside a run."""
    path = tmp_path / "notes.jsonl"
    await anyio.Path(path).write_text(
        '{"kind": "transition", "step": 0, "at": 0, "source": "start", "dest": "assemble", '
        '"trigger": "begin"}\n',
        encoding="utf-8",
    )
    with pytest.raises(ValueError, match="no stop event"):
        await replay(path)


async def test_a_run_resumed_after_human_decisions_replays_through_them() -> None:
    """The human's approvals, denial reason and reply are read back from the recorded answers."""
    from boundloop import MemoryStore
    from tests.test_resume import TWO_REFUNDS, Ledger
    from tests.test_resume import make_loop as refund_loop

    store = MemoryStore()
    await refund_loop([TWO_REFUNDS], store, Ledger()).run("Refund?", task_id="t")
    later = refund_loop(
        [{"stop_reason": "end_turn", "content": [{"type": "text", "text": "ok"}]}], store, Ledger()
    )
    result = await later.resume("t", approvals={"toolu_r1": True, "toolu_r2": "over the limit"})
    report = await replay(result.state)
    assert report.identical, report.describe()
    assert report.result is not None
    assert report.result.stop_reason is StopReason.COMPLETED
    assert report.result.events[0].kind == "resumed"  # it stopped for the human
