"""Prometheus metrics for boundloop: instruments and exposition.

`LoopMetrics` (imported from `boundloop`) holds every instrument (docs/metrics.md), `RunMetrics`
records a run's events into them; `serve()` and `asgi_app()` expose them. See docs/metrics.md.

Each name is imported on first use, from its own module (as `boundloop`'s are): a loop that
records metrics does not load the exposition's servers.
"""

from __future__ import annotations

import typing

from .._lazy import lazy_getattr as _lazy_getattr
from .._lazy import public_names as _public_names

if typing.TYPE_CHECKING:
    from .exposition import MetricsApp as MetricsApp
    from .exposition import MetricsServer as MetricsServer
    from .exposition import asgi_app as asgi_app
    from .exposition import exposed_registry as exposed_registry
    from .exposition import multiprocess_registry as multiprocess_registry
    from .exposition import render as render
    from .exposition import serve as serve
    from .instruments import BoundMetrics as BoundMetrics
    from .instruments import PoolGauges as PoolGauges
    from .instruments import multiprocess_mode as multiprocess_mode
    from .observer import RunMetrics as RunMetrics

_SOURCES: typing.Final[dict[str, str]] = _public_names(__file__)
"""Where each public name is defined, relative to the package: what `__getattr__` imports."""

__all__ = sorted(_SOURCES)  # pyright: ignore[reportUnsupportedDunderAll]

if not typing.TYPE_CHECKING:  # type checkers see the imports above, and an unknown name stays an error
    __getattr__ = _lazy_getattr(__name__, globals(), _SOURCES)

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
