"""The `boundloop` command line: `main` and how errors become exit codes (the parser: `_parser.py`)."""

from __future__ import annotations

import contextlib
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from typing import NoReturn, TextIO

from ._errors import EXIT_INTERRUPTED, EXIT_NOT_COMPLETED, EXIT_OK, CommandError
from ._parser import Command, build_parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `boundloop` command.

    Args:
        argv: the arguments after the program name; default: `sys.argv[1:]`.

    Returns:
        The exit code (0, 1, 2 or 130; see `boundloop --help`).
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        command: Command = args.command
        with warnings.catch_warnings():  # restores `showwarning` after the command
            warnings.showwarning = _one_line_warnings(warnings.showwarning)
            return command(args)
    except SystemExit as exit_:  # --help and --version
        return exit_.code if isinstance(exit_.code, int) else EXIT_OK
    except CommandError as exc:
        _error(str(exc))
        return exc.code
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED


def exit_now(code: int) -> NoReturn:
    """End the process at once with `code`: the output flushed, no thread waited for.

    A tool abandoned in a worker thread keeps the interpreter from exiting until it returns
    (Python joins its non-daemon threads at exit); after an interrupt nothing is worth that wait.

    Args:
        code: the exit code.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def console() -> NoReturn:
    """The `boundloop` process: `main()` on `sys.argv`, then exit with its code.

    After an interrupt the process ends at once (`os._exit(130)`, the output flushed): Python
    would otherwise wait at exit for a tool still running in a worker thread the run abandoned,
    and a second Ctrl-C during that wait would print a traceback.

    Output into a pipe its reader closed early (`boundloop eval | head -1`) ends the command
    quietly with exit code 1, as Python's documentation of SIGPIPE recommends: no traceback.
    """
    try:
        code = main()
        sys.stdout.flush()  # a closed pipe shows here, not in the flush at exit
    except KeyboardInterrupt:  # a Ctrl-C after `main` handled the first one
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader is gone: what is left to write goes nowhere, including the flush at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = EXIT_NOT_COMPLETED
    if code == EXIT_INTERRUPTED:
        exit_now(code)
    sys.exit(code)


def _one_line_warnings(show: Callable[..., None]) -> Callable[..., None]:
    """`warnings.showwarning` printing boundloop's own warnings as one line, `boundloop: warning: ...`.

    Python shows a warning with the file and line it names and that line's source; in the
    command, that line is the command's own machinery (anyio's, for a loop the demo builds),
    which says nothing to the person at the shell. Other warnings are shown as Python shows them.
    """

    def show_warning(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if category.__module__.split(".")[0] != "boundloop":
            show(message, category, filename, lineno, file, line)
            return
        print(f"boundloop: warning: {message}", file=sys.stderr if file is None else file)

    return show_warning


def _error(message: str) -> None:
    print(f"boundloop: error: {message}", file=sys.stderr)
