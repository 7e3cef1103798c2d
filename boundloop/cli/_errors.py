"""`CommandError` and the exit codes of the `boundloop` command."""

from __future__ import annotations

from pathlib import Path
from typing import Final

EXIT_OK: Final = 0
EXIT_NOT_COMPLETED: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130

EXIT_CODES: Final = """\
exit codes:
  0    success: the run completed, the check passed, the file was written
  1    a run stopped otherwise or failed, a replay diverged, an eval case
       failed, a contract broke a rule, the linter found something
  2    usage or setup error: bad arguments, a file, the API key, graphviz
  130  interrupted (Ctrl-C)
each command's --help lists its own exit codes."""
"""The exit codes of the command as a whole, the epilog of `boundloop --help`."""

_RUN_CODES: Final = """\
exit codes:
  0    the run completed
  1    the run stopped otherwise (max_steps, policy_blocked, ...) or failed
  2    usage or setup error: {setup}
  130  interrupted (Ctrl-C) during the run; with --hold, Ctrl-C ends the
       hold and the exit code is the run's"""

DEMO_EXIT_CODES: Final = _RUN_CODES.format(
    setup="bad arguments, an unwritable --trace, a\n"
    "       --metrics-port in use, --live without ANTHROPIC_API_KEY or with\n"
    "       the Anthropic API out of reach"
)
"""The exit codes of `boundloop demo`."""

RUN_EXIT_CODES: Final = _RUN_CODES.format(
    setup="bad arguments, a SPEC that leads to no\n"
    "       AgentLoop (its module or factory fails), no API key, a model that\n"
    "       does not exist, an unwritable --trace, a --metrics-port in use"
)
"""The exit codes of `boundloop run`."""

RESUME_EXIT_CODES: Final = _RUN_CODES.format(
    setup="bad arguments, a missing store or task, a\n"
    "       run that is over, a waiting call left undecided, a SPEC that leads\n"
    "       to no AgentLoop, an unwritable --trace, a --metrics-port in use"
).replace("the run completed", "the resumed run completed")
"""The exit codes of `boundloop resume`."""

DIAGRAM_EXIT_CODES: Final = """\
exit codes:
  0    the diagram was written
  2    usage or setup error: bad arguments, a --format the --output
       suffix contradicts, an unreadable --trace, an unwritable --output,
       svg or png without graphviz
  130  interrupted (Ctrl-C)"""
"""The exit codes of `boundloop diagram`."""

PENDING_EXIT_CODES: Final = """\
exit codes:
  0    listed (also when no run is waiting)
  2    usage or setup error: bad arguments, a missing or unreadable store
  130  interrupted (Ctrl-C)"""
"""The exit codes of `boundloop pending`."""

REPLAY_EXIT_CODES: Final = """\
exit codes:
  0    the replay took the recorded path
  1    it diverged (or the replay failed)
  2    usage or setup error: bad arguments, a missing file or task, a
       corrupt checkpoint, a trace with no state in it
  130  interrupted (Ctrl-C)"""
"""The exit codes of `boundloop replay`."""

EVAL_EXIT_CODES: Final = """\
exit codes:
  0    every case passed (with --check: every fixture is valid;
       with --export: the case was printed); a live case skipped for
       want of --live is not a failure unless --require-live
  1    a case failed: its first failed expectation is on its line (a
       live case: its trials passed below --min-pass-rate); or, with
       --require-live, a live case did not run
  2    a fixture is invalid (each problem names its file and field),
       a fixture file cannot be read or is not JSON (one line), or a
       usage or setup error
  130  interrupted (Ctrl-C)"""
"""The exit codes of `boundloop eval`."""

CHECK_EXIT_CODES: Final = """\
exit codes:
  0    the contract is sound
  1    the contract breaks a rule: one line per problem
  2    usage error: bad arguments, a contract or policy file (or the
       prompt file it names) that is missing, cannot be read or is not
       JSON
  130  interrupted (Ctrl-C)"""
"""The exit codes of `boundloop check`."""

COMPILE_EXIT_CODES: Final = """\
exit codes:
  0    the contract is sound and the files were written
  1    the contract breaks a rule: one line per problem (nothing is
       written)
  2    usage error: bad arguments, a file that is missing, cannot be
       read or is not JSON, an unwritable output
  130  interrupted (Ctrl-C)"""
"""The exit codes of `boundloop compile`."""

READY_EXIT_CODES: Final = """\
exit codes:
  0    ready: the contract is sound, compiles, lints clean and the module
       passes mypy --strict
  1    a step failed: its findings under its line
  2    usage error: bad arguments, a missing contract, policy or module,
       mypy not installed
  130  interrupted (Ctrl-C)"""
"""The exit codes of `boundloop ready`."""

LINT_EXIT_CODES: Final = """\
exit codes:
  0    no finding
  1    findings: one line each, file:line:col RULE name: message (fix)
  2    usage error: bad arguments, a missing path
  130  interrupted (Ctrl-C)"""
"""The exit codes of `boundloop lint`."""


class CommandError(Exception):
    """A failure reported as one line on stderr with an exit code; never a traceback."""

    def __init__(self, message: str, code: int = EXIT_USAGE) -> None:
        """Make the error; the message's whitespace is collapsed to keep it on one line.

        Args:
            message: what went wrong, for `boundloop: error: ...`.
            code: the exit code; default: 2, a usage or setup error.
        """
        self.code = code
        super().__init__(" ".join(message.split()))


def existing_file(path: str, what: str) -> Path:
    """A file named on the command line, which must exist and not be a folder.

    Args:
        path: the path as given.
        what: what the file is, for the message ("contract file", "module").

    Returns:
        The path.

    Raises:
        CommandError: there is no such file, or it is a directory (code 2).
    """
    file = Path(path)
    if not file.exists():
        raise CommandError(f"{path}: no such {what}")
    if file.is_dir():
        raise CommandError(f"{path} is a directory, not a {what}")
    return file
