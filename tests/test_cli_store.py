"""`boundloop pending`, `resume`, `replay` and `eval --export`: runs in a SQLite file or a PostgreSQL
database (`--store postgresql://...`), in-process through `main(argv)`.

The tests on the `store` fixture run on both stores with the same assertions: the output has the
same form whichever store holds the runs."""

from __future__ import annotations

import contextlib
import json
import logging
import re
import shlex
import subprocess
import sys
import threading
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest

from boundloop import (
    AgentLoop,
    Budget,
    CheckpointStore,
    Observers,
    Policy,
    ScriptedClient,
    SQLiteStore,
    ToolContext,
    tool,
)
from boundloop.checkpoint import PostgresStore
from boundloop.checkpoint.postgres import lease_key
from boundloop.cli import main
from boundloop.events import Resumed, read_events
from boundloop.testing import ScriptItem
from tests.helpers import text, tool_use

ROOT = Path(__file__).resolve().parents[1]
APP = ["--app-dir", str(ROOT)]

REFUNDS: dict[str, str] = {}
"""What `issue_refund` did, by idempotency key: the tests see which approved call ran."""


@tool
async def read_order(order_id: str) -> str:
    """Read an order."""
    return f"{order_id}: delivered late"


@tool(side_effect=True, requires_approval=True)
async def issue_refund(order_id: str, ctx: ToolContext) -> str:
    """Refund an order."""
    REFUNDS.setdefault(ctx.idempotency_key, order_id)
    return f"refunded {order_id}"


def refund_loop(script: list[ScriptItem], *, policy: Policy | None = None) -> AgentLoop:
    """The loop of every test here: a read, a refund that needs approval, the model's escalation tool."""
    return AgentLoop(
        ScriptedClient(script),
        model="claude-sonnet-4-6",
        tools=[read_order, issue_refund],
        budget=Budget(max_steps=6, max_tool_calls=6),
        policy=policy or Policy(escalation_tool="request_human"),
        name="cli_store",
        observers=Observers(metrics=None),
    )


def finishing_loop() -> AgentLoop:
    """What `boundloop resume` is pointed at: once the human has decided, the model answers."""
    return refund_loop([text("Done: refunded what was approved.")])


def reading_loop() -> AgentLoop:
    """A loop that reads an order and answers (for `boundloop run --trace` and replays)."""
    return refund_loop([tool_use(("read_order", {"order_id": "O-9"}, "toolu_read")), text("O-9 was late.")])


def forbidding_loop() -> AgentLoop:
    """The same tools, with a policy that now forbids `read_order`: a replay of a read diverges."""
    return refund_loop([], policy=Policy(forbidden={"read_order"}, escalation_tool="request_human"))


TWO_REFUNDS = tool_use(
    ("read_order", {"order_id": "O-1"}, "toolu_read"),
    ("issue_refund", {"order_id": "O-1"}, "toolu_r1"),
    ("issue_refund", {"order_id": "O-2"}, "toolu_r2"),
)
QUESTION = tool_use(("request_human", {"reason": "Is a late delivery refundable?"}, "toolu_ask"))


POSTGRES = ("postgresql://", "postgres://")
"""The schemes of a `--store` that names a PostgreSQL database."""

UNREACHABLE = "postgresql://postgres@127.0.0.1:1/x"
"""A PostgreSQL URI on a closed port: connecting is refused at once."""


@contextlib.asynccontextmanager
async def opened(store: str) -> AsyncGenerator[CheckpointStore]:
    """The store a `--store` argument names, closed (a PostgresStore's pool) when the block exits."""
    if store.startswith(POSTGRES):
        async with PostgresStore(store) as postgres:
            yield postgres
    else:
        yield SQLiteStore(store)


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The `--store` of a store holding a completed run (t-done), one waiting for approval
    (t-approve) and the model's question (t-ask), saved in that order: a SQLite file, or a
    PostgreSQL URI of a new database (`postgres_dsn`; skipped without PostgreSQL)."""
    path: str = (
        request.getfixturevalue("postgres_dsn") if request.param == "postgres" else str(tmp_path / "runs.db")
    )

    anyio.run(seed_runs, path)
    REFUNDS.clear()
    yield path
    REFUNDS.clear()
    assert not pool_threads(), "a command left the PostgresStore's pool open"


async def seed_runs(store: str) -> None:
    """Save t-done, t-approve and t-ask to `store`, in that order."""
    async with opened(store) as runs:
        await reading_loop().with_store(runs).run("Was O-9 late?", task_id="t-done")
        await refund_loop([TWO_REFUNDS]).with_store(runs).run("Refund O-1 and O-2?", task_id="t-approve")
        await refund_loop([QUESTION]).with_store(runs).run("Refund O-3?", task_id="t-ask")


def pool_threads() -> list[str]:
    """The threads of a PostgresStore's pool still running (psycopg_pool names them after the pool)."""
    return [t.name for t in threading.enumerate() if t.name.startswith("boundloop-")]


@pytest.fixture
def trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    """The trace `boundloop run --trace` wrote for `reading_loop`: a read, then the answer."""
    path = tmp_path / "run.jsonl"
    argv = ["run", "tests.test_cli_store:reading_loop", "--goal", "Was O-9 late?", "--trace", str(path)]
    assert main([*argv, *APP, "--json"]) == 0
    capsys.readouterr()
    return path


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("boundloop: error: ")
    return lines[0]


def closed_pools(caplog: pytest.LogCaptureFixture) -> int:
    """How many PostgresStore pools were closed (psycopg_pool logs it at DEBUG), as `aclose` does."""
    return caplog.messages.count("pool 'boundloop' closed")


def write_raw(store: str, task_id: str, raw: str) -> None:
    """Store `raw` as the task's state text, unchecked (an unreadable row)."""
    if store.startswith(POSTGRES):
        postgres = PostgresStore(store)
        try:
            postgres.write_raw(task_id, raw)
        finally:
            anyio.run(postgres.aclose)
    else:
        SQLiteStore(store).write_raw(task_id, raw)


def stored_status(store: str) -> dict[str, str]:
    async def read() -> dict[str, str]:
        async with opened(store) as runs:
            return {row.task_id: row.status for row in await runs.list()}

    return anyio.run(read)


@pytest.mark.parametrize("command", ["pending", "resume", "replay"])
def test_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Each store command has --help with its exit codes."""
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: boundloop {command}")
    assert "exit codes:" in out
    assert "--store PATH" in out
    assert "a SQLite file or a postgresql:// URI" in " ".join(out.split())


def test_pending_lists_the_calls_to_approve_and_the_models_question(
    store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Newest first: the question with its reason, then both calls with tool, input and step; never
    the completed run. Each comes with the resume command that continues it."""
    assert main(["pending", "--store", store]) == 0
    out = capsys.readouterr().out
    assert "t-done" not in out
    assert out.index("t-ask") < out.index("t-approve")
    assert "the model asks (toolu_ask): Is a late delivery refundable?" in out
    assert 'toolu_r1  issue_refund  {"order_id": "O-1"}  (step 1)' in out
    assert 'toolu_r2  issue_refund  {"order_id": "O-2"}  (step 1)' in out
    assert "goal: Refund O-1 and O-2?" in out
    assert (
        f"resume: boundloop resume SPEC t-approve --store {shlex.quote(store)} --approve toolu_r1 "
        "--approve toolu_r2" in out
    )
    assert f"resume: boundloop resume SPEC t-ask --store {shlex.quote(store)} --reply TEXT" in out


def test_pending_json(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--json: a list of the waiting runs with their calls or question, nothing else on stdout."""
    assert main(["pending", "--store", store, "--json"]) == 0
    ask, approve = json.loads(capsys.readouterr().out)
    assert ask["task_id"] == "t-ask"
    assert ask["waiting_for"] == "reply"
    assert ask["escalation"] == {
        "tool_use_id": "toolu_ask",
        "reason": "Is a late delivery refundable?",
        "step": 1,
    }
    assert ask["approvals"] == []
    assert approve["task_id"] == "t-approve"
    assert approve["waiting_for"] == "approval"
    assert approve["escalation"] is None
    assert approve["step"] == 1
    assert approve["goal"] == "Refund O-1 and O-2?"
    assert approve["approvals"] == [
        {"tool_use_id": "toolu_r1", "tool": "issue_refund", "input": {"order_id": "O-1"}, "step": 1},
        {"tool_use_id": "toolu_r2", "tool": "issue_refund", "input": {"order_id": "O-2"}, "step": 1},
    ]
    assert approve["updated_at"].endswith("Z")


def test_pending_on_a_store_with_nothing_waiting(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A store whose runs all finished lists nothing (exit 0); --json prints an empty list."""
    path = tmp_path / "runs.db"

    async def seed() -> None:
        await reading_loop().with_store(SQLiteStore(path)).run("Was O-9 late?", task_id="t-done")

    anyio.run(seed)
    assert main(["pending", "--store", str(path)]) == 0
    assert capsys.readouterr().out == f"no run in {path} is waiting for a human\n"
    assert main(["pending", "--store", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.parametrize("command", ["pending", "resume", "replay"])
def test_a_missing_store_is_a_usage_error_and_is_not_created(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--store naming no file: one line, exit 2, and no empty store left behind."""
    missing = tmp_path / "nope.db"
    argv = {
        "pending": ["pending"],
        "resume": ["resume", "tests.test_cli_store:finishing_loop", "t-1", *APP],
        "replay": ["replay", "t-1"],
    }[command]
    assert main([*argv, "--store", str(missing)]) == 2
    assert "nope.db: no such file" in one_line(capsys.readouterr().err)
    assert not missing.exists()


def test_a_file_that_is_no_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A file that is not SQLite is one line, exit 2."""
    path = tmp_path / "runs.db"
    path.write_bytes(b"this is not a database, just text that is long enough to be read" * 4)
    assert main(["pending", "--store", str(path)]) == 2
    assert f"cannot read the store {path}" in one_line(capsys.readouterr().err)


def test_resume_approves_one_call_and_denies_the_other(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The approved refund runs once, the denied one is answered with the reason, the run completes
    (exit 0) and is no longer pending; the view shows the decisions and the trace starts with them."""
    trace = tmp_path / "resume.jsonl"
    argv = ["resume", "tests.test_cli_store:finishing_loop", "t-approve", "--store", store, *APP]
    argv += ["--approve", "toolu_r1", "--deny", "toolu_r2=over the limit", "--trace", str(trace)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "boundloop resume" in out
    assert "Refund O-1 and O-2?" in out
    assert "resumed from stopped at step 1" in out
    assert "human approved issue_refund toolu_r1" in out
    assert "human denied issue_refund toolu_r2 (over the limit)" in out
    assert "✓ issue_refund" in out
    assert "stopped: completed" in out
    assert "model calls  2 of 6" in out
    assert REFUNDS == {"t-approve:1:toolu_r1": "O-1"}
    events = read_events(trace)
    resumed = events[0]
    assert isinstance(resumed, Resumed)
    assert resumed.approvals == {"toolu_r1": True, "toolu_r2": "over the limit"}
    assert stored_status(store)["t-approve"] == "stopped"


def test_resume_denies_without_a_reason_and_prints_json(
    store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """--deny ID without a reason is a plain denial; --json prints the result alone."""
    argv = ["resume", "tests.test_cli_store:finishing_loop", "t-approve", "--store", store, *APP]
    assert main([*argv, "--deny", "toolu_r1", "--approve", "toolu_r2", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["stop_reason"] == "completed"
    answers = {o["tool_use_id"]: (o["outcome"], o["content"]) for o in result["state"]["observations"]}
    assert answers["toolu_r1"] == ("denied", "issue_refund was denied by a human; not run")
    assert answers["toolu_r2"] == ("ok", "refunded O-2")
    assert REFUNDS == {"t-approve:1:toolu_r2": "O-2"}


def test_resume_answers_the_models_question(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    """--reply answers the escalation: the model gets the reply as the tool's result and goes on."""
    argv = ["resume", "tests.test_cli_store:finishing_loop", "t-ask", "--store", store, *APP]
    assert main([*argv, "--reply", "Yes, within 30 days."]) == 0
    out = capsys.readouterr().out
    assert "human replied to toolu_ask" in out
    assert "stopped: completed" in out
    assert stored_status(store)["t-ask"] == "stopped"


def test_resume_continues_a_cancelled_run(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A run stopped `cancelled` (the person's Ctrl-C) goes on with `boundloop resume` and no
    decision: the model is asked again and the run completes; a decision for it is refused."""

    async def cancelled() -> None:
        cancel = anyio.Event()

        async def hang(_: object) -> dict[str, Any]:  # the person stops the run during the model call
            cancel.set()
            await anyio.sleep_forever()
            raise AssertionError("cancelled")

        async with opened(store) as runs:
            loop = refund_loop([hang]).with_store(runs)
            result = await loop.run("Refund O-5?", task_id="t-cancelled", cancel=cancel)
        assert result.stop_reason == "cancelled"

    anyio.run(cancelled)
    argv = ["resume", "tests.test_cli_store:finishing_loop", "t-cancelled", "--store", store, *APP]
    assert main([*argv, "--approve", "toolu_r1"]) == 2
    assert "cancelled and waits for no decision" in one_line(capsys.readouterr().err)
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "resumed from cancelled at step" in out
    assert "stopped: completed" in out
    assert stored_status(store)["t-cancelled"] == "stopped"
    assert REFUNDS == {}


@pytest.mark.parametrize(
    ("task_id", "decisions", "message"),
    [
        pytest.param("t-nope", [], "task 't-nope' is not in", id="unknown-task"),
        pytest.param(
            "t-approve", ["--approve", "toolu_r1"], "no decision for toolu_r2 (issue_refund)", id="undecided"
        ),
        pytest.param(
            "t-approve",
            ["--approve", "toolu_r1", "--approve", "toolu_r2", "--approve", "toolu_x"],
            "no call waiting for approval has the id toolu_x",
            id="unknown-call",
        ),
        pytest.param(
            "t-approve",
            ["--approve", "toolu_r1", "--deny", "toolu_r1"],
            "toolu_r1 is decided twice",
            id="twice",
        ),
        pytest.param("t-ask", [], "the model asked a human: 'Is a late delivery refundable?'", id="no-reply"),
        pytest.param("t-done", [], "task 't-done' stopped with completed", id="finished"),
    ],
)
def test_resume_errors_are_one_line(
    task_id: str, decisions: list[str], message: str, store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unknown or finished task, or a call left undecided: one line, exit 2, no view, nothing run."""
    argv = ["resume", "tests.test_cli_store:finishing_loop", task_id, "--store", store, *APP]
    assert main([*argv, *decisions]) == 2
    captured = capsys.readouterr()
    assert message in one_line(captured.err)
    assert captured.out == ""
    assert REFUNDS == {}
    assert stored_status(store)["t-approve"] == "waiting"


def test_resume_a_bad_spec(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    """SPEC follows `run`'s loader: a missing factory is a usage error."""
    assert main(["resume", "tests.test_cli_store:missing", "t-approve", "--store", store, *APP]) == 2
    assert "has no attribute 'missing'" in one_line(capsys.readouterr().err)


def test_replay_a_stored_task_is_identical(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A completed run replayed from the store through its recorded configuration: exit 0."""
    assert main(["replay", "t-done", "--store", store]) == 0
    out = capsys.readouterr().out
    assert "replay of task t-done" in out
    assert "identical" in out


def test_replay_a_trace_file_is_identical(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The trace `boundloop run --trace` wrote replays identically, step for step; --json says so."""
    assert main(["replay", str(trace)]) == 0
    assert "identical" in capsys.readouterr().out
    assert main(["replay", str(trace), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["identical"] is True
    assert report["divergence"] is None
    assert "tool read_order toolu_read: ok" in report["expected"]
    assert report["expected"] == report["got"]


def test_replay_a_state_file(store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A state written with LoopState.to_json() replays like the stored task."""

    async def dump() -> str:
        async with opened(store) as runs:
            state = await runs.load("t-done")
        assert state is not None
        return state.to_json()

    state_file = tmp_path / "state.json"
    state_file.write_text(anyio.run(dump), encoding="utf-8")
    assert main(["replay", str(state_file)]) == 0
    assert "identical" in capsys.readouterr().out


def test_replay_through_a_loop_that_forbids_a_recorded_tool_diverges(
    store: str, trace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--loop with a policy forbidding read_order: exit 1, the divergence and, with --diff, both paths."""
    forbidding = ["--loop", "tests.test_cli_store:forbidding_loop", *APP]

    assert main(["replay", "t-done", "--store", store, *forbidding]) == 1
    out = capsys.readouterr().out
    assert "diverged at step 0" in out
    assert "recorded: tool read_order toolu_read: ok" in out
    assert "policy" in out  # the provenance: the policy differs

    assert main(["replay", str(trace), *forbidding, "--diff"]) == 1
    out = capsys.readouterr().out
    assert "first divergence at step" in out
    diff = out.split("first divergence at step", 1)[1]
    assert " recorded:" in diff
    assert " replayed:" in diff
    assert re.search(r"^  - +\d+  decide read_order toolu_read: execute$", diff, flags=re.MULTILINE), diff
    assert re.search(r"^  \+ +\d+  decide read_order toolu_read: block$", diff, flags=re.MULTILINE), diff

    assert main(["replay", str(trace), *forbidding, "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["identical"] is False
    assert report["divergence"]["expected"] == "decide read_order toolu_read: execute"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["replay", "/nonexistent/run.jsonl"], "no such file", id="no-file"),
        pytest.param(["replay", "t-nope", "--store", "STORE"], "task 't-nope' is not in", id="unknown-task"),
        pytest.param(["replay", "t-bad", "--store", "STORE"], "the checkpoint of task 't-bad'", id="corrupt"),
        pytest.param(["replay", "NO_STATE"], "cannot be replayed", id="trace-without-state"),
        pytest.param(["replay", "BINARY"], "is not a trace or a state file", id="binary-file"),
        pytest.param(
            ["replay", "t-done", "--store", "STORE", "--loop", "tests.test_cli_store"],
            "module:factory",
            id="bad-spec",
        ),
    ],
)
def test_replay_usage_errors(
    argv: list[str],
    message: str,
    store: str,
    trace: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A missing file or task, a corrupt checkpoint, a trace with no state: one line, exit 2."""
    write_raw(store, "t-bad", "{not json")
    no_state = tmp_path / "partial.jsonl"  # the trace without its stop event, as when a run is killed
    no_state.write_text("".join(trace.read_text(encoding="utf-8").splitlines(keepends=True)[:-1]), "utf-8")
    binary = tmp_path / "image.png"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xf8\xff")
    argv = [{"STORE": store, "NO_STATE": str(no_state), "BINARY": str(binary)}.get(a, a) for a in argv]
    assert main([*argv, *APP]) == 2
    assert message in one_line(capsys.readouterr().err)


def test_eval_exports_a_stored_run(store: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`eval --export TASK_ID --store ...` prints the stopped run as a fixture, from either store."""
    assert main(["eval", "--export", "t-done", "--store", store]) == 0
    fixture = json.loads(capsys.readouterr().out)
    assert fixture["goal"] == "Was O-9 late?"


# -- PostgreSQL only ----------------------------------------------------------------------


def test_pending_on_a_database_with_no_runs(
    postgres_dsn: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A database no loop has used yet (no boundloop tables) is an empty store, as an empty SQLite
    file is: nothing waits, exit 0; --json prints an empty list. Each command closes its pool."""
    with caplog.at_level(logging.DEBUG, logger="psycopg.pool"):
        assert main(["pending", "--store", postgres_dsn]) == 0
        assert capsys.readouterr().out == f"no run in {postgres_dsn} is waiting for a human\n"
        assert main(["pending", "--store", postgres_dsn, "--json"]) == 0
        assert json.loads(capsys.readouterr().out) == []
    assert closed_pools(caplog) == 2
    assert not pool_threads()


def test_the_resume_command_pending_prints_quotes_the_uri(
    postgres_dsn: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """A URI with parameters (`?a=1&b=2`; the `postgres://` scheme here) is shell-quoted in the
    resume command `pending` prints, and that command, SPEC filled in, continues the run."""
    dsn = "postgres://" + postgres_dsn.removeprefix("postgresql://")
    dsn += "?connect_timeout=5&application_name=boundloop-cli"

    async def seed() -> None:
        async with opened(dsn) as runs:
            await refund_loop([TWO_REFUNDS]).with_store(runs).run("Refund O-1 and O-2?", task_id="t-approve")

    anyio.run(seed)
    REFUNDS.clear()
    caplog.set_level(logging.DEBUG, logger="psycopg.pool")
    assert main(["pending", "--store", dsn]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if "resume:" in line)
    assert f"--store {shlex.quote(dsn)} " in line
    argv = shlex.split(line.split("resume: ", 1)[1])
    assert argv[:3] == ["boundloop", "resume", "SPEC"]
    assert argv[argv.index("--store") + 1] == dsn
    assert main(["resume", "tests.test_cli_store:finishing_loop", *argv[3:], *APP, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["stop_reason"] == "completed"
    assert closed_pools(caplog) == 2  # pending's and resume's
    assert REFUNDS == {"t-approve:1:toolu_r1": "O-1", "t-approve:1:toolu_r2": "O-2"}
    assert stored_status(dsn) == {"t-approve": "stopped"}
    assert not pool_threads()
    REFUNDS.clear()


def test_resume_a_run_another_worker_holds(postgres_dsn: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A worker holding the task's lease (its advisory lock) is running it: `resume` says so in one
    line, exit 2, and runs nothing; the run keeps waiting."""
    anyio.run(seed_runs, postgres_dsn)
    REFUNDS.clear()
    argv = ["resume", "tests.test_cli_store:finishing_loop", "t-approve", "--store", postgres_dsn, *APP]
    with psycopg.connect(postgres_dsn, autocommit=True) as worker:
        worker.execute("SELECT pg_advisory_lock(%s)", (lease_key("t-approve"),))
        assert main([*argv, "--approve", "toolu_r1", "--approve", "toolu_r2"]) == 2
    captured = capsys.readouterr()
    assert "task 't-approve' is being run by another worker" in one_line(captured.err)
    assert REFUNDS == {}
    assert stored_status(postgres_dsn)["t-approve"] == "waiting"
    assert not pool_threads()


@pytest.mark.parametrize(
    "argv",
    [
        ["pending"],
        ["resume", "tests.test_cli_store:finishing_loop", "t-1", *APP, "--approve", "toolu_r1"],
        ["replay", "t-1"],
        ["eval", "--export", "t-1"],
    ],
    ids=["pending", "resume", "replay", "eval-export"],
)
@pytest.mark.parametrize("uri", [UNREACHABLE, UNREACHABLE.replace("postgresql://", "postgres://")])
def test_an_unreachable_database_is_one_line(
    argv: list[str], uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A server that refuses the connection (a closed port): one sentence naming the store and
    libpq's reason, exit 2 as for an unreadable SQLite store, nothing on stdout, no pool left."""
    assert main([*argv, "--store", uri]) == 2
    captured = capsys.readouterr()
    error = one_line(captured.err)
    assert error.startswith(f"boundloop: error: cannot reach the store {uri}: connection failed: ")
    assert "Connection refused" in error
    assert captured.out == ""
    assert not pool_threads()


def test_without_the_postgres_extra(tmp_path: Path) -> None:
    """psycopg not installed (hidden in a fresh interpreter): the store's sentence saying what to
    install, exit 2; a SQLite store still works there."""
    code = (
        "import sys\n"
        "sys.modules['psycopg'] = None\n"
        "from boundloop.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    ran = subprocess.run(
        [sys.executable, "-c", code, "pending", "--store", UNREACHABLE],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert ran.returncode == 2, ran.stderr
    assert one_line(ran.stderr) == (
        "boundloop: error: PostgresStore needs psycopg 3 and psycopg-pool (psycopg is not installed): "
        "pip install 'boundloop[postgres]'"
    )
    empty = tmp_path / "runs.db"
    SQLiteStore(empty).write_raw("t-1", "{}")
    ran = subprocess.run(
        [sys.executable, "-c", code, "pending", "--store", str(empty)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert ran.returncode == 0, ran.stderr
