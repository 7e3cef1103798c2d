"""The `boundloop` command, run in-process through `main(argv)` (and once or twice as a real process)."""

from __future__ import annotations

import http.server
import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, ClassVar

import anyio
import httpx
import pytest

from boundloop import (
    AgentLoop,
    Budget,
    CheckpointStore,
    LoopState,
    Observers,
    Policy,
    ScriptedClient,
    SQLiteStore,
    StopReason,
    StoredRun,
    prices,
    tool,
)
from boundloop.checkpoint import Status
from boundloop.cli import main
from boundloop.cli.demo import ALLOWED, ANSWER, GOAL, SCRIPT
from boundloop.events import Stop, ToolResult, read_events
from boundloop.statemachine.diagram import render_mermaid
from tests.conftest import require_binary
from tests.helpers import api_message, text, tool_use

ROOT = Path(__file__).resolve().parents[1]


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def scripted_loop() -> AgentLoop:
    """A loop that looks one key up and answers (the factory `boundloop run` is pointed at)."""
    client = ScriptedClient([tool_use(("lookup", {"key": "a"})), text("a is known")])
    return AgentLoop(
        client, model="claude-sonnet-4-6", tools=[lookup], budget=Budget(max_steps=4), name="cli_test"
    )


async def async_scripted_loop() -> AgentLoop:
    """The same loop, from an async factory."""
    return scripted_loop()


def looping_loop() -> AgentLoop:
    """A loop whose model keeps asking for tools, so it stops at max_steps."""
    script = [tool_use(("lookup", {"key": f"k{n}"})) for n in range(3)]
    return AgentLoop(
        ScriptedClient(script), model="claude-sonnet-4-6", tools=[lookup], budget=Budget(max_steps=2)
    )


NOT_A_LOOP = 42


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("boundloop: error: ")
    return lines[0]


@pytest.mark.parametrize("argv", [["--help"], ["demo", "--help"], ["run", "--help"], ["diagram", "--help"]])
def test_help_everywhere(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Every command has --help, exits 0 and documents the exit codes."""
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: boundloop")
    assert "exit codes:" in out
    assert "130  interrupted" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    """--version prints the package version."""
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == "boundloop 0.1.0"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param([], "required: COMMAND", id="no-command"),
        pytest.param(["demo", "--bogus"], "unrecognized arguments: --bogus", id="unknown-flag"),
        pytest.param(["run", "x:y"], "required: --goal", id="run-without-goal"),
        pytest.param(["demo", "--hold"], "needs --metrics-port", id="hold-without-port"),
        pytest.param(["demo", "--metrics-port", "70000"], "0-65535", id="bad-port"),
    ],
)
def test_usage_errors_are_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A usage error is one line on stderr and exit code 2, never a traceback."""
    assert main(argv) == 2
    assert message in one_line(capsys.readouterr().err)


def test_demo_shows_the_run_as_it_happens(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The demo completes offline, showing transitions, the parallel batch, the budget."""
    trace = tmp_path / "run.jsonl"
    assert main(["demo", "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert GOAL in out
    assert "assemble → propose" in out
    assert "validate → act" in out
    assert "running 3 tools in parallel" in out
    assert "issue_refund" not in out  # an attempt would stop the run: --scenario policy_blocked
    assert re.search(r"budget left: 8/8 steps · 12/12 tool calls · \d+\.\d s", out)
    assert "budget left: 7/8 steps · 9/12 tool calls" in out
    assert "stopped: completed" in out
    assert "stop reason  completed" in out
    assert "I did not issue the refund." in out.replace("│", "").replace("\n", " ").replace("  ", " ")

    events = read_events(trace)
    assert [e.stop_reason for e in events if isinstance(e, Stop)] == ["completed"]
    assert [e.tool for e in events if isinstance(e, ToolResult) and e.outcome != "ok"] == []


def test_demo_json(capsys: pytest.CaptureFixture[str]) -> None:
    """--json prints the LoopResult alone, as JSON, on stdout."""
    assert main(["demo", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["stop_reason"] == "completed"
    assert result["answer"] == ANSWER
    assert result["state"]["step"] == 4
    outcomes = {(o["tool"], o["outcome"]) for o in result["state"]["observations"]}
    assert all(outcome == "ok" for _, outcome in outcomes)
    assert ("read_order", "ok") in outcomes


def test_demo_live_needs_a_key(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """--live without ANTHROPIC_API_KEY is a clear one-line error, before any request."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    assert main(["demo", "--live", "--model", "claude-sonnet-4-6"]) == 2
    assert "ANTHROPIC_API_KEY" in one_line(capsys.readouterr().err)


@pytest.mark.asyncio_only  # a real process: one event loop is enough
async def test_demo_serves_metrics_and_holds() -> None:
    """--metrics-port serves the run's metrics on loopback; --hold serves on until Ctrl-C, then exits 0."""
    command = [sys.executable, "-m", "boundloop", "demo", "--metrics-port", "0", "--hold"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    async with await anyio.open_process(command, env=env, cwd=ROOT) as process:
        assert process.stderr is not None
        seen = b""
        with anyio.fail_after(30):
            while b"holding until Ctrl-C" not in seen:
                seen += await process.stderr.receive()
        found = re.search(rb"metrics: (http://127\.0\.0\.1:\d+/metrics)", seen)
        assert found, seen
        async with httpx.AsyncClient() as client:
            scrape = (await client.get(found.group(1).decode(), timeout=10)).text
        assert (
            'boundloop_runs_total{loop="refund_investigation",stop_reason="completed",version=""} 1.0'
            in scrape
        )
        assert (
            'boundloop_tool_calls_total{loop="refund_investigation",outcome="denied",tool="_unknown"}'
            in scrape
        )
        process.send_signal(signal.SIGINT)
        with anyio.fail_after(10):
            assert await process.wait() == 0


@pytest.mark.parametrize("spec", ["tests.test_cli:scripted_loop", "tests.test_cli:async_scripted_loop"])
def test_run_spec(spec: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`boundloop run module:factory` runs the user's loop with the same view and trace."""
    trace = tmp_path / "run.jsonl"
    assert main(["run", spec, "--goal", "What is a?", "--trace", str(trace), "--app-dir", str(ROOT)]) == 0
    out = capsys.readouterr().out
    assert "What is a?" in out
    assert "✓ lookup" in out
    assert "stopped: completed" in out
    assert any(e.kind == "stop" for e in read_events(trace))


def test_run_json_and_not_completed_exit(capsys: pytest.CaptureFixture[str]) -> None:
    """A run that stops at a budget exits 1, and --json still prints its result."""
    assert main(["run", "tests.test_cli:looping_loop", "--goal", "Loop.", "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["stop_reason"] == "max_steps"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        pytest.param("tests.test_cli", "SPEC must be module:factory", id="no-colon"),
        pytest.param("tests.no_such_module:f", "cannot import 'tests.no_such_module'", id="no-module"),
        pytest.param("tests.test_cli:missing", "has no attribute 'missing'", id="no-attribute"),
        pytest.param(
            "tests.test_cli:NOT_A_LOOP", "must be an AgentLoop or return one, got int", id="not-a-loop"
        ),
    ],
)
def test_run_bad_spec(spec: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A SPEC that does not lead to an AgentLoop is a one-line usage error."""
    assert main(["run", spec, "--goal", "x"]) == 2
    assert message in one_line(capsys.readouterr().err)


def test_diagram_prints_mermaid(capsys: pytest.CaptureFixture[str]) -> None:
    """`boundloop diagram` prints the mermaid diagram of the table."""
    assert main(["diagram"]) == 0
    assert capsys.readouterr().out == render_mermaid()


def test_diagram_with_a_demo_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--trace overlays a run's path: the demo's three tool turns show as (3x)."""
    trace = tmp_path / "run.jsonl"
    assert main(["demo", "--json", "--trace", str(trace)]) == 0
    capsys.readouterr()
    assert main(["diagram", "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "validate --> act: validated [has_tool_calls] (3x)" in out
    assert "Class stopped s_active" in out


def test_diagram_updates_markdown_in_place(tmp_path: Path) -> None:
    """An .md output gets its mermaid block replaced and keeps its prose."""
    doc = tmp_path / "machine.md"
    doc.write_text("# Loop\n\nSome prose.\n\n```mermaid\nstale\n```\n\nMore prose.\n", encoding="utf-8")
    assert main(["diagram", "--output", str(doc)]) == 0
    assert doc.read_text(encoding="utf-8") == (
        f"# Loop\n\nSome prose.\n\n```mermaid\n{render_mermaid()}```\n\nMore prose.\n"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["diagram", "--format", "png"], "png is binary: pass --output FILE", id="png-to-stdout"),
        pytest.param(
            ["diagram", "--trace", "/nonexistent/run.jsonl"], "cannot read the trace", id="no-trace"
        ),
        pytest.param(["diagram", "--format", "pdf"], "invalid choice: 'pdf'", id="bad-format"),
    ],
)
def test_diagram_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Diagram mistakes are one-line errors with exit code 2."""
    assert main(argv) == 2
    assert message in one_line(capsys.readouterr().err)


def test_diagram_bad_trace_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trace file with a broken line is reported with the line number."""
    trace = tmp_path / "run.jsonl"
    trace.write_text("{}\n", encoding="utf-8")
    assert main(["diagram", "--trace", str(trace)]) == 2
    assert "run.jsonl:1: not an event (kind: Input tag 'None'" in one_line(capsys.readouterr().err)


def test_diagram_without_graphviz(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """svg without the dot binary names the graphviz package in one line, no traceback."""
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["diagram", "--output", str(tmp_path / "loop.svg")]) == 2
    line = one_line(capsys.readouterr().err)
    assert "svg needs graphviz" in line
    assert "install the system package 'graphviz'" in line
    assert not (tmp_path / "loop.svg").exists()


@pytest.mark.integration
@pytest.mark.parametrize(("name", "magic"), [("loop.svg", b"<?xml"), ("loop.png", b"\x89PNG")])
def test_diagram_images(name: str, magic: bytes, tmp_path: Path) -> None:
    """svg and png are rendered through real graphviz, the format taken from the file suffix."""
    require_binary("dot", "graphviz")
    output = tmp_path / name
    assert main(["diagram", "--output", str(output)]) == 0
    image = output.read_bytes()
    assert image.startswith(magic)
    assert len(image) > 5_000


def test_python_dash_m_is_the_same_command() -> None:
    """`python -m boundloop` runs the same main: same output, same exit codes."""
    ran = subprocess.run(
        [sys.executable, "-m", "boundloop", "diagram"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == render_mermaid()
    bad = subprocess.run(
        [sys.executable, "-m", "boundloop", "nope"], capture_output=True, text=True, timeout=60, check=False
    )
    assert bad.returncode == 2
    assert "invalid choice: 'nope'" in one_line(bad.stderr)


class FakeMessagesAPI(http.server.BaseHTTPRequestHandler):
    """A loopback stand-in for the Messages API: answers with the demo's script, in order."""

    script: ClassVar[list[dict[str, Any]]] = []
    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        type(self).requests.append(body)
        reply = json.dumps(api_message(type(self).script.pop(0), model=body["model"])).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output quiet."""


def test_demo_live_talks_to_the_messages_api(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--live sends the demo through the real AsyncAnthropic client (here to a loopback API) and completes."""
    FakeMessagesAPI.script = list(SCRIPT)
    FakeMessagesAPI.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeMessagesAPI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{server.server_port}")
        assert main(["demo", "--live", "--model", "claude-haiku-4-5", "--json"]) == 0
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert json.loads(capsys.readouterr().out)["stop_reason"] == "completed"
    first = FakeMessagesAPI.requests[0]
    assert first["model"] == "claude-haiku-4-5"
    assert sorted(t["name"] for t in first["tools"]) == sorted(ALLOWED)
    assert len(FakeMessagesAPI.requests) == len(SCRIPT)


def factory_that_raises() -> AgentLoop:
    """A factory failing the way a misconfigured app does."""
    raise RuntimeError("no database configured")


def tool_that_crashes_loop() -> AgentLoop:
    """A loop whose tool raises with on_tool_error="raise"."""

    @tool
    async def crash(key: str) -> str:
        """Crashes."""
        raise KeyError(key)

    client = ScriptedClient([tool_use(("crash", {"key": "a"}))])
    return AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[crash],
        budget=Budget(max_steps=2),
        policy=Policy(on_tool_error="raise"),
        observers=Observers(metrics=None),
    )


@pytest.mark.parametrize(
    ("spec", "expected", "code"),
    [
        pytest.param(
            "tests.test_cli:factory_that_raises", "the factory raised RuntimeError", 2, id="factory-raises"
        ),
        pytest.param("json:dumps", "the factory raised TypeError", 2, id="not-a-factory"),
        pytest.param("tests.no_such_module:x", "cannot import 'tests.no_such_module'", 2, id="no-module"),
        pytest.param("tests.test_cli:tool_that_crashes_loop", "the run failed: KeyError", 1, id="run-raises"),
    ],
)
def test_run_reports_the_users_errors_in_one_line(
    spec: str, expected: str, code: int, capsys: pytest.CaptureFixture[str]
) -> None:
    """Whatever the user's module, factory or tools raise, the command prints one line and its code."""
    assert main(["run", spec, "--goal", "g", "--app-dir", str(ROOT)]) == code
    assert expected in one_line(capsys.readouterr().err)


def unwritable_trace(tmp_path: Path, kind: str) -> Path:
    """A --trace path that cannot be opened for writing, even by root."""
    if kind == "parent-is-a-file":
        (tmp_path / "file").write_text("", encoding="utf-8")
        return tmp_path / "file" / "run.jsonl"
    if kind == "missing-directory":
        return tmp_path / "missing" / "run.jsonl"
    if kind == "dangling-link":  # passed the old check: the link's own directory is writable
        (tmp_path / "run.jsonl").symlink_to(tmp_path / "missing" / "run.jsonl")
        return tmp_path / "run.jsonl"
    (tmp_path / "dir").mkdir()
    return tmp_path / "dir"


UNWRITABLE = pytest.mark.parametrize(
    ("kind", "reason"),
    [
        pytest.param("parent-is-a-file", "Not a directory", id="parent-is-a-file"),
        pytest.param("missing-directory", "No such file or directory", id="missing-directory"),
        pytest.param("directory", "Is a directory", id="directory"),
        pytest.param("dangling-link", "No such file or directory", id="dangling-link"),
    ],
)


@UNWRITABLE
def test_an_unwritable_trace_fails_the_demo_before_the_run(
    kind: str, reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A --trace that cannot be opened fails at once (exit 2, one line), before any model call."""
    target = unwritable_trace(tmp_path, kind)
    assert main(["demo", "--trace", str(target)]) == 2
    captured = capsys.readouterr()
    assert one_line(captured.err) == f"boundloop: error: cannot write the trace {target}: {reason}"
    assert captured.out == ""  # no view, no transition: the loop never started
    assert not target.is_file()


WATCHED = ScriptedClient([text("done")])
"""The client of `watched_loop`; each test replaces it (monkeypatch) with a fresh one."""


def watched_loop() -> AgentLoop:
    """A loop on `WATCHED`, so a test can see which requests its model got."""
    return AgentLoop(
        WATCHED, model="claude-sonnet-4-6", budget=Budget(max_steps=2), observers=Observers(metrics=None)
    )


def watched_run(trace: Path) -> list[str]:
    """`boundloop run` of `watched_loop`, writing its trace to `trace`."""
    return [
        "run",
        "tests.test_cli:watched_loop",
        "--goal",
        "g",
        "--app-dir",
        str(ROOT),
        "--trace",
        str(trace),
    ]


@UNWRITABLE
def test_an_unwritable_trace_fails_run_before_any_model_call(
    kind: str,
    reason: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`run --trace` into an unusable path: exit 2, one line, and the model got no request."""
    client = ScriptedClient([text("done")])
    monkeypatch.setattr(sys.modules[__name__], "WATCHED", client)
    target = unwritable_trace(tmp_path, kind)
    argv = watched_run(target)
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert one_line(captured.err) == f"boundloop: error: cannot write the trace {target}: {reason}"
    assert captured.out == ""
    assert client.requests == []


def test_a_writable_trace_is_written_after_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The check opens the file but keeps the run going: the model is called, the trace written."""
    client = ScriptedClient([text("done")])
    monkeypatch.setattr(sys.modules[__name__], "WATCHED", client)
    target = tmp_path / "run.jsonl"
    target.write_text("an older trace, replaced\n", encoding="utf-8")
    argv = watched_run(target)
    assert main([*argv, "--json"]) == 0
    capsys.readouterr()
    assert len(client.requests) == 1
    assert [event.kind for event in read_events(target)][-1] == "stop"


def test_a_run_that_never_starts_leaves_no_trace_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A setup error after the check (here the factory) removes the file it created, keeps an old one."""
    target = tmp_path / "run.jsonl"
    argv = ["run", "tests.test_cli:factory_that_raises", "--goal", "g", "--app-dir", str(ROOT)]
    assert main([*argv, "--trace", str(target)]) == 2
    assert not target.exists()
    target.write_text("an older trace\n", encoding="utf-8")
    assert main([*argv, "--trace", str(target)]) == 2
    assert target.read_text(encoding="utf-8") == "an older trace\n"
    capsys.readouterr()


def test_the_trace_of_a_failed_run_is_still_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """When the run raises, the events recorded so far are written to --trace."""
    target = tmp_path / "run.jsonl"
    spec = "tests.test_cli:tool_that_crashes_loop"
    assert main(["run", spec, "--goal", "g", "--app-dir", str(ROOT), "--trace", str(target)]) == 1
    kinds = [event.kind for event in read_events(target)]
    assert kinds[-1] == "stop"
    assert "tool_started" in kinds
    capsys.readouterr()


def test_json_mode_prints_the_metrics_url_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """With --json, stdout is only the result; the metrics URL goes to stderr."""
    assert main(["demo", "--json", "--metrics-port", "0"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["stop_reason"] == "completed"
    assert re.search(r"metrics: http://127\.0\.0\.1:\d+/metrics", captured.err)


# -- each command's own exit codes; diagram's format; costs; the API out of reach ------------


@pytest.mark.parametrize(
    ("command", "own", "foreign"),
    [
        ("demo", ["0    the run completed", "ANTHROPIC_API_KEY", "with --hold"], ["diagram", "replay"]),
        ("run", ["0    the run completed", "a SPEC that leads to no"], ["diagram", "ANTHROPIC_API_KEY"]),
        ("resume", ["0    the resumed run completed", "left undecided"], ["diagram", "ANTHROPIC_API_KEY"]),
        ("diagram", ["0    the diagram was written", "graphviz"], ["run completed", "--hold", "1    "]),
        ("check", ["0    the contract is sound", "policy file"], ["compile", "written", "output"]),
        ("compile", ["0    the contract is sound and the files were written"], ["check", "policy file"]),
    ],
)
def test_each_help_shows_its_own_exit_codes(
    command: str, own: list[str], foreign: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A command's --help lists the exit codes it can return, in its own words, and no other
    command's."""
    assert main([command, "--help"]) == 0
    codes = capsys.readouterr().out.partition("exit codes:\n")[2]
    assert codes.rstrip().endswith("interrupted (Ctrl-C)") or "with --hold" in codes
    for phrase in own:
        assert phrase in codes
    for phrase in foreign:
        assert phrase not in codes


def test_the_parser_knows_the_diagram_formats_and_the_demo_model() -> None:
    """The values `--help` shows without importing their modules are those modules' own."""
    from boundloop.cli import _defaults, demo
    from boundloop.statemachine import diagram

    assert _defaults.DIAGRAM_FORMATS == diagram.FORMATS
    assert set(_defaults.DIAGRAM_SUFFIXES.values()) == set(diagram.FORMATS)
    assert demo.MODEL == _defaults.DEMO_MODEL


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["--format", "dot", "-o", "x.svg"],
            "--format dot does not match --output x.svg, which names svg: drop --format, "
            "or give an output ending in .dot, .gv",
            id="dot-into-svg",
        ),
        pytest.param(
            ["--format", "svg", "-o", "machine.md"],
            "--format svg does not match --output machine.md, which names mermaid",
            id="svg-into-markdown",
        ),
        pytest.param(
            ["--format", "mermaid", "-o", "x.PNG"],
            "--format mermaid does not match --output x.PNG, which names png",
            id="upper-case-suffix",
        ),
    ],
)
def test_diagram_refuses_a_format_the_suffix_contradicts(
    argv: list[str],
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`--format dot -o x.svg` would write dot text into an .svg: a one-line error, no file."""
    monkeypatch.chdir(tmp_path)
    assert main(["diagram", *argv]) == 2
    assert one_line(capsys.readouterr().err).startswith(f"boundloop: error: {message}")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("argv", "written"),
    [
        pytest.param(["--format", "dot", "-o", "machine.gv"], "digraph", id="agreeing-suffix"),
        pytest.param(["--format", "dot", "-o", "machine.txt"], "digraph", id="unknown-suffix"),
        pytest.param(["-o", "machine.dot"], "digraph", id="inferred"),
        pytest.param(["-o", "machine.txt"], "stateDiagram-v2", id="unknown-suffix-is-mermaid"),
    ],
)
def test_diagram_takes_an_agreeing_or_unknown_suffix(
    argv: list[str], written: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A suffix that agrees, or names no format, is written in the format asked (or inferred)."""
    monkeypatch.chdir(tmp_path)
    assert main(["diagram", *argv]) == 0
    [output] = tmp_path.iterdir()
    assert written in output.read_text(encoding="utf-8")


def test_json_costs_are_rounded(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's cost is 0.0381 in its JSON, not the float sum 0.038099999999999995; the state's
    own JSON (`LoopState.to_json`, what a store keeps) stays exact."""
    assert main(["demo", "--json"]) == 0
    out = capsys.readouterr().out
    result = json.loads(out)
    assert result["usage"]["cost_usd"] == 0.0381
    assert result["state"]["usage"]["cost_usd"] == 0.0381
    assert not re.search(r'_usd": \d+\.\d{7,}', out)


def test_rounded_costs_rounds_dollar_amounts_only() -> None:
    """Floats under keys ending in `_usd` are rounded to 6 decimals, at any depth; nothing else."""
    from boundloop.cli._json import rounded_costs

    raw = {
        "cost_usd": 0.038099999999999995,
        "figures": {"max_cost_usd": 1, "cost_usd": 1.23456789, "duration_s": 0.123456789},
        "cases": [{"cost_usd": 2e-7, "name": "x_usd"}],
    }
    assert rounded_costs(raw) == {
        "cost_usd": 0.0381,
        "figures": {"max_cost_usd": 1, "cost_usd": 1.234568, "duration_s": 0.123456789},
        "cases": [{"cost_usd": 0.0, "name": "x_usd"}],
    }


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "view"])
def test_demo_live_without_the_api_is_one_sentence(
    as_json: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--live with the API out of reach (here a closed loopback port, no real network): one
    sentence naming the address and the reason, exit 2; no result JSON, no summary."""
    from anthropic import AsyncAnthropic

    from boundloop.cli import _demo

    port = closed_port()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000")
    monkeypatch.setattr(
        _demo,
        "live_client",
        lambda: AsyncAnthropic(
            base_url=f"http://127.0.0.1:{port}", api_key="sk-ant-test-0000", max_retries=0
        ),
    )
    assert main(["demo", "--live", *(["--json"] if as_json else [])]) == 2
    captured = capsys.readouterr()
    assert one_line(captured.err) == (
        f"boundloop: error: could not reach the Anthropic API at http://127.0.0.1:{port}: connection refused"
    )
    if as_json:
        assert captured.out == ""
    else:
        assert "stop reason" not in captured.out  # the summary table is not printed
        assert "{" not in captured.out


_RELEASE = threading.Event()
"""Never set: the tool below blocks its worker thread until the process ends (at most 60 s)."""


@tool
def wait_in_thread(key: str) -> str:
    """Block in the worker thread, after saying so on stderr."""
    print(f"tool started: {key}", file=sys.stderr, flush=True)
    _RELEASE.wait(60)
    return "released"


class _SlowFinalSave:
    """A SQLite store whose save of a cancelled run says so on stderr, then hangs (until the 10 s cap)."""

    def __init__(self, path: str) -> None:
        self._store = SQLiteStore(path)

    async def save(self, state: LoopState) -> None:
        if state.stop_reason is StopReason.CANCELLED:
            print("final save", file=sys.stderr, flush=True)
            await anyio.sleep_forever()
        await self._store.save(state)

    async def load(self, task_id: str) -> LoopState | None:
        return await self._store.load(task_id)

    async def list(self, *, status: Status | None = None, stop_reason: str | None = None) -> list[StoredRun]:
        return await self._store.list(status=status, stop_reason=stop_reason)

    async def delete(self, task_id: str) -> bool:
        return await self._store.delete(task_id)


def _thread_loop(store: CheckpointStore) -> AgentLoop:
    client = ScriptedClient([tool_use(("wait_in_thread", {"key": "a"})), text("done")])
    return AgentLoop(
        client, model="claude-sonnet-4-6", tools=[wait_in_thread], budget=Budget(max_steps=4), store=store
    )


def thread_loop() -> AgentLoop:
    """A loop whose one tool blocks in a worker thread; its runs saved in ./runs.db."""
    return _thread_loop(SQLiteStore("runs.db"))


def thread_loop_slow_save() -> AgentLoop:
    """The same, with a final save that hangs."""
    return _thread_loop(_SlowFinalSave("runs.db"))


def _interrupt(tmp_path: Path, spec: str, *, after: list[bytes]) -> tuple[int, str]:
    """Run `boundloop run SPEC` in a process; at each marker of `after` seen on stderr, Ctrl-C it.

    Returns:
        The exit code and the whole stderr.
    """
    command = [sys.executable, "-m", "boundloop", "run", spec, "--goal", "Go.", "--app-dir", str(ROOT)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
    with subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as process:
        assert process.stderr is not None
        try:
            seen = b""
            for marker in after:
                while marker not in seen:
                    line = process.stderr.readline()
                    assert line, seen  # the process ended before printing the marker
                    seen += line
                process.send_signal(signal.SIGINT)
            _, rest = process.communicate(timeout=20)  # the tool would hold the old process 60 s
        finally:
            process.kill()
    return process.returncode, (seen + rest).decode()


def test_ctrl_c_abandons_a_tool_thread_and_exits_130(tmp_path: Path) -> None:
    """The first Ctrl-C ends the run `cancelled` though its tool blocks in a thread: the state,
    checkpointed, says the thread was abandoned, and the process exits 130 without a traceback
    (it used to wait for the thread, and a second Ctrl-C printed threading's traceback)."""
    code, stderr = _interrupt(tmp_path, "tests.test_cli:thread_loop", after=[b"tool started: a"])
    assert code == 130, stderr
    assert "Traceback" not in stderr
    assert one_line(stderr.replace("tool started: a\n", "")) == "boundloop: error: interrupted"

    async def stored() -> LoopState:
        store = SQLiteStore(str(tmp_path / "runs.db"))
        (run,) = await store.list()
        state = await store.load(run.task_id)
        assert state is not None
        return state

    state = anyio.run(stored)
    assert state.stop_reason is StopReason.CANCELLED
    (observation,) = state.observations
    assert observation.outcome == "cancelled"
    assert "in a worker thread, which was abandoned and may still finish" in str(observation.content)


def test_a_second_ctrl_c_exits_at_once(tmp_path: Path) -> None:
    """A second Ctrl-C while the interrupted run is still saving ends the process at once: 130,
    one line, no traceback, without waiting for the save or the abandoned thread."""
    code, stderr = _interrupt(
        tmp_path, "tests.test_cli:thread_loop_slow_save", after=[b"tool started: a", b"final save"]
    )
    assert code == 130, stderr
    assert "Traceback" not in stderr
    assert "boundloop: error: interrupted again: exiting at once" in stderr


@pytest.mark.filterwarnings("default::boundloop.UnpricedModelWarning")
def test_the_unpriced_model_warning_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command prints boundloop's warning as one line of its own, not Python's two lines
    pointing at anyio's frame (the demo builds its loop inside the event loop)."""
    monkeypatch.setattr(prices, "_warned", set())
    assert main(["demo", "--model", "cli-unpriced-model", "--json"]) == 0
    assert capsys.readouterr().err.splitlines() == [
        "boundloop: warning: no price known for model 'cli-unpriced-model': cost not tracked "
        "(pass prices={'cli-unpriced-model': Price(...)} to track it)"
    ]


@pytest.mark.parametrize(
    "command",
    [
        pytest.param(["check"], id="check"),
        pytest.param(["compile", "--output", "out.py"], id="compile"),
        pytest.param(["eval"], id="eval"),
        pytest.param(["eval", "--check"], id="eval-check"),
    ],
)
@pytest.mark.parametrize(
    ("content", "sentence"),
    [
        pytest.param(
            b"{nope", "{path} is not JSON: Expecting property name enclosed in double quotes", id="json"
        ),
        pytest.param(b"\xff\xfe", "cannot read {path}: 'utf-8' codec can't decode byte 0xff", id="bytes"),
    ],
)
def test_an_input_file_that_is_not_json_is_one_rule(
    command: list[str], content: bytes, sentence: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A contract or a fixture that cannot be read or is not JSON: exit 2 and one line naming the
    file, for `check`, `compile` and `eval` alike (`check` exited 1 and `eval` 2, worded apart)."""
    path = tmp_path / "input.json"
    path.write_bytes(content)
    assert main([*command, str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("boundloop: error: " + sentence.format(path=path))


@pytest.mark.parametrize(
    ("scenario", "detail"),
    [
        ("policy_blocked", "forbidden tool proposed: issue_refund"),
        ("needs_human", "circuit breaker open: 2 failing tool results in a row"),
        ("evidence_missing", "missing evidence from read_delivery_status"),
        ("max_steps", "max_steps=8 spent (used 8); resumable once the ceiling is raised"),
    ],
)
def test_each_demo_scenario_ends_with_its_refund_stop_reason(
    scenario: str, detail: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The demo reaches the five refund stop reasons (completed above); the issue_refund attempt
    stops the run and nothing of its batch runs (the customer is not asked)."""
    assert main(["demo", "--scenario", scenario, "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert result["stop_reason"] == scenario
    assert result["state"]["stop_detail"] == detail
    if scenario == "policy_blocked":
        ran = [o["tool"] for o in result["state"]["observations"] if o["attempts"]]
        assert ran == ["read_order", "read_delivery_status", "search_refund_policy"]
