"""A delegation tree stored in a SQLite file, for the tests of what shows a tree (the event log,
`boundloop runs`, the inspector, replay): a lead that delegates twice, one at a time, to a
researcher; the first researcher delegates once more, to a checker."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import anyio

from boundloop import AgentLoop, Budget, LoopResult, Observers, ScriptedClient, SQLiteStore, StopReason
from tests.helpers import text, tool_use

MODEL = "claude-sonnet-4-6"


@dataclasses.dataclass(frozen=True)
class Tree:
    """The task ids of the stored tree, and the lead's result."""

    lead: str
    first: str
    """The first researcher: the checker's parent."""
    second: str
    checker: str
    result: LoopResult


async def run_tree(store: SQLiteStore) -> Tree:
    """Run the tree, every run checkpointed and logged in `store`."""
    checker = AgentLoop(
        ScriptedClient([text("checked", input_tokens=100, output_tokens=10)]),
        model=MODEL,
        name="checker",
        budget=Budget(max_steps=2),
        observers=Observers(metrics=None),
        store=store,
    )
    researcher = AgentLoop(
        ScriptedClient(
            [
                tool_use(("check", {"task": "check a"}, "toolu_check")),
                text("finding a"),
                text("finding b", input_tokens=200),
            ]
        ),
        model=MODEL,
        name="researcher",
        tools=[checker.as_tool("check", description="Check a finding.")],
        budget=Budget(max_steps=3),
        observers=Observers(metrics=None),
        store=store,
    )
    lead = AgentLoop(
        ScriptedClient(
            [
                tool_use(("research", {"task": "topic a"}, "toolu_a")),
                tool_use(("research", {"task": "topic b"}, "toolu_b")),
                text("the report"),
            ]
        ),
        model=MODEL,
        name="lead",
        tools=[researcher.as_tool("research", description="Research one topic.")],
        budget=Budget(max_steps=4, max_cost_usd=1.0),
        observers=Observers(metrics=None),
        store=store,
    )
    result = await lead.run("Write the report.")
    assert result.stop_reason is StopReason.COMPLETED, result.state.stop_detail
    first, second = result.state.children
    first_state = await store.load(first)
    assert first_state is not None
    (checker_id,) = first_state.children
    return Tree(result.state.task_id, first, second, checker_id, result)


def make_tree(path: Path) -> Tree:
    """The tree, run into a new SQLite file at `path`."""
    store = SQLiteStore(path)
    return anyio.run(run_tree, store)
