"""Which tracer a run uses: the loop's provider, the global one when set, or none at all.

Nothing here imports OpenTelemetry: a loop given a provider asks it for a tracer once, and a
loop on the global provider looks it up once per run, in `sys.modules` first, so a process
that never set one pays a dict lookup per run and imports nothing.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, Protocol, cast, final

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer, TracerProvider

    from ..platforms import Platform
    from ..settings import LoopSpec
    from ..tools import Tool

SCOPE: Final = "boundloop"
"""The instrumentation scope of boundloop's spans."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TraceSettings:
    """How a loop's runs are traced: `Observers(tracing=TraceSettings(...))` (docs/otel.md).

    `Observers(tracing=None)` traces nothing.
    """

    provider: TracerProvider | None = None
    """The OpenTelemetry `TracerProvider` runs are traced to; None: the global provider, when
    one is set (looked up once per run)."""
    content: bool = False
    """Put message content (text, transcript, tool I/O) on the spans, redacted."""


@final
@dataclasses.dataclass(frozen=True, slots=True)
class Tracing:
    """A provider and the tracer boundloop asked it for."""

    provider: TracerProvider
    tracer: Tracer


class TracedLoop(Protocol):
    """What the spans read of a loop's configuration (the core's `LoopConfig` is one)."""

    @property
    def spec(self) -> LoopSpec: ...
    @property
    def client(self) -> object: ...
    @property
    def trace_content(self) -> bool: ...
    @property
    def redactor(self) -> Callable[[str], str]: ...
    @property
    def tools(self) -> Mapping[str, Tool]: ...
    @property
    def platform(self) -> Platform: ...


RUN_TRACING: Final[ContextVar[Tracing | None]] = ContextVar("boundloop_run_tracing", default=None)
"""The tracing of the traced run whose work runs in this task (set while its run span is current)."""


def run_tracing() -> Tracing | None:
    """The tracing of the traced run whose work runs in this task (a tool function's run), or
    None: a run it delegates to, on the default tracing, is traced with it, in one tree."""
    return RUN_TRACING.get()


def _version() -> str:
    """boundloop's version, as its package says (no metadata read: that touches the disk)."""
    return str(getattr(sys.modules.get("boundloop"), "__version__", "0"))


def tracing_for(provider: TracerProvider) -> Tracing:
    """The tracing of an explicit provider: its tracer for boundloop's scope, asked for once."""
    return Tracing(provider, provider.get_tracer(SCOPE, _version()))


_global: Tracing | None = None
"""The global provider's tracing, kept while that provider stays the global one."""
_UNKNOWN: Final = object()
_by_environment: bool | None = None
"""Whether OTEL_PYTHON_TRACER_PROVIDER names a provider, read once (environment reads are slow)."""


def global_tracing() -> Tracing | None:
    """The global provider's tracing when an application set one; None for OpenTelemetry's
    default (the proxy with no provider behind it, or the no-op one), or when it is not loaded.

    Called once per run of a loop without a provider of its own, so it is cheap: a process
    that never imported OpenTelemetry pays a dict lookup; otherwise the global is read where
    `set_tracer_provider` stores it (once per process), and the public
    `get_tracer_provider()` (which reads the environment on every call) is asked only when the
    environment names a provider for it to load, or that attribute is not there.
    """
    global _global, _by_environment
    api = sys.modules.get("opentelemetry.trace")
    if api is None:  # not even imported: nobody can have set a provider
        return None
    if _by_environment is None:
        _by_environment = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
    namespace: dict[str, Any] = vars(api)
    provider: object = _UNKNOWN if _by_environment else namespace.get("_TRACER_PROVIDER", _UNKNOWN)
    if provider is None:
        return None  # none set: the API hands out its proxy
    if provider is _UNKNOWN:
        try:
            provider = namespace["get_tracer_provider"]()
        except Exception:  # a provider named by OTEL_PYTHON_TRACER_PROVIDER that fails to load
            return None
    if isinstance(provider, (namespace["ProxyTracerProvider"], namespace["NoOpTracerProvider"])):
        return None
    if _global is None or _global.provider is not provider:
        _global = tracing_for(cast("TracerProvider", provider))
    return _global


def is_provider(value: object) -> bool:
    """Whether `value` can be a tracer provider: it has `get_tracer`."""
    return callable(getattr(value, "get_tracer", None))
