"""`CommandError` and the exit codes of the `boundloop` command."""

from __future__ import annotations

from typing import Final

EXIT_OK: Final = 0
EXIT_NOT_COMPLETED: Final = 1
EXIT_USAGE: Final = 2
EXIT_INTERRUPTED: Final = 130

EXIT_CODES: Final = """\
exit codes:
  0    the run completed (diagram: the diagram was written)
  1    the run stopped otherwise (max_steps, policy_blocked, ...) or failed
  2    usage or setup error: bad arguments, a file, the API key, graphviz
  130  interrupted (Ctrl-C) during a run; with --hold, Ctrl-C ends
       the hold and the exit code is the run's"""
"""The exit codes, as the epilog of `--help` (`demo`, `run`, `resume`, `diagram`)."""

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
       with --export: the case was printed)
  1    a case failed: its first failed expectation is on its line
  2    a fixture is invalid (each problem names its file and field),
       or a usage or setup error
  130  interrupted (Ctrl-C)"""
"""The exit codes of `boundloop eval`."""

CONTRACT_EXIT_CODES: Final = """\
exit codes:
  0    the contract is sound (compile: the files were written)
  1    the contract breaks a rule: one line per problem (compile
       writes nothing)
  2    usage error: bad arguments, a missing file, an unwritable output
  130  interrupted (Ctrl-C)"""
"""The exit codes of `boundloop check` and `boundloop compile`."""

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
