"""Every example runs: in-process through its `main`, as a script, and the FastAPI app under real uvicorn."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import httpx
import pytest

from boundloop import ScriptedClient
from boundloop.cli import main as cli_main
from boundloop.cli.demo import GOAL, SCENARIOS, demo_loop
from boundloop.statemachine.diagram import render_mermaid
from tests.conftest import require_binary

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "ANTHROPIC_API_KEY": ""}


def load(name: str) -> ModuleType:
    """Import examples/<name>.py as a module (examples/ is not a package)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_example(
    script: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """`python examples/<script> <args>` offline (`ENV` unless `env` says otherwise), its output captured."""
    command = [sys.executable, str(EXAMPLES / script), *args]
    return subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, env=ENV if env is None else env, check=False
    )


Main = Callable[..., Awaitable[str]]
"""`main(name, *args)`: run examples/<name>.py's `main(*args)`, which returns 0; what it printed."""


@pytest.fixture
def main(capsys: pytest.CaptureFixture[str]) -> Main:
    """Runs an example's `main` in process and returns what it printed."""

    async def run(name: str, *args: object) -> str:
        assert await load(name).main(*args) == 0
        return capsys.readouterr().out

    return run


@contextlib.asynccontextmanager
async def under_uvicorn(app: str) -> AsyncIterator[httpx.AsyncClient]:
    """`app` (`module:attribute` of examples/) served offline by uvicorn in a process of its own on
    a free port; a client on it. Afterwards the server is stopped with SIGINT and exits 0; when
    the test fails it is killed (a server left running would keep the test waiting for its exit)."""
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        app,
        "--app-dir",
        str(EXAMPLES),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
    ]
    async with await anyio.open_process(command, env=ENV, cwd=ROOT) as server:
        try:
            assert server.stderr is not None
            log = b""
            with anyio.fail_after(30):
                while not (found := re.search(rb"Uvicorn running on (http://127\.0\.0\.1:\d+)", log)):
                    log += await server.stderr.receive()
            async with httpx.AsyncClient(base_url=found.group(1).decode(), timeout=20) as client:
                yield client
        except BaseException:
            server.kill()
            raise
        server.send_signal(signal.SIGINT)
        with anyio.fail_after(15):
            assert await server.wait() == 0


def test_examples_are_all_tested() -> None:
    """Each example in examples/ has a test here."""
    assert {path.stem for path in EXAMPLES.glob("*.py")} == {
        "refund_investigation",
        "parallel_tools",
        "delegation",
        "fastapi_app",
        "front_ends",
        "diagram",
        "approval",
        "contract_loop",
        "dbos_workers",
        "mcp_time",
        "ai_sdk_chat",
        "pool_tenants",
    }


@pytest.mark.parametrize("name", ["contract_loop", "approval", "refund_investigation", "delegation"])
def test_example_runs_as_a_script(name: str) -> None:
    """`python examples/<name>.py` runs offline, exits 0 and completes its run."""
    ran = run_example(f"{name}.py")
    assert ran.returncode == 0, ran.stderr
    assert "stop reason: completed" in ran.stdout


def test_contract_loop(capsys: pytest.CaptureFixture[str]) -> None:
    """The contract example checks, builds and runs its loop, and its contract round-trips.
    (Imported outside the event loop: its import loads `boundloop.contract`'s checker, which
    reads the contract schema from disk, as any first import does.)"""
    example = load("contract_loop")
    assert anyio.run(example.main) == 0
    out = capsys.readouterr().out
    assert "check: 0 problem(s)" in out
    assert "stop reason: completed" in out
    assert "round trip checks: 0 problem(s)" in out


async def test_pool_tenants(main: Main) -> None:
    """The multi-tenant app: a tenant's third question stops at its daily pool (429, the pool
    named, resumable), goes on once the ceiling is raised; another tenant is not affected; the
    service's hourly pool was charged every call."""
    out = await main("pool_tenants")
    assert "initech #2: stop reason: completed (pool: None)" in out
    assert "initech #3: stop reason: cost_budget (pool: tenant:initech)" in out
    assert "detail: the budget pool 'tenant:initech': max_cost_usd=0.03 cannot cover the next call" in out
    assert "resumable: True" in out
    assert "initech today: spent $0.0285 of $0.03" in out
    assert "initech resumed: stop reason: completed" in out
    assert "acme: stop reason: completed" in out
    assert "the service this hour: spent $0.0513 of $2.00" in out


async def test_approval(main: Main) -> None:
    """The approval example waits for a human, then runs the approved refund and denies the other."""
    out = await main("approval")
    assert "stop reason: needs_human" in out
    assert "waiting: t1 issue_refund" in out
    assert "waiting: t2 issue_refund" in out
    assert "refunds so far: 0" in out
    assert "t2 denied: issue_refund was denied by a human: over the EUR 500 limit without a manager" in out
    assert "refunds applied: ['O-104: EUR 40.00']" in out
    assert "stop reason: completed" in out


async def test_refund_investigation(main: Main) -> None:
    """The refund example completes as the demo does: it never tries the forbidden issue_refund."""
    out = await main("refund_investigation")
    assert "issue_refund" not in out
    assert re.search(r"step 3: draft_refund_recommendation\s+ok", out)
    assert "stop reason: completed" in out
    assert "model calls: 4, tool calls: 5" in out


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
async def test_the_refund_example_is_the_demos_loop(scenario: str) -> None:
    """Each of the demo's scripts ends with the same stop reason on the example's loop as on the
    demo's: the example is "the same loop written as library code" (it reported the forbidden
    call and went on, so the demo's `policy_blocked` script ran out on it)."""
    example = load("refund_investigation")
    demo_result = await demo_loop(scenario=scenario).run(GOAL)
    result = await example.build_loop(ScriptedClient(SCENARIOS[scenario])).run(example.GOAL)
    assert demo_result.stop_reason == scenario
    assert result.stop_reason == scenario, result.state.stop_detail
    assert example.GOAL == GOAL
    assert {observation.tool for observation in result.state.observations} == {
        observation.tool for observation in demo_result.state.observations
    }


def test_refund_investigation_through_boundloop_run(capsys: pytest.CaptureFixture[str]) -> None:
    """The example's factory runs from the shell with `boundloop run`."""
    argv = ["run", "refund_investigation:build_loop", "--app-dir", str(EXAMPLES), "--goal", "Check O-104."]
    assert cli_main(argv) == 0
    assert "stopped: completed" in capsys.readouterr().out


async def test_parallel_tools(main: Main) -> None:
    """Four tool calls of one turn are answered in one user message, in block order."""
    out = await main("parallel_tools")
    assert "4 tool calls in one turn, answered in one user message" in out
    assert "t1, t2, t3, t4" in out
    result = await load("parallel_tools").run()
    requests = [m for m in result.messages if m["role"] == "user"]
    assert len(requests) == 2  # the goal, then the one message carrying all four results


async def test_delegation(main: Main) -> None:
    """The lead delegates three topics in one response; the three researcher runs are its
    children, run at once, and the tree's usage is theirs and the lead's."""
    out = await main("delegation")
    assert "children: 3 researcher runs" in out
    result = await load("delegation").run()
    assert len(result.state.children) == 3
    assert result.state.usage.total_tokens == 2 * 520  # the lead's two calls
    assert result.usage.total_tokens == 2 * 520 + 3 * 2 * 520  # and each researcher's two
    assert (result.answer or "").count("three sources agree") == 3


@pytest.mark.asyncio_only  # its MCP server runs as a subprocess through the mcp SDK
async def test_mcp_time(main: Main) -> None:
    """mcp-server-time's tool and a local tool, called in one turn, answered in one user message."""
    require_binary("mcp-server-time", "mcp-server-time (pip; the dev extra installs it)")
    out = await main("mcp_time")
    assert "tools: order_status, get_current_time, convert_time" in out
    assert "t1: is_error=False" in out
    assert "t2: is_error=False order A-17: shipped" in out


async def test_diagram_example(main: Main) -> None:
    """The diagram example prints the table's mermaid diagram and a run's path."""
    out = await main("diagram", None)
    assert out.startswith(render_mermaid())
    assert "validate --> act: validated [has_tool_calls] (2x)" in out
    assert "13 transitions taken, ending in stopped" in out


@pytest.mark.integration
async def test_diagram_example_writes_svg(tmp_path: Path) -> None:
    """With graphviz, the diagram example writes an svg of the run's path."""
    require_binary("dot", "graphviz")
    output = tmp_path / "loop.svg"
    assert await load("diagram").main(output) == 0
    assert "(2x)" in output.read_text(encoding="utf-8")


async def runs(client: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    response = await client.get("/runs")
    response.raise_for_status()
    listed: dict[str, dict[str, Any]] = response.json()
    return listed


async def wait_for_run(client: httpx.AsyncClient, field: str, value: str) -> None:
    """Poll /runs until a run has `field == value`: the server is another process, no Event reaches it."""
    while True:
        if any(run[field] == value for run in (await runs(client)).values()):
            return
        await anyio.sleep(0.02)


@pytest.mark.asyncio_only  # a real server process: one client loop is enough
async def test_front_ends_under_uvicorn() -> None:
    """examples/front_ends.py offline under uvicorn: POST /agui streams AG-UI events to the
    refund's approval interrupt; the next run answering it runs the refund to `completed`."""
    async with under_uvicorn("front_ends:app") as client:
        with anyio.fail_after(30):
            user = [{"id": "m1", "role": "user", "content": "Is O-104 refundable?"}]
            first = await client.post("/agui", json={"threadId": "t1", "runId": "r1", "messages": user})
            assert first.headers["content-type"].startswith("text/event-stream")
            datas = [json.loads(line[6:]) for line in first.text.splitlines() if line.startswith("data: ")]
            assert datas[0]["type"] == "RUN_STARTED"
            outcome = datas[-1]["outcome"]
            assert outcome["type"] == "interrupt"
            answer = [
                {"interruptId": i["id"], "status": "resolved", "payload": {"approved": True}}
                for i in outcome["interrupts"]
            ]
            second = await client.post(
                "/agui", json={"threadId": "t1", "runId": "r2", "messages": [], "resume": answer}
            )
            datas = [json.loads(line[6:]) for line in second.text.splitlines() if line.startswith("data: ")]
            assert {"type": "TOOL_CALL_RESULT", "content": "refunded 189.00 on O-104"}.items() <= datas[
                1
            ].items()
            assert datas[-1]["outcome"] == {"type": "success"}


@pytest.mark.asyncio_only  # a real server process: one client loop is enough
async def test_fastapi_app_under_uvicorn() -> None:
    """Per-request runs with their own budget, cancellation on hang-up and /metrics, through real uvicorn."""
    async with under_uvicorn("fastapi_app:app") as client:
        with anyio.fail_after(30):
            done = await client.post("/investigations", json={"order_id": "O-104"})
            assert done.status_code == 200
            assert done.json()["stop_reason"] == "completed"
            assert done.json()["answer"].startswith("O-104: delivered damaged")

            # The per-request budget: this request allows half a second; the carrier hangs.
            slow = await client.post("/investigations", json={"order_id": "O-777", "timeout_s": 0.5})
            assert slow.json()["stop_reason"] == "timeout"

            invalid = await client.post("/investigations", json={"order_id": "O-1", "max_steps": 99})
            assert invalid.status_code == 422

            # Hang up while the run waits on the carrier: the server cancels the run.
            async with anyio.create_task_group() as group:
                group.start_soon(
                    lambda: client.post("/investigations", json={"order_id": "O-777", "timeout_s": 60})
                )
                await wait_for_run(client, "state", "act")
                group.cancel_scope.cancel()
            await wait_for_run(client, "stop_reason", "cancelled")

            scrape = (await client.get("/metrics")).text
        for stop_reason in ("completed", "timeout", "cancelled"):
            series = f'loop="fastapi_investigation",stop_reason="{stop_reason}",version=""'
            assert f"boundloop_runs_total{{{series}}} 1.0" in scrape


@pytest.mark.asyncio_only  # starlette's test transport: one event loop is enough
async def test_ai_sdk_chat() -> None:
    """examples/ai_sdk_chat.py: useChat's POST at /chat/ runs the chat as a UI message stream;
    the refund waits for a person, and the approval sent back (as useChat sends it) completes
    the same assistant message; offline, its default app answers with the simulated model."""
    example = load("ai_sdk_chat")
    read = {"type": "tool_use", "id": "toolu_r", "name": "read_order", "input": {"order_id": "O-104"}}
    pay = {
        "type": "tool_use",
        "id": "toolu_p",
        "name": "issue_refund",
        "input": {"order_id": "O-104", "amount": 189},
    }
    client = ScriptedClient(
        [
            {"stop_reason": "tool_use", "content": [{"type": "text", "text": "Reading the order."}, read]},
            {"stop_reason": "tool_use", "content": [pay]},
            {"stop_reason": "end_turn", "content": [{"type": "text", "text": "O-104 is refunded."}]},
        ]
    )
    asked = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Refund O-104"}]}

    def stream_of(text: str) -> list[dict[str, Any]]:
        frames = [frame for frame in text.split("\n\n") if frame]
        assert frames[-1] == "data: [DONE]"
        return [json.loads(frame.removeprefix("data: ")) for frame in frames[:-1]]

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=example.create_app(client)), base_url="http://chat"
    ) as http:
        first = stream_of((await http.post("/chat/", json={"id": "chat-1", "messages": [asked]})).text)
        assert {"type": "tool-approval-request", "approvalId": "toolu_p", "toolCallId": "toolu_p"} in first
        approved = {"type": "tool-issue_refund", "toolCallId": "toolu_p", "state": "approval-responded"}
        answer = {
            "id": "chat-1/1",
            "role": "assistant",
            "parts": [{**approved, "approval": {"id": "toolu_p", "approved": True}}],
        }
        done = stream_of((await http.post("/chat/", json={"id": "chat-1", "messages": [asked, answer]})).text)
    assert done[1]["type"] == "tool-output-available"
    assert done[1]["output"].startswith("refunded 189.00 for O-104")
    assert done[-1]["messageMetadata"] == {"taskId": "chat-1/1", "stopReason": "completed"}

    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=example.app), base_url="http://chat"
    ) as http:
        offline = stream_of((await http.post("/chat/", json={"id": "chat-2", "messages": [asked]})).text)
    assert offline[0] == {"type": "start", "messageId": "chat-2/1"}
    assert offline[-1]["type"] == "finish"


def test_the_dbos_example_runs_two_workers_fed_by_a_queue(postgres_dsn: str) -> None:
    """`examples/dbos_workers.py --dsn ...` starts two workers; four queued runs each report their worker."""
    ran = run_example("dbos_workers.py", "--dsn", postgres_dsn, timeout=120)
    assert ran.returncode == 0, ran.stderr
    runs = re.findall(r"^(O-\d+): run by (worker-[12]): (.*)$", ran.stdout, re.MULTILINE)
    assert [order for order, _, _ in runs] == ["O-101", "O-102", "O-103", "O-104"]
    assert [answer for _, _, answer in runs][2] == "O-103: refund"


def test_the_dbos_example_says_it_needs_a_database() -> None:
    """Without `--dsn` or BOUNDLOOP_DBOS_DSN, the example says so in one sentence and exits 2."""
    env = {key: value for key, value in ENV.items() if key != "BOUNDLOOP_DBOS_DSN"}
    ran = run_example("dbos_workers.py", env=env)
    assert ran.returncode == 2
    assert ran.stdout == ""
    assert ran.stderr.strip().endswith("or set BOUNDLOOP_DBOS_DSN.")
    assert ran.stderr.count("\n") == 1
