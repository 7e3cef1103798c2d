"""The README's code runs as written, and its quick start names the commands CI uses."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import anyio
import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)


@pytest.mark.parametrize("index", range(len(python_blocks())))
def test_readme_python_block_runs(index: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each python block of the README runs to completion as a script; the embedding one answers."""
    source = python_blocks()[index]
    script = tmp_path / f"readme_{index}.py"
    script.write_text(source, encoding="utf-8")
    namespace = runpy.run_path(str(script), run_name="__main__")
    if "load_cases" in source:  # the eval block: its test passes on every shipped case
        cases = namespace["load_cases"](ROOT / "examples" / "evals")
        assert len(cases) >= 13
        for case in cases:
            anyio.run(namespace["test_eval"], case)
    elif "resume(" in source:
        assert "completed Refunded O-104." in capsys.readouterr().out
    elif "loop.run" in source:
        assert "evidence is sufficient" in capsys.readouterr().out
    else:  # the FastAPI block: the app serves /metrics
        routes = namespace["app"].routes
        assert "/metrics" in [getattr(route, "path", None) for route in routes]


def test_quick_start_is_the_demo_and_the_ci_test_command() -> None:
    """The quick start runs `boundloop demo` and `bash scripts/test`, which `.ci/run` calls too."""
    quick_start = README.split("## Quick start", 1)[1].split("##", 1)[0]
    assert "boundloop demo" in quick_start
    assert "bash scripts/test" in quick_start
    assert "bash scripts/test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")
