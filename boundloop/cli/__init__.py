"""The `boundloop` command: `demo`, `run`, `pending`, `resume`, `replay` and `diagram`.

`main(argv) -> int` is the whole command, so tests call it in-process; `python -m boundloop`
and the `boundloop` console script both call it. Errors are one line on stderr
(`boundloop: error: ...`) with a non-zero exit code, never a traceback:

- 0: the run completed (the diagram was written, the waiting runs listed, the replay identical);
- 1: the run stopped for another reason (`max_steps`, `policy_blocked`, ...) or failed; the
  replay diverged;
- 2: a usage or setup error (bad arguments, unreadable file, missing store or task, missing API
  key or graphviz);
- 130: interrupted with Ctrl-C.

The modules: `_app` (the parser and `main`), `_demo`, `_run`, `_pending`, `_resume`, `_replay`
and `_diagram` (one command each), `_runner` (running a loop with the view, trace, metrics or
JSON), `_view` (the live view), `_fields` (typed reads of trace data), `_errors` (`CommandError`
and the exit codes) and `demo` (the demo's tools and script).
"""

from __future__ import annotations

from ._app import main

__all__ = ["main"]
