"""A run cut short from outside — cancelled, or out of time (`Budget.timeout_s`) — while it waited
for the model or while a tool ran, replays to the same stop at the same call, from its state and
from its trace, in process and through `boundloop replay` in a subprocess."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from boundloop import (
    AgentLoop,
    Budget,
    CheckpointStore,
    LoopResult,
    Observers,
    ScriptedClient,
    StopReason,
    replay,
    tool,
)
from boundloop.testing import Request
from tests.helpers import boundloop_cli

READ = {"type": "tool_use", "name": "read_order", "input": {"order_id": "O-1"}}
SLOW = {"type": "tool_use", "name": "check_stock", "input": {"sku": "S-1"}}


async def cut_run(stop: StopReason, where: str, store: CheckpointStore | None = None) -> LoopResult:
    """A run (task `cut-run`) that reads an order, then is cut (`stop`: a `run.cancel()`, or its
    0.3 s deadline) while its second model call waits (`where="model"`) or while the tool that call
    asked for runs (`where="tool"`); saved in `store` when given."""
    waiting = anyio.Event()

    @tool
    async def read_order(order_id: str) -> str:
        """Read one order."""
        return f"order {order_id}"

    @tool
    async def check_stock(sku: str) -> str:
        """Check the stock of one item (never answers: the run is cut while it runs)."""
        waiting.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def never_answers(_: Request) -> dict[str, object]:
        waiting.set()
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    second = never_answers if where == "model" else {"stop_reason": "tool_use", "content": [SLOW]}
    client = ScriptedClient([{"stop_reason": "tool_use", "content": [READ]}, second])
    timeout = 0.3 if stop is StopReason.TIMEOUT else None
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[read_order, check_stock],
        budget=Budget(max_steps=4, timeout_s=timeout),
        observers=Observers(metrics=None),
        store=store,
    )
    async with loop.stream("Read O-1, then check its stock.", task_id="cut-run") as run:
        if stop is StopReason.CANCELLED:
            with anyio.fail_after(10):
                await waiting.wait()
            await run.cancel()
        else:
            async for _ in run:  # the run's own deadline ends it
                pass
    assert run.result is not None
    assert run.result.stop_reason is stop
    return run.result


CUTS = [
    pytest.param(StopReason.TIMEOUT, "model", id="timeout-waiting-for-the-model"),
    pytest.param(StopReason.TIMEOUT, "tool", id="timeout-while-a-tool-ran"),
    pytest.param(StopReason.CANCELLED, "tool", id="cancelled-while-a-tool-ran"),
]


@pytest.mark.parametrize(("stop", "where"), CUTS)
async def test_a_cut_run_replays_to_the_same_stop_from_its_state_and_its_trace(
    stop: StopReason, where: str
) -> None:
    """Both recordings replay identically, step for step (the trace's transitions included), to
    the recorded stop; a call cut while it ran is answered `cancelled` again."""
    result = await cut_run(stop, where)
    for source in (result.state, list(result.events)):
        report = await replay(source)
        assert report.identical, report.describe()
        assert report.result is not None
        assert report.result.stop_reason is stop
        outcomes = [(o.tool, o.outcome) for o in report.result.state.observations]
        cut_call = [("check_stock", "cancelled")] if where == "tool" else []
        assert outcomes == [("read_order", "ok"), *cut_call]


@pytest.mark.parametrize(("stop", "where"), CUTS)
def test_boundloop_replay_of_a_cut_run_exits_0(tmp_path: Path, stop: StopReason, where: str) -> None:
    """`boundloop replay` of the run's state file and of its trace: identical, exit 0."""
    result = anyio.run(cut_run, stop, where)
    state = tmp_path / "state.json"
    state.write_text(result.state.to_json(), encoding="utf-8")
    trace = tmp_path / "trace.jsonl"
    result.write_events(trace)
    for path in (state, trace):
        ran = boundloop_cli("replay", str(path))
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert "identical" in ran.stdout
