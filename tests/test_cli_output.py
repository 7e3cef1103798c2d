"""What the `boundloop` command writes, in real processes: a failure's line redacted as the run
recorded it, output into a pipe closed early, the view's lines whole in a pipe, and `check`
naming a policy file as the contract was named."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from boundloop import AgentLoop, Budget, Observers, Policy, ScriptedClient, SQLiteStore, tool
from boundloop.cli import main
from tests.helpers import tool_use

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
SECRET: Final = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz"
REVOKED: Final = "the key was revoked by the administrator of the payment gateway on 2 March"
"""Makes the error's line of the view longer than a terminal's 80 columns."""


@tool
async def fetch(key: str) -> str:
    """Fetch a key from an upstream that refuses it, naming the credential it used."""
    raise RuntimeError(f"upstream refused key {SECRET}: {REVOKED}")


def raising_loop() -> AgentLoop:
    """A loop whose one tool raises, with `on_tool_error="raise"`; its runs saved in ./runs.db."""
    return AgentLoop(
        ScriptedClient([tool_use(("fetch", {"key": "a"}))]),
        model="claude-sonnet-4-6",
        tools=[fetch],
        budget=Budget(max_steps=3),
        policy=Policy(on_tool_error="raise"),
        observers=Observers(metrics=None),
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
    failed = f"RuntimeError: upstream refused key [REDACTED]: {REVOKED}"
    assert ran.stderr.strip().splitlines()[-1] == f"boundloop: error: the run failed: {failed}"
    assert "✗ error fetch" in ran.stdout
    assert "cancelled" not in ran.stdout


def test_the_view_into_a_pipe_keeps_each_event_on_one_line(tmp_path: Path) -> None:
    """Into a pipe (no terminal, so 80 columns) an event's line is longer than that and stays
    one line, whole (it wrapped mid-message); the header's panel still fits its box."""
    ran = _boundloop(["run", "tests.test_cli_output:raising_loop", "--goal", "Fetch a."], tmp_path)
    line = f"    error exception: RuntimeError: upstream refused key [REDACTED]: {REVOKED}"
    assert len(line) > 80
    assert line in ran.stdout.splitlines()
    assert all(len(row) <= 80 for row in ran.stdout.splitlines() if row.startswith(("╭", "│", "╰")))


def test_check_names_the_policy_file_as_the_contract_is_named(tmp_path: Path) -> None:
    """A relative contract's policy file is named relative too (it was absolute), and a policy
    naming an undeclared tool gets no hint about MCP prefixes when the contract has no server."""
    folder = tmp_path / "contracts"
    shutil.copytree(ROOT / "examples" / "contracts", folder)
    policy = json.loads((folder / "refund-policy.json").read_text(encoding="utf-8"))
    policy["allowed"].append("read_invoice")
    (folder / "strict-policy.json").write_text(json.dumps(policy), encoding="utf-8")
    contract = json.loads((folder / "refund_investigation.json").read_text(encoding="utf-8"))
    (folder / "strict.json").write_text(json.dumps({**contract, "policy": "strict-policy.json"}))
    ran = _boundloop(["check", "contracts/strict.json"], tmp_path)
    assert ran.returncode == 1, ran.stderr
    assert ran.stdout.splitlines() == [
        "contracts/strict.json: unknown-tool: contracts/strict-policy.json: allowed: names tools the "
        "contract does not declare: read_invoice"
    ]


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
