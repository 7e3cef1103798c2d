"""`boundloop eval --live`: the CLI's own AsyncAnthropic, pointed at the simulated model served on
127.0.0.1 through ANTHROPIC_BASE_URL (no network, no key)."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

import pytest

from boundloop.cli import main
from tests.sim_model import SimulatedModel, shipping_policy

EVALS = Path(__file__).resolve().parents[2] / "examples" / "evals"
SEED_CASE = str(EVALS / "shipping_lookup_repeated_failure.json")


def test_the_seed_fixture_runs_live_with_rates(
    served: SimulatedModel, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 0: every trial stops needs_human; the rates with intervals on the terminal, in the
    JSON, in JUnit (system-out) and in the HTML page (which parses)."""
    report, junit, page = tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "r.html"
    argv = [
        "eval", SEED_CASE, "--live", "--model", "claude-sonnet-4-6", "--trials", "3",
        "--concurrency", "2", "--json", str(report), "--junit", str(junit), "--html", str(page),
    ]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "PASS  shipping_lookup_repeated_failure  3/3 trials passed (needs_human x3)" in out
    assert "correct stop reason   100% (3/3, 95% CI 44%-100%)" in out
    assert "live trials cost $0.0036 (no cost ceiling)" in out
    assert len(served.requests) == 6
    assert {request["model"] for request in served.requests} == {"claude-sonnet-4-6"}
    live = json.loads(report.read_text())["live"]
    assert live["cases"][0]["rates"]["correct_stop"]["count"] == 3
    assert live["rates"]["escalation_recall"]["ci95"] == [pytest.approx(0.4385, abs=1e-4), 1.0]
    assert [trial["stop_reason"] for trial in live["cases"][0]["trials"]] == ["needs_human"] * 3
    testcase = ElementTree.parse(junit).getroot().find("testcase[@name='shipping_lookup_repeated_failure']")
    assert testcase is not None
    assert testcase.find("failure") is None
    assert "escalation precision: 100% (3/3" in (testcase.findtext("system-out") or "")
    HTMLParser().feed(page.read_text())
    assert page.read_text().count('class="trial trial-passed"') == 3


def test_without_live_the_case_is_skipped_unless_required(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", SEED_CASE]) == 0
    assert "SKIP  shipping_lookup_repeated_failure  -" in capsys.readouterr().out
    assert main(["eval", SEED_CASE, "--require-live"]) == 1
    assert "--require-live: 1 live case(s) did not run" in capsys.readouterr().err


def test_a_case_below_the_minimum_pass_rate_fails_in_junit(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model that guesses half the time: exit 1 at the default minimum (every trial), FLAKY on
    the line, a JUnit failure; exit 0 at --min-pass-rate 0.1."""
    sim = SimulatedModel(shipping_policy(guess=1), seed=5)
    with sim.serve() as url:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-simulated")
        junit = tmp_path / "r.xml"
        assert main(["eval", SEED_CASE, "--live", "--trials", "6", "--junit", str(junit)]) == 1
        out = capsys.readouterr().out
        assert "FAIL  shipping_lookup_repeated_failure" in out
        assert "FLAKY  stop_reason: expected needs_human, got completed" in out
        failure = ElementTree.parse(junit).getroot().find("testcase/failure")
        assert failure is not None
        assert "below the minimum pass rate 100%" in (failure.get("message") or "")
        assert main(["eval", SEED_CASE, "--live", "--trials", "6", "--min-pass-rate", "0.1"]) == 0


def test_the_cost_ceiling_is_said(served: SimulatedModel, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["eval", SEED_CASE, "--live", "--concurrency", "1", "--max-cost-usd", "0.002"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "cost ceiling $0.0020 reached: spent $0.0024, 3 trial(s) not started" in out
    assert "2/2 trials passed (needs_human x2), 3 not started" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--trials", "3"], "--trials only apply to live cases: add --live"),
        (["--live", "--trials", "0"], "--trials must be at least 1, got 0"),
        (["--live", "--min-pass-rate", "1.5"], "--min-pass-rate must be between 0 and 1, got 1.5"),
        (
            ["--live", "--model", "no-such-model", "--max-cost-usd", "1"],
            "no price is known for no-such-model",
        ),
    ],
)
def test_live_usage_errors_exit_2(
    argv: list[str], message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-simulated")
    assert main(["eval", SEED_CASE, *argv]) == 2
    assert message in capsys.readouterr().err


def test_live_without_a_key_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    assert main(["eval", SEED_CASE, "--live"]) == 2
    assert "set ANTHROPIC_API_KEY" in capsys.readouterr().err
