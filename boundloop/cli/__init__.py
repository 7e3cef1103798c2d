"""The `boundloop` command: `demo`, `run`, `pending`, `resume`, `replay` and `diagram`.

`main(argv) -> int` is the whole command, so tests call it in-process; `python -m boundloop`
and the `boundloop` console script both run `console()`, which calls it and exits with its code
(after Ctrl-C at once, `os._exit(130)`, not waiting for a tool thread the run abandoned).
Errors are one line on stderr (`boundloop: error: ...`) with a non-zero exit code, never a
traceback:

- 0: the run completed (the diagram was written, the waiting runs listed, the replay identical);
- 1: the run stopped for another reason (`max_steps`, `policy_blocked`, ...) or failed; the
  replay diverged;
- 2: a usage or setup error (bad arguments, a file missing, unreadable or not JSON, missing
  store or task, missing API key or graphviz);
- 130: interrupted with Ctrl-C.

Each command's `--help` lists the exit codes that command returns.

The modules: `_app` (the parser and `main`), `_demo`, `_run`, `_pending`, `_resume`, `_replay`,
`_diagram`, `_eval` and `_contract` (the commands), `_runner` (running a loop with the view,
trace, metrics or JSON), `_view` (the live view), `_fields` (typed reads of trace data), `_json`
(the JSON printed, costs rounded), `_errors` (`CommandError` and the exit codes), `_defaults`
(what the parser shows) and `demo` (the demo's tools and script). The parser imports no
command: a command's module is imported when it runs, so `--help` loads neither the loop nor
the Anthropic SDK.
"""

from __future__ import annotations

from ._app import console, main

__all__ = ["console", "main"]
