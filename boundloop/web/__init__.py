"""The inspector: a web page over a store's runs (docs/inspector.md).

`app(store, loop=None, token=None)` is an ASGI app (Starlette) listing every run, showing one
run (its timeline, state diagram, transcript, usage and provenance, live while it runs), and
the runs waiting for a human, whose calls a person approves or denies: the run is resumed
through `loop` in the server process. `boundloop serve` runs it under uvicorn.

It needs the `web` extra (`pip install 'boundloop[web]'`: starlette and uvicorn).
"""

from __future__ import annotations

try:
    import starlette
except ModuleNotFoundError as exc:  # pragma: no cover - the extra is installed in the tests
    raise ModuleNotFoundError(
        "boundloop.web needs the web extra: pip install 'boundloop[web]'", name=exc.name
    ) from None

from ._app import app as app

del starlette  # imported to check the extra is there

__all__ = ["app"]
