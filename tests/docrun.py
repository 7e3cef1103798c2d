"""Run the python blocks of a guide as scripts and hold them to what they say they print."""

from __future__ import annotations

import re
import runpy
from pathlib import Path

import pytest

PROMISE = re.compile(r"^ *print\(.*\)  # (.*)$", flags=re.MULTILINE)
"""`print(...)  # what it prints`: a block's promise, one per printed line."""


def python_blocks(markdown: str) -> list[str]:
    """The ```python blocks of a markdown text, in order."""
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.DOTALL)


def runs_as_promised(source: str, script: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Run `source` as the script `script`: it prints what its comments promise (one line at least)."""
    script.write_text(source, encoding="utf-8")
    runpy.run_path(str(script), run_name="__main__")
    promised = PROMISE.findall(source)
    assert promised
    assert capsys.readouterr().out.splitlines() == promised
