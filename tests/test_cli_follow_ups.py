"""What `boundloop run` prints after the view: the task id, and only follow-up commands that work.

Each command runs in a real process from a scratch directory (the loops below save to `./runs.db`
there); the commands a run prints are then run as printed.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from boundloop import AgentLoop, Budget, CheckpointStore, Observers, Policy, ScriptedClient, SQLiteStore, tool
from boundloop.cli.demo import demo_loop
from tests.helpers import text, tool_use

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
MODULE = "tests.test_cli_follow_ups"

_RELEASE = threading.Event()
"""Never set: the held tool blocks its worker thread until the process ends or 60 s pass."""


@tool
def hold(key: str) -> str:
    """Block in the worker thread after saying so on stdout, unless ./released exists."""
    if Path("released").exists():
        return f"{key} released"
    print(f"tool started: {key}", flush=True)
    _RELEASE.wait(60)
    return f"{key} timed out"


@tool
def refund(order_id: str) -> str:
    """Refund an order (the policy makes it wait for a human's approval)."""
    return f"refunded {order_id}"


def _answer_after_a_result(call: dict[str, Any]) -> Any:
    """A model turn: the call, or an answer once the last message holds a tool result (so a
    resume, whose scripted client starts its script again, still ends)."""

    def respond(request: dict[str, Any]) -> dict[str, Any]:
        last: list[dict[str, Any]] | str = request["messages"][-1]["content"]
        answered = not isinstance(last, str) and any(block["type"] == "tool_result" for block in last)
        return text("done") if answered else call

    return respond


def _loop(tool_name: str, store: CheckpointStore | None) -> AgentLoop:
    arguments = {"order_id": "O-1"} if tool_name == "refund" else {"key": "a"}
    turn = _answer_after_a_result(tool_use((tool_name, arguments)))
    return AgentLoop(
        ScriptedClient([turn, turn]),
        model="claude-sonnet-4-6",
        tools=[hold, refund],
        policy=Policy(requires_approval={"refund"}),
        budget=Budget(max_steps=4),
        observers=Observers(metrics=None),
        store=store,
    )


def approval_stored() -> AgentLoop:
    """A run that waits for the refund's approval, saved in ./runs.db."""
    return _loop("refund", SQLiteStore("runs.db"))


def approval_unsaved() -> AgentLoop:
    """The same run, saved nowhere."""
    return _loop("refund", None)


def held_stored() -> AgentLoop:
    """A run whose tool blocks until Ctrl-C, saved in ./runs.db."""
    return _loop("hold", SQLiteStore("runs.db"))


def breaker_stored() -> AgentLoop:
    """The demo's circuit-breaker scenario (the carrier lookup fails twice), saved in ./runs.db."""
    return demo_loop(scenario="needs_human").with_store(SQLiteStore("runs.db"))


def _boundloop(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "boundloop", *args]
    return subprocess.run(command, cwd=cwd, env=ENV, capture_output=True, text=True, timeout=120)


def _run(factory: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return _boundloop(["run", f"{MODULE}:{factory}", "--goal", "Go."], cwd)


def _commands(stdout: str) -> list[list[str]]:
    """The `boundloop ...` commands printed after the task id, as argument lists."""
    found: list[list[str]] = []
    for line in stdout.split("task id: ", 1)[1].splitlines()[1:]:
        start = line.find("boundloop ")
        if start >= 0:
            found.append(shlex.split(line[start:].split("  (or ")[0])[1:])
    return found


def test_a_circuit_breaker_stop_prints_no_follow_up(tmp_path: Path) -> None:
    """A breaker's `needs_human` waits for no decision: `pending` would not list it and `resume`
    would refuse it, so the task id is the last line (it printed both commands)."""
    ran = _run("breaker_stored", tmp_path)
    assert "stopped: needs_human" in ran.stdout, ran.stderr
    assert ran.stdout.rstrip().splitlines()[-1].startswith("task id: ")
    assert "boundloop " not in ran.stdout.split("task id: ", 1)[1]


def test_the_follow_ups_of_a_waiting_run_work_as_printed(tmp_path: Path) -> None:
    """A run waiting for an approval prints `pending` and `resume` with the store's path; both
    work as printed (with --approve filled in)."""
    ran = _run("approval_stored", tmp_path)
    assert ran.returncode == 1, ran.stderr
    pending, resume = _commands(ran.stdout)
    assert pending == ["pending", "--store", "runs.db"]
    listed = _boundloop(pending, tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "toolu_0_refund" in listed.stdout
    assert resume[-2:] == ["--approve", "toolu_0_refund"]
    resumed = _boundloop(resume, tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "stopped: completed" in resumed.stdout


def test_a_run_saved_nowhere_gets_no_store_placeholder(tmp_path: Path) -> None:
    """Without a store there is nothing to resume: a sentence says so, and no command names a
    `--store STORE` the run was never saved in."""
    ran = _run("approval_unsaved", tmp_path)
    assert ran.returncode == 1, ran.stderr
    assert "STORE" not in ran.stdout
    assert _commands(ran.stdout) == []
    assert "not resumable from the shell: the loop saves its runs in no store" in ran.stdout


def test_ctrl_c_prints_the_task_id_and_the_resume_that_works(tmp_path: Path) -> None:
    """Ctrl-C while a tool runs: exit 130, and stdout still ends with the task id and the
    `resume` command, which continues the cancelled run to completion."""
    command = [sys.executable, "-m", "boundloop", "run", f"{MODULE}:held_stored", "--goal", "Go."]
    with subprocess.Popen(
        command, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as process:
        assert process.stdout is not None
        try:
            seen = ""
            while "tool started: a" not in seen:
                line = process.stdout.readline()
                assert line, seen  # the process ended before the tool started
                seen += line
            process.send_signal(signal.SIGINT)
            rest, stderr = process.communicate(timeout=30)
        finally:
            process.kill()
    stdout = seen + rest
    assert process.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1] == "boundloop: error: interrupted"
    assert "stopped: cancelled" in stdout
    task_id = stdout.split("task id: ", 1)[1].split()[0]
    (resume,) = _commands(stdout)
    assert resume == ["resume", f"{MODULE}:held_stored", task_id, "--store", "runs.db"]
    (tmp_path / "released").touch()
    resumed = _boundloop(resume, tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "stopped: completed" in resumed.stdout
