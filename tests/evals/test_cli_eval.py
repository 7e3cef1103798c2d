"""`boundloop eval`: run, check and export fixtures, in-process through `main(argv)`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import anyio
import pytest

from boundloop import SQLiteStore
from boundloop.cli import main
from boundloop.evals import build_loop, parse_case

JSON = dict[str, Any]
EVALS = Path(__file__).resolve().parents[2] / "examples" / "evals"


def case(case_id: str, **expected: Any) -> JSON:
    """A case that reads an order and answers; `expected` replaces its expectations."""
    return {
        "case_id": case_id,
        "goal": "Was order O-1 late?",
        "model": [
            {"tool_calls": [{"name": "orders.read", "input": {"order_id": "O-1"}}]},
            {"text": "O-1 was late."},
        ],
        "mocked_tools": {"orders.read": [{"status": "ok", "output": {"late_days": 2}}]},
        "expected": expected or {"stop_reason": "completed"},
    }


def write(path: Path, fixture: object) -> Path:
    path.write_text(json.dumps(fixture), encoding="utf-8")
    return path


def test_help_describes_the_command_and_its_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    """`eval --help` names the options and the exit codes."""
    assert main(["eval", "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: boundloop eval")
    for option in ("--check", "--junit", "--json", "--html", "--export", "--store", "--case"):
        assert option in out
    assert "2    a fixture is invalid" in out


def test_the_shipped_cases_pass_and_every_report_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 0; a line per case, the figures; JUnit, JSON and HTML files that parse."""
    junit, report, page = tmp_path / "r.xml", tmp_path / "r.json", tmp_path / "r.html"
    argv = ["eval", str(EVALS), "--junit", str(junit), "--json", str(report), "--html", str(page)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "PASS  shipping_lookup_repeated_failure_scripted" in out
    assert "SKIP  shipping_lookup_repeated_failure " in out  # the seed's live case: no --live
    assert "replay success" in out
    assert "100%" in out
    suite = ElementTree.parse(junit).getroot()
    assert suite.get("failures") == "0"
    assert suite.get("skipped") == "1"
    assert int(suite.get("tests") or 0) >= 13
    document = json.loads(report.read_text())
    assert document["figures"]["passed"] + document["figures"]["skipped"] == document["figures"]["cases"]
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_a_failing_case_exits_1_with_its_first_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The failed expectation is on the case's line."""
    write(tmp_path / "good.json", case("good"))
    write(tmp_path / "bad.json", case("bad", stop_reason="needs_human"))
    assert main(["eval", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "PASS  good" in out
    assert "FAIL  bad" in out
    assert "stop_reason: expected needs_human, got completed" in out


SECRET = "sk-ant-api03-AbCdEf0123456789xyzXYZ"


def reports(tmp_path: Path, fixtures: dict[str, JSON]) -> tuple[str, str, str]:
    """Run the fixtures (each failing) through `boundloop eval`: the JUnit, JSON and HTML files."""
    folder = tmp_path / "cases"
    folder.mkdir()
    for name, fixture in fixtures.items():
        write(folder / name, fixture)
    junit, report, page = tmp_path / "r.xml", tmp_path / "r.json", tmp_path / "r.html"
    argv = ["eval", str(folder), "--junit", str(junit), "--json", str(report), "--html", str(page)]
    assert main(argv) == 1
    return (
        junit.read_text(encoding="utf-8"),
        report.read_text(encoding="utf-8"),
        page.read_text(encoding="utf-8"),
    )


def test_no_report_carries_a_secret_the_model_put_in_its_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The answer goes through the loop's redaction in the JSON and HTML reports."""
    leaky = case("leaky", stop_reason="completed", answer_contains="O-1 was on time")
    leaky["model"][1] = {"text": f"O-1 was late; the key is {SECRET}"}
    junit, report, page = reports(tmp_path, {"leaky.json": leaky})
    out = capsys.readouterr().out
    assert json.loads(report)["cases"][0]["answer"] == "O-1 was late; the key is [REDACTED]"
    assert "the key is [REDACTED]" in page
    for text in (junit, report, page, out):
        assert SECRET not in text


def test_junit_parses_when_a_fixture_name_and_a_tool_input_hold_control_characters(
    tmp_path: Path,
) -> None:
    """Characters XML 1.0 forbids, from a file name and from the model's input, become U+FFFD."""
    asks = case("asks", stop_reason="completed")
    asks["policy"] = {"escalation_tool": "ask_human"}
    asks["model"] = [{"tool_calls": [{"name": "ask_human", "input": {"reason": "why \u0001\x1b?"}}]}]
    asks["mocked_tools"] = {}
    junit = reports(tmp_path, {"ctl\u0001\x1b.json": asks})[0]
    testcase = ElementTree.fromstring(junit).find("testcase")
    assert testcase is not None
    assert (testcase.get("classname") or "").endswith("ctl\ufffd\ufffd.json")
    failure = testcase.find("failure")
    assert failure is not None
    assert "the model asked for a human: why \ufffd\ufffd?" in (failure.get("message") or "")
    assert "why \ufffd\ufffd?" in (failure.text or "")


def test_case_selects_cases_and_an_unknown_one_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--case runs only the named cases; a name not in the fixtures is refused."""
    write(tmp_path / "cases.json", [case("one"), case("two", stop_reason="refused")])
    assert main(["eval", str(tmp_path), "--case", "one"]) == 0
    assert "two" not in capsys.readouterr().out
    assert main(["eval", str(tmp_path), "--case", "three"]) == 2
    assert "--case three: no such case" in capsys.readouterr().err


def test_invalid_fixtures_exit_2_with_every_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--check (or a run) lists each problem with its file and field, and exits 2."""
    broken = case("broken")
    broken["model"][0]["tool_calls"][0].pop("name")
    write(tmp_path / "broken.json", broken)
    write(tmp_path / "ok.json", case("ok"))
    for argv in (["eval", "--check", str(tmp_path)], ["eval", str(tmp_path)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert (
            f"invalid: {tmp_path / 'broken.json'}: model/0/tool_calls/0: 'name' is a required property" in err
        )
        assert "1 problem(s) in the fixtures" in err
    assert main(["eval", "--check", str(tmp_path / "ok.json")]) == 0
    assert capsys.readouterr().out == "1 case(s) valid\n"


def test_a_fixture_error_found_while_running_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A script too short passes --check but is the fixture's fault when it runs."""
    short = case("short")
    short["model"] = short["model"][:1]
    write(tmp_path / "short.json", short)
    assert main(["eval", str(tmp_path)]) == 2
    assert "ERROR short" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["eval"], "give the fixture files or folders to run", id="no-path"),
        pytest.param(["eval", "x.json", "--concurrency", "0"], "--concurrency must be at least 1", id="zero"),
        pytest.param(["eval", "--export", "t1"], "--export needs --store PATH", id="export-no-store"),
    ],
)
def test_usage_errors_are_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Bad arguments: exit 2 and one line on stderr."""
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("boundloop: error: ")
    assert message in err
    assert "\n" not in err


def test_an_unwritable_report_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A report path in a missing folder is refused with the path named."""
    write(tmp_path / "ok.json", case("ok"))
    target = tmp_path / "missing" / "r.xml"
    assert main(["eval", str(tmp_path / "ok.json"), "--junit", str(target)]) == 2
    assert f"cannot write {target}" in capsys.readouterr().err


def test_export_turns_a_stored_run_into_a_case_that_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """From production to regression: a stored run, exported, runs green as a new case."""
    store = tmp_path / "runs.db"

    async def record() -> None:
        fixture = parse_case(case("live"))
        loop = build_loop(fixture).with_store(SQLiteStore(store))
        await loop.run(fixture.goal, task_id="task-42")

    anyio.run(record)
    assert main(["eval", "--export", "task-42", "--store", str(store)]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported["expected"]["stop_reason"] == "completed"
    write(tmp_path / "exported.json", exported)
    assert main(["eval", str(tmp_path / "exported.json")]) == 0
    assert main(["eval", "--export", "nope", "--store", str(store)]) == 2
    assert "task 'nope' is not in" in capsys.readouterr().err
