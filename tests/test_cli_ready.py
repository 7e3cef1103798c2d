"""`boundloop ready CONTRACT [--module FILE]`: check, compile, lint and mypy --strict, one exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from boundloop.cli import main

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "contracts"
CONTRACT = str(EXAMPLES / "refund_investigation.json")
HAND_WRITTEN = """\
from typing import Any


async def loop(client: Any) -> None:
    messages: list[dict[str, Any]] = []
    while True:
        response = await client.messages.create(messages=messages)
        if "DONE" in response.content[0].text:
            break


count: int = "three"
"""


@pytest.fixture(autouse=True)
def shared_mypy_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """One mypy cache for these tests (a cold mypy run on boundloop takes many seconds)."""
    monkeypatch.setenv("MYPY_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "mypy-cache"))


def test_the_shipped_contract_is_ready(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ready", CONTRACT]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == ["check: ok", "compile: ok", "lint: ok", "types: ok", f"{CONTRACT}: ready"]


def test_a_given_module_that_lints_dirty_and_fails_mypy_is_not_ready(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every step runs; the findings of lint and mypy are printed under their lines; exit 1."""
    module = tmp_path / "my_loop.py"
    module.write_text(HAND_WRITTEN, encoding="utf-8")
    assert main(["ready", CONTRACT, "--module", str(module)]) == 1
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[:3] == ["check: ok", "compile: ok", "lint: FAILED"]
    assert any("BL002 unbounded-loop" in line for line in lines)
    assert "types: FAILED" in lines
    assert any(
        'Incompatible types in assignment (expression has type "str", variable has type "int")' in line
        for line in lines
    )
    assert "not ready: lint, types failed" in captured.err


def test_a_contract_that_breaks_a_rule_is_not_ready(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    contract = json.loads(Path(CONTRACT).read_text(encoding="utf-8"))
    contract["system"] = {"file": str(EXAMPLES / "refund-system.md")}
    contract["policy"] = str(EXAMPLES / "refund-policy.json")
    del contract["budget"]["max_steps"]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(contract), encoding="utf-8")
    assert main(["ready", str(broken), "--allow-outside"]) == 1
    out = capsys.readouterr().out
    assert "check: FAILED" in out
    assert "max_steps" in out
    assert "compile: FAILED" in out


def test_a_missing_module_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ready", CONTRACT, "--module", "no/such/loop.py"]) == 2
    assert "no/such/loop.py: no such module" in capsys.readouterr().err
