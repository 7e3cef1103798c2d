"""`boundloop ready CONTRACT [--module loop.py]`: check, compile, lint and type-check, one exit code.

The steps a contract goes through before it ships, in order: `check` (schemas and the loop's
rules), `compile` (the module that builds the loop, written to a temporary folder), `lint`
(the anti-patterns of hand-written loops) and a strict type check (`mypy --strict`) of the
module: the one `--module` names (the application's own, built from the contract or not), or
else the compiled one. Every step runs and prints one line; the exit code is 0 only when all
passed.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

from ..contract import compile_module, lint_paths, load_contract
from ._contract import contract_problems
from ._errors import EXIT_NOT_COMPLETED, EXIT_OK, CommandError, existing_file


def ready_command(args: argparse.Namespace) -> int:
    """Check, compile, lint and strictly type-check a contract's loop module.

    Args:
        args: the parsed arguments of `boundloop ready`.

    Returns:
        0 when every step passed, 1 when one failed (each step's findings printed).

    Raises:
        CommandError: the contract, the --policy file or the --module is missing, or mypy is
            not installed.
    """
    contract = existing_file(args.contract, "contract file")
    policy = None if args.policy is None else existing_file(args.policy, "policy file")
    given = None if args.module is None else existing_file(args.module, "module")
    if importlib.util.find_spec("mypy") is None:
        raise CommandError("ready type-checks the module with mypy --strict: pip install mypy")
    failed: list[str] = []
    problems = contract_problems(contract, policy, allow_outside=args.allow_outside)
    _step("check", [f"{contract}: {problem}" for problem in problems], failed)
    with tempfile.TemporaryDirectory(prefix="boundloop-ready-") as folder:
        compiled: Path | None = None
        if not problems:
            loaded = load_contract(contract, policy=policy, allow_outside=args.allow_outside)
            compiled = Path(folder) / "compiled_loop.py"
            compiled.write_text(compile_module(loaded, source=str(contract)), encoding="utf-8")
            _step("compile", [], failed)
        else:
            _step("compile", ["not compiled: the contract breaks a rule"], failed)
        module = given if given is not None else compiled
        if module is None:
            _step("lint", ["no module to lint"], failed)
            _step("types", ["no module to type-check"], failed)
        else:
            _step("lint", [str(finding) for finding in lint_paths([str(module)])], failed)
            _step("types", _mypy(module), failed)
    if failed:
        print(f"not ready: {', '.join(failed)} failed", file=sys.stderr)
        return EXIT_NOT_COMPLETED
    print(f"{contract}: ready")
    return EXIT_OK


def _step(name: str, findings: list[str], failed: list[str]) -> None:
    """Print a step's line (and its findings under it); note it when it failed."""
    if findings:
        failed.append(name)
        print(f"{name}: FAILED")
        for finding in findings:
            print(f"  {finding}")
    else:
        print(f"{name}: ok")


def _mypy(module: Path) -> list[str]:
    """`mypy --strict` on the module: its error lines (none when it passes)."""
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--", str(module)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode == 0:
        return []
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
    return lines or [f"mypy exited {done.returncode}"]
