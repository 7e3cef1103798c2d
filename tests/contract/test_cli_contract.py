"""`boundloop check | compile | lint`, in-process through `main(argv)` (and `lint examples/` as
a real process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from boundloop.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "contracts" / "refund_investigation.json"


@pytest.mark.parametrize("command", ["check", "compile", "lint"])
def test_help_names_the_exit_codes(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Each command has --help with its exit codes."""
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: boundloop {command}")
    assert "exit codes:" in out


def test_check_accepts_the_example(capsys: pytest.CaptureFixture[str]) -> None:
    """The shipped contract is sound: exit 0."""
    assert main(["check", str(EXAMPLE)]) == 0
    assert capsys.readouterr().out == f"{EXAMPLE}: ok\n"


def test_check_prints_one_line_per_problem_and_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every problem on its own line, rule and field named; the count on stderr. All at once: a
    schema problem does not hide the loop's rules broken elsewhere (they were a second pass)."""
    document = json.loads(EXAMPLE.read_text())
    del document["budget"]["max_steps"]
    del document["signals"]["refusal"]
    document["policy"] = {"allowed": ["read_order"], "forbidden": ["read_order"]}
    document["system"] = {"text": "You investigate refund requests."}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(document))
    assert main(["check", str(path)]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == f"{path}: budget-required: budget: 'max_steps' is a required property"
    assert f"{path}: allowed-and-forbidden: policy/forbidden: also allowed: read_order" in lines
    assert any(
        line.startswith(f"{path}: unhandled-signal: signals: the API's stop_reason 'refusal'")
        for line in lines
    )
    assert captured.err == f"{len(lines)} problem(s)\n"


def test_check_with_a_policy_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--policy replaces the contract's policy; a missing one is a usage error."""
    policy = tmp_path / "p.json"
    policy.write_text(json.dumps({"forbidden": ["issue_refund"], "on_tool_error": "stop"}))
    assert main(["check", str(EXAMPLE), "--policy", str(policy)]) == 0
    capsys.readouterr()
    assert main(["check", str(EXAMPLE), "--policy", str(tmp_path / "none.json")]) == 2
    assert "none.json: no such policy file" in capsys.readouterr().err


def test_check_a_missing_contract_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exit 2 and one line."""
    assert main(["check", str(tmp_path / "c.json")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == f"boundloop: error: {tmp_path / 'c.json'}: no such contract file"


def test_lint_reports_the_naive_loop_and_passes_the_clean_one(capsys: pytest.CaptureFixture[str]) -> None:
    """Findings with file:line:col and a fix, exit 1; a clean loop exits 0 with no output."""
    naive = ROOT / "examples" / "lint" / "naive_loop.py"
    assert main(["lint", str(naive)]) == 1
    captured = capsys.readouterr()
    rules = {line.split(" ")[1] for line in captured.out.splitlines()}
    assert rules == {"BL001", "BL002", "BL003", "BL004", "BL005", "BL006", "BL007"}
    assert all(line.startswith(f"{naive}:") and "(fix: " in line for line in captured.out.splitlines())
    assert captured.err == "7 finding(s)\n"
    assert main(["lint", str(ROOT / "examples" / "lint" / "clean_loop.py"), str(ROOT / "boundloop")]) == 0
    assert capsys.readouterr().out == ""


def test_lint_of_the_examples_finds_only_the_naive_loop(capsys: pytest.CaptureFixture[str]) -> None:
    """`boundloop lint examples/`: every finding is in examples/lint/naive_loop.py, the loop
    written wrong on purpose to show each rule; the project's own examples are clean (the DBOS
    example's model read only the first block of a message: BL004)."""
    examples = ROOT / "examples"
    naive = examples / "lint" / "naive_loop.py"
    linted = subprocess.run(
        [sys.executable, "-m", "boundloop", "lint", "examples/"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert linted.returncode == 1, linted.stderr
    findings = linted.stdout.splitlines()
    assert findings
    assert [line for line in findings if not line.startswith("examples/lint/naive_loop.py:")] == []
    others = [str(path) for path in sorted(examples.rglob("*.py")) if path != naive]
    assert main(["lint", *others]) == 0
    assert capsys.readouterr().out == ""


def test_lint_json_and_a_missing_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--json prints the findings as objects; a missing path is a usage error."""
    source = tmp_path / "loop.py"
    source.write_text(
        'def run(text: str) -> None:\n    while "done" not in text:\n        text = model.create()\n'
    )
    assert main(["lint", str(source), "--json"]) == 1
    [finding] = json.loads(capsys.readouterr().out)
    assert (finding["rule"], finding["line"]) == ("BL001", 2)
    assert main(["lint", str(tmp_path / "nope.py")]) == 2
    assert "nope.py: no such file or folder" in capsys.readouterr().err


def test_compile_writes_the_module_and_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A sound contract: both files written, exit 0; a broken one: nothing written, exit 1."""
    module, report = tmp_path / "loop.py", tmp_path / "loop.md"
    assert main(["compile", str(EXAMPLE), "--output", str(module), "--report", str(report)]) == 0
    assert capsys.readouterr().out == f"wrote {module} and {report}\n"
    assert "def build_loop(" in module.read_text()
    assert "```mermaid" in report.read_text()
    broken = json.loads(EXAMPLE.read_text())
    del broken["budget"]
    for name in ("refund-policy.json", "refund-system.md"):  # the files it names, found beside it
        (tmp_path / name).write_text((EXAMPLE.parent / name).read_text())
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(broken))
    other = tmp_path / "other.py"
    assert main(["compile", str(path), "--output", str(other)]) == 1
    captured = capsys.readouterr()
    assert "budget-required" in captured.out
    assert "nothing compiled" in captured.err
    assert not other.exists()
    assert main(["compile", str(EXAMPLE), "--output", str(tmp_path / "no" / "loop.py")]) == 2
    assert "cannot write" in capsys.readouterr().err
