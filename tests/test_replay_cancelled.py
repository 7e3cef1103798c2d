"""A run cancelled while it waited for the model replays to the same stop: the replay's call past
the recorded responses is cancelled as the recorded one was (`boundloop replay` in a subprocess)."""

from __future__ import annotations

from pathlib import Path

import anyio

from boundloop import AgentLoop, Budget, LoopResult, ScriptedClient, StopReason, replay, tool
from boundloop.testing import Request
from tests.helpers import boundloop_cli


@tool
async def read_order(order_id: str) -> str:
    """Read one order."""
    return f"order {order_id}"


async def cancelled_run() -> LoopResult:
    """A run cancelled (`run.cancel()`) while its second model call waits for an answer."""
    waiting = anyio.Event()

    async def never_answers(_: Request) -> dict[str, object]:
        waiting.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    read = {"type": "tool_use", "name": "read_order", "input": {"order_id": "O-1"}}
    client = ScriptedClient([{"stop_reason": "tool_use", "content": [read]}, never_answers])
    loop = AgentLoop(client, model="claude-sonnet-4-6", tools=[read_order], budget=Budget(max_steps=4))
    async with loop.stream("Read O-1.") as run:
        with anyio.fail_after(10):
            await waiting.wait()
        await run.cancel()
    assert run.result is not None
    assert run.result.stop_reason is StopReason.CANCELLED
    return run.result


async def test_a_cancelled_run_replays_identically_from_its_state_and_its_trace() -> None:
    """Both recordings replay to `cancelled` at the same model call, step for step."""
    result = await cancelled_run()
    for source in (result.state, list(result.events)):
        report = await replay(source)
        assert report.identical, report.describe()
        assert report.result is not None
        assert report.result.stop_reason is StopReason.CANCELLED


def test_boundloop_replay_of_a_cancelled_run_exits_0(tmp_path: Path) -> None:
    """`boundloop replay STATE.json` of a cancelled run: identical, exit 0."""
    result = anyio.run(cancelled_run)
    state = tmp_path / "state.json"
    state.write_text(result.state.to_json(), encoding="utf-8")
    ran = boundloop_cli("replay", str(state))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "identical" in ran.stdout
