"""`boundloop lint` on a hostile tree: one line per file, never a hang, never an unbounded read.

Each test runs the CLI in a subprocess with a timeout, so a lint that hangs fails the test instead
of hanging the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from boundloop.contract import lint_paths
from boundloop.contract._lint import MAX_FILE_BYTES

ROOT = Path(__file__).resolve().parents[2]
_MAIN = "import sys; from boundloop.cli import main; sys.exit(main(sys.argv[1:]))"
SOUND = 'result = {"type": "tool_result", "content": "ok"}\n'  # one BL006 finding


def lint(*paths: Path) -> list[str]:
    """`boundloop lint PATH...` in a fresh interpreter, given 60 s: its stdout lines."""
    done = subprocess.run(
        [sys.executable, "-c", _MAIN, "lint", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=False,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1, done.stderr
    return done.stdout.splitlines()


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_named_like_python_is_one_line_not_a_hang(tmp_path: Path) -> None:
    """Opening a FIFO for reading waits for a writer that never comes: it is not opened, found
    under a folder or named."""
    (tmp_path / "tree").mkdir()
    os.mkfifo(tmp_path / "tree" / "x.py")
    (tmp_path / "tree" / "ok.py").write_text(SOUND, encoding="utf-8")
    os.mkfifo(tmp_path / "named.py")
    lines = lint(tmp_path / "tree", tmp_path / "named.py")
    assert [line.split(" (fix: ")[0] for line in lines] == [
        f"{tmp_path / 'named.py'}:1:1: BL000 syntax-error: not read: not a regular file",
        f"{tmp_path / 'tree' / 'ok.py'}:1:10: BL006 tool-result-without-id: "
        "a tool_result without tool_use_id: the API cannot pair it with its call",
        f"{tmp_path / 'tree' / 'x.py'}:1:1: BL000 syntax-error: not read: not a regular file",
    ]


def test_a_symlink_to_dev_zero_is_one_line_not_an_endless_read(tmp_path: Path) -> None:
    """Found under a folder it leads out of it; named, it is not a regular file: neither is read."""
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "zero.py").symlink_to("/dev/zero")
    (tmp_path / "named.py").symlink_to("/dev/zero")
    lines = lint(tmp_path / "tree", tmp_path / "named.py")
    assert [line.split(" (fix: ")[0] for line in lines] == [
        f"{tmp_path / 'named.py'}:1:1: BL000 syntax-error: not read: not a regular file",
        f"{tmp_path / 'tree' / 'zero.py'}:1:1: BL000 syntax-error: "
        "not read: a symlink that leads out of the folder (lint its target by name)",
    ]


def test_100000_nested_nots_are_one_line_not_a_memory_error(tmp_path: Path) -> None:
    """The parser gives up with MemoryError on such nesting: caught like a SyntaxError."""
    (tmp_path / "deep.py").write_text("x = " + "not " * 100_000 + "y\n", encoding="utf-8")
    (line,) = lint(tmp_path)
    assert line.startswith(
        f"{tmp_path / 'deep.py'}:1:1: BL000 syntax-error: cannot parse: the code is nested too deeply"
    )


def test_a_file_over_the_cap_is_not_read(tmp_path: Path) -> None:
    """At most the cap plus one byte is read: a larger file is one line, whatever follows the cap."""
    big = tmp_path / "big.py"
    big.write_bytes(b"#" * MAX_FILE_BYTES + b"\nresult = {'type': 'tool_result'}\n")
    (finding,) = lint_paths([tmp_path])
    assert (finding.rule, finding.message) == ("BL000", "not read: larger than 2 MiB")
    big.write_bytes(b"#" * (MAX_FILE_BYTES - 1) + b"\n")
    assert lint_paths([tmp_path]) == []


def test_a_symlink_inside_the_folder_is_linted(tmp_path: Path) -> None:
    (tmp_path / "real.txt").write_text(SOUND, encoding="utf-8")
    (tmp_path / "link.py").symlink_to(tmp_path / "real.txt")
    assert [(Path(f.path).name, f.rule) for f in lint_paths([tmp_path])] == [("link.py", "BL006")]
