"""What shows a delegation tree: the event log, `boundloop runs`, the inspector (docs/delegation.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from boundloop import SQLiteStore
from boundloop.events import RunStarted
from tests.delegation_tree import make_tree, run_tree

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
    assert "topic a" in lines[1] and "check a" in lines[2] and "topic b" in lines[3]
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
