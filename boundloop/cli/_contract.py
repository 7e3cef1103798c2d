"""`boundloop check | compile | lint`: loop contracts checked and compiled; hand-written loops linted."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from ..contract import Problem, check_contract, compile_module, compile_report, lint_paths, load_contract
from ._errors import EXIT_NOT_COMPLETED, EXIT_OK, CommandError, existing_file


def contract_problems(contract: Path, policy: Path | None, *, allow_outside: bool) -> list[Problem]:
    """The contract's problems (`check` and `ready`); a file that cannot be read or is not JSON
    is a setup error.

    Raises:
        CommandError: the contract, its policy or its system prompt file cannot be read, or
            is not JSON (code 2), as for every file a command reads.
    """
    problems = check_contract(contract, policy=policy, allow_outside=allow_outside)
    for problem in problems:
        if problem.rule == "file":
            raise CommandError(problem.message)
    return problems


def check_command(args: argparse.Namespace) -> int:
    """Check a contract against its schemas and the loop's rules: one line per problem.

    Args:
        args: the parsed arguments of `boundloop check`.

    Returns:
        0 when the contract is sound, 1 when it breaks a rule.

    Raises:
        CommandError: the contract (or the --policy file) does not exist, cannot be read or is
            not JSON.
    """
    contract = existing_file(args.contract, "contract file")
    policy = None if args.policy is None else existing_file(args.policy, "policy file")
    problems = contract_problems(contract, policy, allow_outside=args.allow_outside)
    for problem in problems:
        print(f"{contract}: {problem}")
    if problems:
        print(f"{len(problems)} problem(s)", file=sys.stderr)
        return EXIT_NOT_COMPLETED
    print(f"{contract}: ok")
    return EXIT_OK


def compile_command(args: argparse.Namespace) -> int:
    """Write the Python module that builds the contract's loop, and its review report.

    Args:
        args: the parsed arguments of `boundloop compile`.

    Returns:
        0 when both files were written, 1 when the contract breaks a rule (nothing written).

    Raises:
        CommandError: a file is missing, or an output cannot be written.
    """
    contract = existing_file(args.contract, "contract file")
    policy = None if args.policy is None else existing_file(args.policy, "policy file")
    problems = contract_problems(contract, policy, allow_outside=args.allow_outside)
    if problems:
        for problem in problems:
            print(f"{contract}: {problem}")
        print(f"{len(problems)} problem(s): nothing compiled", file=sys.stderr)
        return EXIT_NOT_COMPLETED
    loaded = load_contract(contract, policy=policy, allow_outside=args.allow_outside)
    _write(args.output, compile_module(loaded, source=str(contract)))
    if args.report is not None:
        _write(args.report, compile_report(loaded, source=str(contract)))
    print(f"wrote {args.output}" + ("" if args.report is None else f" and {args.report}"))
    return EXIT_OK


def _write(path: str, text: str) -> None:
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc.strerror or exc}") from exc


def lint_command(args: argparse.Namespace) -> int:
    """Flag the anti-patterns of hand-written agent loops in Python files.

    Args:
        args: the parsed arguments of `boundloop lint`.

    Returns:
        0 when nothing was found, 1 when there are findings.

    Raises:
        CommandError: a path does not exist.
    """
    try:
        findings = lint_paths(args.paths)
    except FileNotFoundError as exc:
        raise CommandError(f"{exc.filename}: no such file or folder") from exc
    if args.json:
        print(json.dumps([dataclasses.asdict(finding) for finding in findings], indent=2))
    else:
        for finding in findings:
            print(finding)
    if findings:
        print(f"{len(findings)} finding(s)", file=sys.stderr)
        return EXIT_NOT_COMPLETED
    return EXIT_OK
