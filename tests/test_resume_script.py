"""docs/testing.md's resume-aware script: `boundloop run SPEC` then `boundloop resume SPEC`, each
building the loop anew from the factory (real subprocesses), continue the script where the run
stopped; a factory returning `ScriptedClient(SCRIPT)` starts it over."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
GUIDE = (ROOT / "docs" / "testing.md").read_text(encoding="utf-8")


def the_guide_s_app() -> str:
    """The guide's example up to `main`, its store a SQLite file both commands open."""
    section = GUIDE.split("## A script across `boundloop resume`", 1)[1]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    app = block.split("\nasync def main()", 1)[0]
    assert "store = MemoryStore()" in app
    return app.replace("store = MemoryStore()", "store = SQLiteStore('runs.db')").replace(
        "MemoryStore,", "SQLiteStore,"
    )


def boundloop(cwd: Path, *argv: str) -> dict[str, Any]:
    ran = subprocess.run(
        [sys.executable, "-m", "boundloop", *argv, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(cwd)},
    )
    assert ran.returncode in (0, 1), ran.stderr
    result: dict[str, Any] = json.loads(ran.stdout)
    return result


@pytest.mark.parametrize(
    ("factory", "steps", "outcomes"),
    [
        pytest.param("build_loop", 2, ["ok"], id="picked-by-turn"),
        pytest.param("naive_loop", 3, ["ok", "repeated"], id="from-the-start"),
    ],
)
def test_a_resumed_run_continues_the_script(
    tmp_path: Path, factory: str, steps: int, outcomes: list[str]
) -> None:
    """The guide's client serves the turn after the checkpoint's; the plain script serves its
    first turn again (the refund proposed twice, one model call too many)."""
    app = the_guide_s_app() + (
        "\n\ndef naive_loop() -> AgentLoop:\n"
        "    loop = build_loop()\n"
        "    return AgentLoop(ScriptedClient(SCRIPT), model=loop.model, tools=[refund], store=store,\n"
        "                     policy=Policy(requires_approval={'refund'}), budget=Budget(max_steps=4))\n"
    )
    (tmp_path / "app17.py").write_text(app, encoding="utf-8")
    first = boundloop(tmp_path, "run", f"app17:{factory}", "--goal", "Refund O-1.")
    assert first["stop_reason"] == "needs_human"
    task = first["state"]["task_id"]
    resumed = boundloop(
        tmp_path, "resume", f"app17:{factory}", task, "--store", "runs.db", "--approve", "toolu_1"
    )
    assert resumed["stop_reason"] == "completed"
    assert resumed["answer"] == "Refunded O-1."
    assert resumed["state"]["step"] == steps
    assert [o["outcome"] for o in resumed["state"]["observations"]] == outcomes
