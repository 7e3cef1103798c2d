"""The package as its users get it: typed for their checkers, and a wheel with its data files.

The user's program lives in a directory of its own, outside the repository, and is checked with
the virtualenv's mypy (`--strict`) and pyright (strict), as after the README's
`pip install -e '.[dev]'`: an editable install the checkers cannot follow (setuptools' import
hook) shows as "Cannot find implementation or library stub" and an untyped `@tool`.
"""

from __future__ import annotations

import email
import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "boundloop"

USER_PROGRAM = '''\
"""A user's program: a loop with two tools, one reading the run's deps, run on a scripted model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import assert_type

import anyio

from boundloop import (
    AgentLoop, Budget, LoopResult, Observers, ScriptedClient, StopReason, Tool, ToolContext, tool,
)


@dataclass
class Shop:
    user: str


@tool
async def read_order(order_id: str) -> dict[str, str]:
    """Read one order by id."""
    return {"id": order_id, "status": "delivered"}


@tool
def whoami(ctx: ToolContext[Shop]) -> str:
    """Name the user."""
    assert_type(ctx.deps, Shop)
    return ctx.deps.user


async def main() -> str | None:
    no_input: dict[str, str] = {}
    client = ScriptedClient(
        [
            {"stop_reason": "tool_use", "content": [
                {"type": "tool_use", "name": "read_order", "input": {"order_id": "O-104"}},
                {"type": "tool_use", "name": "whoami", "input": no_input},
            ]},
            {"stop_reason": "end_turn", "content": [{"type": "text", "text": "refund it"}]},
        ]
    )
    loop: AgentLoop[str, Shop] = AgentLoop(
        client, model="claude-sonnet-4-6", tools=[read_order, whoami], budget=Budget(max_steps=4),
        observers=Observers(metrics=None),
    )
    result = await loop.run("Decide whether order O-104 can be refunded.", deps=Shop(user="ann"))
    assert_type(await read_order("O-1"), dict[str, str])
    tools: list[Tool] = [read_order, whoami]
    assert_type(result, LoopResult)
    assert_type(result.stop_reason, StopReason)
    assert_type(result.answer, str | None)
    return result.answer if len(tools) == 2 else None


if __name__ == "__main__":
    print(anyio.run(main))
'''

MISTAKE = '''\
"""A user's mistake: the checkers must see boundloop's types to catch it."""

from __future__ import annotations

from boundloop import LoopResult


def words(result: LoopResult) -> int:
    return result.answer + 1
'''


@pytest.fixture(scope="module")
def user_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory outside the repository with the user's program and one mistake in it."""
    directory = tmp_path_factory.mktemp("user")
    (directory / "app.py").write_text(USER_PROGRAM, encoding="utf-8")
    (directory / "mistake.py").write_text(MISTAKE, encoding="utf-8")
    return directory


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def test_the_users_program_runs(user_dir: Path) -> None:
    """The program the checkers read is a real one: it runs, outside the repository."""
    ran = run([sys.executable, "app.py"], user_dir)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout == "refund it\n"


def test_mypy_strict_sees_boundloops_types(user_dir: Path) -> None:
    """mypy --strict, run where the user works, finds boundloop typed: nothing in the program,
    and the mistake (`str | None` plus one) caught."""
    # A cache of its own, kept between runs: a cold check of the Anthropic SDK takes seconds.
    cache = ROOT / ".mypy_cache" / "user-program"
    command = [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache), "--no-error-summary"]
    checked = run([*command, "app.py", "mistake.py"], user_dir)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    lines = checked.stdout.splitlines()
    assert 'mistake.py:9: error: Unsupported operand types for + ("None" and "int")  [operator]' in lines
    assert all(line.startswith("mistake.py:9: ") for line in lines), checked.stdout


def test_pyright_strict_sees_boundloops_types(user_dir: Path) -> None:
    """pyright in strict mode, on the virtualenv's interpreter, finds nothing unknown in the
    program, and catches the mistake."""
    (user_dir / "pyrightconfig.json").write_text('{"typeCheckingMode": "strict"}', encoding="utf-8")
    command = [sys.executable, "-m", "pyright", "--pythonpath", sys.executable, "--outputjson"]
    checked = run([*command, "app.py", "mistake.py"], user_dir)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    report = json.loads(checked.stdout)
    found = [
        (Path(d["file"]).name, d["range"]["start"]["line"] + 1, d["message"].splitlines()[0])
        for d in report["generalDiagnostics"]
    ]
    assert {(name, line) for name, line, _ in found} == {("mistake.py", 9)}, found
    assert ("mistake.py", 9, 'Operator "+" not supported for types "str | None" and "Literal[1]"') in found


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    """The wheel built from this tree (hatchling is a dev dependency: no isolated build env)."""
    out = tmp_path_factory.mktemp("wheel")
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w"]
    built = run([*command, str(out), str(ROOT)], ROOT)
    assert built.returncode == 0, built.stdout + built.stderr
    [path] = out.glob("boundloop-*.whl")
    return zipfile.ZipFile(path)


def test_the_wheel_carries_every_data_file(wheel: zipfile.ZipFile) -> None:
    """py.typed, the JSON schemas the code reads, and any other file under boundloop/ that is not
    Python, are in the wheel; no bytecode or test is."""
    names = set(wheel.namelist())
    data = {
        path.relative_to(ROOT).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    }
    assert {
        "boundloop/py.typed",
        "boundloop/contract/loop-contract.schema.json",
        "boundloop/contract/loop-policy.schema.json",
        "boundloop/evals/fixture.schema.json",
    } <= data
    assert data <= names
    modules = {path.relative_to(ROOT).as_posix() for path in PACKAGE.rglob("*.py")}
    assert modules <= names
    assert not [name for name in names if name.endswith(".pyc") or name.startswith("tests/")]


def test_the_wheel_has_the_command_and_the_license(wheel: zipfile.ZipFile) -> None:
    """The `boundloop` console script, the MIT license expression and the LICENSE file."""
    info = "boundloop-0.1.0.dist-info"
    entry_points = wheel.read(f"{info}/entry_points.txt").decode()
    assert "[console_scripts]\nboundloop = boundloop.cli:console" in entry_points
    metadata = email.message_from_bytes(wheel.read(f"{info}/METADATA"))
    assert metadata["License-Expression"] == "MIT"
    assert metadata["License-File"] == "LICENSE"
    assert wheel.read(f"{info}/licenses/LICENSE") == (ROOT / "LICENSE").read_bytes()
    extras = set(metadata.get_all("Provides-Extra") or [])
    assert "dev" in extras


def test_the_license_is_the_mit_text_of_the_authors() -> None:
    """LICENSE is the standard MIT text, matching pyproject's `license = "MIT"`."""
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.startswith("MIT License\n\nCopyright (c) 2026 the boundloop authors\n")
    assert (
        textwrap.dedent("""\
        THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
        IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,""")
        in text
    )
