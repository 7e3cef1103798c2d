"""The pytest helper works in a user's project: the eval test of the README and of
docs/evals.md, copied into a fresh directory outside the repository (no conftest, no pytest
configuration of ours), passes under a plain `pytest` that sees only the boundloop package, and
fails when a case's expectation is broken."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from boundloop.evals import load_cases

ROOT = Path(__file__).resolve().parent.parent.parent
SHIPPED = ROOT / "examples" / "evals"


def eval_block(markdown: Path) -> str:
    """The python block of `markdown` that runs a folder of cases under pytest."""
    blocks = re.findall(r"```python\n(.*?)```", markdown.read_text(encoding="utf-8"), flags=re.DOTALL)
    found = [block for block in blocks if "load_cases(" in block and "def test_" in block]
    assert len(found) == 1, f"{markdown.name}: one pytest eval block, found {len(found)}"
    return str(found[0])


def cases_folder(block: str) -> str:
    """The folder the block passes to `load_cases`, relative to where pytest runs."""
    match = re.search(r'load_cases\("([^"]+)"\)', block)
    assert match is not None
    return match.group(1)


def user_project(tmp_path: Path, block: str) -> Path:
    """A fresh project: the test file, the shipped cases where it looks for them, nothing else;
    beside it a folder holding only the boundloop package (what `pip install boundloop` gives)
    and a `trio` that cannot be imported (a plain install has only asyncio)."""
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_evals.py").write_text(block, encoding="utf-8")
    shutil.copytree(SHIPPED, project / cases_folder(block))
    site = tmp_path / "site"
    (site / "trio").mkdir(parents=True)
    (site / "trio" / "__init__.py").write_text(
        'raise ImportError("trio is not installed")\n', encoding="utf-8"
    )
    (site / "boundloop").symlink_to(ROOT / "boundloop", target_is_directory=True)
    return project


PLUGINS_OFF = ("-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:pytest_cov")


def run_pytest(project: Path) -> subprocess.CompletedProcess[str]:
    """`pytest` in `project` with a clean environment: no API key, no PYTHONPATH but the
    package, no pytest plugin but anyio's (the development tools' hypothesis and coverage
    plugins are switched off: a plain install does not have them)."""
    env = {
        "PATH": os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin",
        "PYTHONPATH": str(project.parent / "site"),
        "HOME": str(project.parent),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-W", "error", *PLUGINS_OFF],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("markdown", ["README.md", "docs/evals.md"])
def test_the_eval_snippet_passes_in_a_fresh_project(markdown: str, tmp_path: Path) -> None:
    """Every shipped scripted case passes, each live case is skipped, on asyncio alone."""
    block = eval_block(ROOT / markdown)
    project = user_project(tmp_path, block)
    done = run_pytest(project)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    cases = load_cases(SHIPPED)
    live = sum(case.live for case in cases)
    assert live >= 1
    assert f"{len(cases) - live} passed, {live} skipped" in output, output
    assert "a live case: boundloop eval --live" in output
    assert "trio" not in done.stdout.replace("trio is not installed", "")


def test_the_eval_snippet_fails_on_a_broken_expectation(tmp_path: Path) -> None:
    """A case whose expected stop reason is wrong fails the user's test with the mismatch."""
    block = eval_block(ROOT / "docs" / "evals.md")
    project = user_project(tmp_path, block)
    folder = project / cases_folder(block)
    for path in folder.glob("*.json"):
        if path.name != "completes_within_budget.json":
            path.unlink()
    case = folder / "completes_within_budget.json"
    data = json.loads(case.read_text(encoding="utf-8"))
    assert data["expected"]["stop_reason"] == "completed"
    data["expected"]["stop_reason"] = "needs_human"
    case.write_text(json.dumps(data), encoding="utf-8")
    done = run_pytest(project)
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    assert "1 failed" in output
    assert "AssertionError" in output
    assert "needs_human" in output
