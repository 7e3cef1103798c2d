"""What every part of the `boundloop` parser uses: lazy subcommands, wrapped text, shared options."""

from __future__ import annotations

import argparse
import importlib
import textwrap
from collections.abc import Callable

Command = Callable[[argparse.Namespace], int]
"""A subcommand: its parsed arguments in, the exit code out."""


def command(module: str, name: str) -> Command:
    """The subcommand `name` of `boundloop.cli.<module>`, imported only when it runs.

    Building the parser imports no command: `--help`, `--version` and a usage error never load
    the loop, the Anthropic SDK, pydantic or rich.
    """

    def run(args: argparse.Namespace) -> int:
        found: Command = getattr(importlib.import_module(f"{__package__}.{module}"), name)
        return found(args)

    run.__name__ = run.__qualname__ = name
    return run


def wrap(text: str) -> str:
    return textwrap.fill(text, width=79)


def add_store(parser: argparse.ArgumentParser, *, required: bool = False) -> None:
    parser.add_argument(
        "--store",
        required=required,
        metavar="PATH",
        help="the store: a SQLite file or a postgresql:// URI (a file must exist)",
    )


def add_app_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--app-dir", default=".", help="directory to import SPEC's module from (default: .)")
