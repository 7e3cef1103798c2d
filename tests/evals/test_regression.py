"""`boundloop eval --loop module:factory`: cases through the application's own loop, and the seed's
"replay production failures into regression evals" end to end (examples/regression)."""

from __future__ import annotations

import json
import runpy
from pathlib import Path
from typing import Any

import anyio
import pytest

from boundloop import AgentLoop, Budget, Observers, Policy, Price, ScriptedClient, tool
from boundloop.cli import main
from boundloop.evals import parse_case, run_case
from tests.evals.test_live import SEED
from tests.sim_model import SimulatedModel, shipping_policy

APP_DIR = Path(__file__).resolve().parents[2] / "examples" / "regression"


def test_a_production_failure_exported_fails_on_the_old_loop_and_passes_on_the_fixed_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The old loop issued a refund in production; the run, exported and its expectation
    tightened, fails through the old loop and passes through the fixed one (exit 1, then 0);
    without --loop it runs on its own copy of the old configuration, and fails too."""
    app = runpy.run_path(str(APP_DIR / "refunds_app.py"))
    store = tmp_path / "runs.db"
    anyio.run(app["main"], str(store))
    assert main(["eval", "--export", "refund-O-104", "--store", str(store)]) == 0
    case = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert case["expected"]["tool_sequence"] == ["read_order", "issue_refund"]
    case["expected"] = {"stop_reason": "policy_blocked", "forbidden_tools": ["issue_refund"]}
    path = tmp_path / "case.json"
    path.write_text(json.dumps(case), encoding="utf-8")

    old = ["eval", str(path), "--loop", "refunds_app:build_old_loop", "--app-dir", str(APP_DIR)]
    assert main(old) == 1
    assert "FAIL  refund-O-104  completed" in capsys.readouterr().out
    fixed = ["eval", str(path), "--loop", "refunds_app:build_loop", "--app-dir", str(APP_DIR)]
    assert main(fixed) == 0
    assert "PASS  refund-O-104  policy_blocked" in capsys.readouterr().out
    assert main(["eval", str(path)]) == 1  # the exported copy of the old configuration


def test_a_bad_loop_spec_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "case.json"
    path.write_text(
        json.dumps(
            {"case_id": "c", "goal": "g", "model": [{"text": "ok"}], "expected": {"stop_reason": "completed"}}
        ),
        encoding="utf-8",
    )
    assert main(["eval", str(path), "--loop", "refunds_app:no_such", "--app-dir", str(APP_DIR)]) == 2
    assert "no_such" in capsys.readouterr().err


LOOKUPS: list[str] = []


@tool
async def lookup(key: str) -> str:
    """The application's own lookup (the fixture does not mock it)."""
    LOOKUPS.append(key)
    return f"value of {key}"


@tool
async def charge(amount: float) -> str:
    """A payment the fixture mocks."""
    raise AssertionError("the application's charge never runs in an eval: the fixture mocks it")


@tool(name="shipping__read_delivery_status")
async def read_delivery_status(order_id: str) -> str:
    """The app's delivery lookup (the fixture mocks it)."""
    raise AssertionError("the fixture mocks it")


def app_loop() -> AgentLoop[Any]:
    return AgentLoop(
        ScriptedClient([]),
        model="claude-sonnet-4-6",
        tools=[lookup, charge],
        budget=Budget(max_steps=4),
        policy=Policy(required_evidence={"lookup"}),
        system="The application's prompt.",
        observers=Observers(metrics=None),
        version="app-7",
    )


async def test_the_app_loop_keeps_its_own_tools_policy_and_version_and_takes_the_mocks_and_script() -> None:
    """The script replaces the model, the mock replaces `charge`, `lookup` runs as the app wrote
    it, and the app's policy (required evidence) and version hold, not the fixture's."""
    LOOKUPS.clear()
    case = parse_case(
        {
            "case_id": "through_the_app",
            "goal": "Charge for item a.",
            "model": [
                {
                    "tool_calls": [
                        {"name": "lookup", "input": {"key": "a"}},
                        {"name": "charge", "input": {"amount": 3}},
                    ]
                },
                {"text": "Charged."},
            ],
            "mocked_tools": {"charge": [{"status": "ok", "output": "charged 3"}]},
            "policy": {"forbidden": ["lookup"]},  # the fixture's policy is not the app's: unused
            "expected": {"stop_reason": "completed", "tool_sequence": ["lookup", "charge"]},
        }
    )
    result = await run_case(case, app=app_loop())
    result.check()
    assert LOOKUPS == ["a"]  # once: the replay answers from the record
    assert result.trace[0].kind == "run_started"
    assert getattr(result.trace[0], "version", None) == "app-7"


async def test_a_live_case_through_the_app_runs_on_the_client_given() -> None:
    """With `app` and a live client, the live case runs on that client; without a client it is skipped."""
    shipping = AgentLoop(
        ScriptedClient([]),
        model="claude-sonnet-4-6",
        tools=[read_delivery_status],
        budget=Budget(max_steps=5),
        observers=Observers(metrics=None),
    )
    skipped = await run_case(SEED, app=shipping)
    assert skipped.status == "skipped"
    result = await run_case(SEED, app=shipping, client=SimulatedModel(shipping_policy()).client())
    assert result.stop_reason is not None
    assert str(result.stop_reason) == "needs_human"


async def test_a_case_through_the_application_keeps_its_price() -> None:
    """A model the application prices itself (not in boundloop's table) keeps its price through
    `--loop`: the case's cost is what the application's loop would bill."""
    app = AgentLoop(
        ScriptedClient([]),
        model="in-house-model-1",
        budget=Budget(max_steps=4),
        prices={"in-house-model-1": Price(input_per_mtok=1_000_000.0, output_per_mtok=0.0)},
    )
    case = parse_case(
        {
            "case_id": "c",
            "goal": "g",
            "model": [{"text": "ok", "usage": {"input_tokens": 3, "output_tokens": 1}}],
            "expected": {"stop_reason": "completed"},
        }
    )
    result = await run_case(case, app=app)
    assert result.passed, result
    assert result.cost_usd == pytest.approx(3.0)  # 3 input tokens at a dollar each
