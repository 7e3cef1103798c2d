"""`boundloop runs`, `boundloop serve`'s host rule, and `boundloop run` printing the task id and
the next command of a run waiting for a human."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from boundloop.cli import main
from tests import inspector_runs


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    inspector_runs.make_store(path)
    return path


def test_runs_lists_every_run_newest_first(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--store", str(store_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == [
        "run-max-steps",
        "run-<hostile>",
        "run-refund",
        "run-completed",
    ]
    assert "waiting  needs_human" in lines[2]
    assert inspector_runs.SECRET not in "\n".join(lines)


def test_runs_filters_pages_and_prints_json(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--store", str(store_path), "--status", "stopped", "--limit", "2", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert [run["task_id"] for run in first["runs"]] == ["run-max-steps", "run-<hostile>"]
    assert first["runs"][0]["stop_reason"] == "max_steps"
    assert (
        main(
            [
                "runs",
                "--store",
                str(store_path),
                "--status",
                "stopped",
                "--cursor",
                first["next_cursor"],
                "--json",
            ]
        )
        == 0
    )
    second = json.loads(capsys.readouterr().out)
    assert [run["task_id"] for run in second["runs"]] == ["run-completed"]
    assert second["next_cursor"] is None
    assert main(["runs", "--store", str(store_path), "--cursor", "nonsense"]) == 2


def test_serve_on_another_host_needs_a_token(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--store", str(store_path), "--host", "0.0.0.0"]) == 2
    assert "--token" in capsys.readouterr().err


def test_serve_with_an_unusable_dbos_url_says_so(
    store_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--dbos-url` opens a DBOSClient before serving: a database it cannot reach is one sentence."""
    pytest.importorskip("dbos", reason="the dbos extra is not installed")
    closed = "postgresql://postgres@127.0.0.1:1/none"  # port 1: nothing listens, refused at once
    assert main(["serve", "--store", str(store_path), "--dbos-url", closed]) == 2
    assert "--dbos-url: cannot use the DBOS system database: OperationalError" in capsys.readouterr().err


def test_run_prints_the_task_id_and_how_to_continue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    app = tmp_path / "refund_app.py"
    app.write_text(
        "from boundloop import SQLiteStore\n"
        "from tests.helpers import tool_use\n"
        "from tests.inspector_runs import _loop\n"
        "def build():\n"
        "    script = [tool_use(('refund', {'order_id': 'O-1', 'amount': 3}))]\n"
        f"    return _loop(script, SQLiteStore({str(tmp_path / 'r.db')!r}))\n"
    )
    code = main(["run", "refund_app:build", "--goal", "refund O-1", "--app-dir", str(tmp_path)])
    assert code == 1  # needs_human: not completed
    out = capsys.readouterr().out
    task_id = out.split("task id: ", 1)[1].split()[0]
    assert f"boundloop pending --store {tmp_path / 'r.db'}" in out
    assert (
        f"boundloop resume refund_app:build {task_id} --store {tmp_path / 'r.db'} --approve toolu_0_refund"
        in out
    )
