"""boundloop on the web: the inspector, and the protocols front ends speak.

- `app(store, loop=None, token=None)` is the inspector (docs/inspector.md): an ASGI app (Starlette)
  listing every run, showing one run (its timeline, state diagram, transcript, usage and
  provenance, live while it runs), and the runs waiting for a human, whose calls a person
  approves or denies: the run is resumed through `loop` in the server process. `boundloop
  serve` runs it under uvicorn.
- The AI SDK's UI message stream (docs/front-ends.md): `ui_message_stream(run)` and
  `ui_message_parts(run)` turn a run's events into the parts `useChat` reads,
  `ui_message_response(...)` sends them from a Starlette/FastAPI endpoint, and `chat_app(loop)`
  is the whole endpoint (`useChat`'s POST, its reconnect, approvals).
- `agui_app(loop, token=None)` is the loop as an AG-UI endpoint (docs/front-ends.md): the POST
  of a `RunAgentInput` answered with the run's AG-UI events over server-sent events.

It needs the `web` extra (`pip install 'boundloop[web]'`: starlette, uvicorn and
ag-ui-protocol). Each name is imported on first use, from its own module: the inspector loads
neither protocol.
"""

from __future__ import annotations

import typing

try:
    import starlette
except ModuleNotFoundError as exc:  # pragma: no cover - the extra is installed in the tests
    raise ModuleNotFoundError(
        "boundloop.web needs the web extra: pip install 'boundloop[web]'", name=exc.name
    ) from None

from .._lazy import lazy_getattr as _lazy_getattr
from .._lazy import public_names as _public_names

if typing.TYPE_CHECKING:
    from ._agui import agui_app as agui_app
    from ._app import app as app
    from ._chat import OnDisconnect as OnDisconnect
    from ._chat import chat_app as chat_app
    from ._chat import ui_message_response as ui_message_response
    from ._ui_messages import UI_MESSAGE_STREAM_HEADERS as UI_MESSAGE_STREAM_HEADERS
    from ._ui_messages import Part as Part
    from ._ui_messages import ui_message_parts as ui_message_parts
    from ._ui_messages import ui_message_stream as ui_message_stream

del starlette  # imported to check the extra is there

_SOURCES: typing.Final[dict[str, str]] = _public_names(__file__)
"""Where each public name is defined, relative to the package: what `__getattr__` imports."""

__all__ = sorted(_SOURCES)  # pyright: ignore[reportUnsupportedDunderAll]

if not typing.TYPE_CHECKING:  # type checkers see the imports above, and an unknown name stays an error
    __getattr__ = _lazy_getattr(__name__, globals(), _SOURCES)

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
