"""What shows a delegation tree: the event log, `boundloop runs`, the inspector (docs/delegation.md)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import anyio.to_thread
import httpx
import pytest

from boundloop import (
    AgentLoop,
    Budget,
    Observers,
    ScriptedClient,
    SQLiteStore,
    StopReason,
    ToolContext,
    replay,
    tool,
)
from boundloop.events import RunStarted
from boundloop.web import app as inspector_app
from tests.delegation_tree import make_tree, run_tree
from tests.helpers import text, tool_use

ROOT = Path(__file__).resolve().parent.parent


async def test_each_runs_events_are_logged_under_its_own_task_id_naming_its_parent(tmp_path: Path) -> None:
    """Every run of the tree logs its own events under its own task id in the store's event log,
    read back from another store on the same file; each run's first event, `RunStarted`, names
    the run that started it."""
    tree = await run_tree(SQLiteStore(tmp_path / "runs.db"))
    reader = SQLiteStore(tmp_path / "runs.db")
    parents = {tree.lead: None, tree.first: tree.lead, tree.second: tree.lead, tree.checker: tree.first}
    for task_id, parent in parents.items():
        events = await reader.read(task_id)
        assert events, task_id
        assert {event.task_id for event in events} == {task_id}
        assert [event.seq for event in events] == list(range(len(events)))
        first = events[0]
        assert isinstance(first, RunStarted)
        assert first.parent_task_id == parent
        assert events[-1].kind == "stop"
    lead_events = await reader.read(tree.lead)
    assert [event.kind for event in lead_events].count("run_started") == 1  # the children's are their own


def test_runs_shows_each_child_under_its_parent(tmp_path: Path) -> None:
    """`boundloop runs` (the CLI in a process of its own): each child indented under its parent,
    in the order they started; `--json` names each run's parent and children. A child whose
    parent is not on the page (filtered out) names it."""
    path = tmp_path / "runs.db"
    tree = make_tree(path)
    ran = cli("runs", "--store", str(path))
    lines = ran.splitlines()
    assert [line.split()[0] if line.strip() else "" for line in lines] == [
        tree.lead,
        "└",
        "└",
        "└",
    ], ran
    assert [line.split()[1] for line in lines[1:]] == [tree.first, tree.checker, tree.second]
    assert [len(line) - len(line.lstrip()) for line in lines] == [0, 2, 4, 2]
    assert "Write the report." in lines[0]
    assert ["topic a" in lines[1], "check a" in lines[2], "topic b" in lines[3]] == [True] * 3
    records = {run["task_id"]: run for run in json.loads(cli("runs", "--store", str(path), "--json"))["runs"]}
    assert records[tree.lead]["parent_task_id"] is None
    assert records[tree.lead]["children"] == [tree.first, tree.second]
    assert records[tree.checker]["parent_task_id"] == tree.first
    assert records[tree.second]["children"] == []
    only = cli("runs", "--store", str(path), "--limit", "1", "--cursor", cursor_after(path, tree.lead))
    assert only.splitlines()[0].startswith(tree.second)
    assert only.splitlines()[0].endswith(f"(child of {tree.lead})")


def cli(*args: str) -> str:
    """`boundloop ARGS` in a process of its own: its output (it must exit 0)."""
    ran = subprocess.run(
        [sys.executable, "-m", "boundloop", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert ran.returncode == 0, ran.stderr
    return ran.stdout


def cursor_after(path: Path, task_id: str) -> str:
    """The `--cursor` of the page after the run `task_id`."""
    records = json.loads(cli("runs", "--store", str(path), "--json", "--limit", "1"))
    assert records["runs"][0]["task_id"] == task_id
    cursor: str = records["next_cursor"]
    return cursor


@pytest.mark.asyncio_only  # starlette's app over httpx's ASGI transport: asyncio
async def test_the_inspector_shows_a_runs_parent_children_and_the_trees_spend(tmp_path: Path) -> None:
    """A run's page links its parent and lists every run below it (indented by depth, each with
    its status, stop reason and cost), with the spend of the run and all of them together."""
    store = SQLiteStore(tmp_path / "runs.db")
    tree = await run_tree(store)
    app = inspector_app(store)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client,
    ):
        lead = (await client.get(f"/runs/{tree.lead}")).text
        first = (await client.get(f"/runs/{tree.first}")).text
        checker = (await client.get(f"/runs/{tree.checker}")).text
    assert listed(lead) == [tree.first, tree.checker, tree.second]
    below = children_of(lead)
    assert re.findall(r'<td class="depth">(\d)</td>', below) == ["1", "2", "1"]
    assert "topic a" in below
    assert "check a" in below
    states = [await store.load(task_id) for task_id in (tree.lead, tree.first, tree.second, tree.checker)]
    costs = [state.usage.cost_usd for state in states if state is not None]
    assert len(costs) == 4
    assert all(cost is not None and cost > 0 for cost in costs)
    spend = re.search(r'<table id="tree-spend">(.*?)</table>', lead, re.S)
    assert spend is not None
    assert "<th>runs</th><td>4</td>" in spend.group(1)
    assert f"${sum(cost for cost in costs if cost is not None):.4f}" in spend.group(1)
    tokens = sum(state.usage.input_tokens for state in states if state is not None)
    assert f"<th>input tokens</th><td>{tokens}</td>" in spend.group(1)
    assert 'id="parent"' not in lead
    assert re.search(rf'id="parent">.*href="/runs/{tree.lead}"', first) is not None
    assert listed(first) == [tree.checker]
    assert re.search(rf'id="parent">.*href="/runs/{tree.first}"', checker) is not None
    assert 'id="children"' not in checker


def children_of(page: str) -> str:
    """The table of the runs below the page's run."""
    found = re.search(r'<table id="children">(.*?)</table>', page, re.S)
    assert found is not None, page
    return found.group(1)


def listed(page: str) -> list[str]:
    """The task ids the page lists below its run, in order."""
    return re.findall(r'href="/runs/([0-9a-f]+)"', children_of(page))


async def test_replay_with_the_store_replays_the_runs_below_from_their_recordings(tmp_path: Path) -> None:
    """`replay(state, store=...)` replays the run, then each run below it from its own stored
    state (its recorded responses and tool results): one report per run, nested as the tree is;
    the tree is identical only if every run of it is. A run below that diverges (its recording
    edited to say it stopped otherwise) makes the tree's report not identical, and says where."""
    store = SQLiteStore(tmp_path / "runs.db")
    tree = await run_tree(store)
    lead = await store.load(tree.lead)
    assert lead is not None
    report = await replay(lead, store=store)
    assert report.identical, report.describe()
    assert [child.task_id for child in report.children] == [tree.first, tree.second]
    assert [child.task_id for child in report.children[0].children] == [tree.checker]
    answers = [child.result.state.answer if child.result else None for child in report.children]
    assert answers == ["finding a", "finding b"]
    checker = report.children[0].children[0]
    assert checker.expected == checker.got == ["stop: completed"]
    assert report.to_dict()["children"][0]["children"][0]["task_id"] == tree.checker
    alone = await replay(lead)  # without the store: the run alone, its delegations answered as recorded
    assert alone.identical
    assert alone.children == []

    edited = await store.load(tree.checker)
    assert edited is not None
    raw = json.loads(edited.to_json())
    raw["stop_reason"] = "max_steps"
    await anyio.to_thread.run_sync(store.write_raw, tree.checker, json.dumps(raw))
    diverged = await replay(lead, store=store)
    assert not diverged.identical
    assert diverged.divergence is None  # the lead's own trajectory is the recorded one
    assert diverged.children[0].children[0].divergence is not None
    text = diverged.describe()
    assert f"delegated run {tree.checker}" in text
    assert "recorded: stop: max_steps" in text
    assert text.endswith("the tree diverged: a run below this one did not take its recorded path")


def test_boundloop_replay_with_the_store_replays_the_tree(tmp_path: Path) -> None:
    """`boundloop replay TASK --store S` (in a process of its own) reports each run of the tree,
    indented under its parent."""
    path = tmp_path / "runs.db"
    tree = make_tree(path)
    lines = cli("replay", tree.lead, "--store", str(path)).splitlines()
    titles = [line for line in lines if "recorded steps" in line]
    assert titles == [
        f"replay of task {tree.lead}: 3 recorded steps",
        f"  delegated run {tree.first}: 2 recorded steps",
        f"    delegated run {tree.checker}: 1 recorded steps",
        f"  delegated run {tree.second}: 1 recorded steps",
    ]
    assert len([line for line in lines if "identical:" in line]) == 4


@pytest.mark.asyncio_only  # starlette's app over httpx's ASGI transport: asyncio
async def test_the_inspectors_run_list_shows_each_child_under_its_parent(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "runs.db")
    tree = await run_tree(store)
    app = inspector_app(store)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client,
    ):
        page = (await client.get("/")).text
    rows = re.findall(
        r'<tr><td>(?:<span class="below" data-depth="(\d)">[^<]*</span>)?'
        r'<a class="task" href="/runs/([^"]+)"',
        page,
    )
    assert rows == [("", tree.lead), ("1", tree.first), ("2", tree.checker), ("1", tree.second)]
    assert "child of" not in page


async def waiting_tree(store: SQLiteStore, refunds: list[str]) -> tuple[AgentLoop, str, str]:
    """A lead whose delegated run waits for a human's approval of its refund: the lead, its task
    id and the child's."""

    @tool(requires_approval=True, side_effect=True)
    async def refund(order_id: str, ctx: ToolContext) -> str:
        """Refund an order."""
        refunds.append(ctx.idempotency_key)
        return f"refunded {order_id}"

    child = AgentLoop(
        ScriptedClient([tool_use(("refund", {"order_id": "O-1"}, "toolu_refund")), text("refunded O-1")]),
        model="claude-sonnet-4-6",
        tools=[refund],
        budget=Budget(max_steps=3),
        observers=Observers(metrics=None),
        store=store,
    )
    lead = AgentLoop(
        ScriptedClient(
            [tool_use(("refunds", {"task": "Refund O-1."}, "toolu_del")), text("O-1 is refunded.")]
        ),
        model="claude-sonnet-4-6",
        tools=[child.as_tool("refunds", description="Refunds.")],
        budget=Budget(max_steps=3),
        observers=Observers(metrics=None),
        store=store,
    )
    waiting = await lead.run("Refund O-1.")
    assert waiting.stop_reason is StopReason.NEEDS_HUMAN
    (child_id,) = waiting.state.children
    return lead, waiting.state.task_id, child_id


@pytest.mark.asyncio_only  # starlette's app over httpx's ASGI transport: asyncio
async def test_approving_a_childs_call_on_the_approvals_page_resumes_the_tree(tmp_path: Path) -> None:
    """The approvals page lists the child's refund on the lead's card under the child's
    idempotency key (the key it runs under); approving it from the child's card resumes the lead,
    whose delegation resumes the child: the refund runs once, and both runs complete."""
    store = SQLiteStore(tmp_path / "runs.db")
    refunds: list[str] = []
    lead, root, child_id = await waiting_tree(store, refunds)
    key = f"{child_id}:1:toolu_refund"
    app = inspector_app(store, lead)
    last = await store.last_seq(root)
    with anyio.fail_after(30):
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client,
        ):
            page = (await client.get("/approvals")).text
            cards = dict(re.findall(r'<section class="waiting" id="([^"]+)">(.*?)</section>', page, re.S))
            assert set(cards) == {root, child_id}
            assert key in cards[root]  # not the lead's own task id: the child runs the call
            assert f"{root}:1:toolu_refund" not in page
            assert "in the delegated run" in cards[root]
            csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
            assert csrf is not None
            form = {"csrf": csrf.group(1), "decision:toolu_refund": "approve"}
            answer = await client.post(f"/runs/{child_id}/decide", data=form)
            assert answer.status_code == 303, answer.text
            async for event in lead.events(root, after=last):
                if event.kind == "stop":
                    assert event.stop_reason == "completed"
                    break
    assert refunds == [key]
    for task_id in (root, child_id):
        state = await store.load(task_id)
        assert state is not None
        assert state.stop_reason is StopReason.COMPLETED, task_id
