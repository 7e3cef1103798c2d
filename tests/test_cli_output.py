"""What the `boundloop` command writes, in real processes: a failure's line redacted as the run
recorded it, output into a pipe closed early, and `check`'s text as a file or pipe takes it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from boundloop import AgentLoop, Budget, Policy, ScriptedClient, SQLiteStore, tool
from boundloop.cli import main
from tests.helpers import tool_use

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
SECRET: Final = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz"


@tool
async def fetch(key: str) -> str:
    """Fetch a key from an upstream that refuses it, naming the credential it used."""
    raise RuntimeError(f"upstream refused key {SECRET}")


def raising_loop() -> AgentLoop:
    """A loop whose one tool raises, with `on_tool_error="raise"`; its runs saved in ./runs.db."""
    return AgentLoop(
        ScriptedClient([tool_use(("fetch", {"key": "a"}))]),
        model="claude-sonnet-4-6",
        tools=[fetch],
        budget=Budget(max_steps=3),
        policy=Policy(on_tool_error="raise"),
        metrics=None,
        store=SQLiteStore("runs.db"),
    )


def _boundloop(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "boundloop", *args]
    return subprocess.run(command, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=120)


def test_a_raised_tool_error_is_redacted_on_the_error_line(tmp_path: Path) -> None:
    """`on_tool_error="raise"`: the last line says what failed as the run recorded it, the
    secret redacted (it was printed verbatim), and the view shows the call as the error it is
    (it showed `cancelled`)."""
    ran = _boundloop(["run", "tests.test_cli_output:raising_loop", "--goal", "Fetch a."], tmp_path)
    assert ran.returncode == 1, ran.stderr
    assert SECRET not in ran.stdout + ran.stderr
    assert ran.stderr.strip().splitlines()[-1] == (
        "boundloop: error: the run failed: RuntimeError: upstream refused key [REDACTED]"
    )
    assert "✗ error fetch" in ran.stdout
    assert "cancelled" not in ran.stdout


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["eval", str(ROOT / "examples" / "evals")], id="eval"),
        pytest.param(["replay", "demo.jsonl"], id="replay"),
        pytest.param(["diagram", "--format", "mermaid"], id="diagram"),
    ],
)
def test_a_pipe_closed_early_ends_the_command_quietly(args: list[str], tmp_path: Path) -> None:
    """`boundloop eval | head -1`: the reader gone, the command ends with code 1 and nothing on
    stderr (a BrokenPipeError traceback, whenever `head` exited before the command wrote). The
    reader here closes the pipe before the command writes anything, so every write fails."""
    assert main(["demo", "--json", "--trace", str(tmp_path / "demo.jsonl")]) == 0
    command = [sys.executable, "-m", "boundloop", *args]
    with subprocess.Popen(
        command, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None
        process.stdout.close()
        _, stderr = process.communicate(timeout=120)
    assert stderr == ""
    assert process.returncode == 1
