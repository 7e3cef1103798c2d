"""What watches a loop's runs, given as one value: `Observers`, its metrics, tracing and event
hook, and the marker of a setting left at its default.

Light on purpose: `from boundloop import Observers` loads neither the SDK nor the runtime.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Final, final

from .._lazy import claim
from ..events import Event
from ..metrics.instruments import LoopMetrics
from ..otel import TraceSettings

EventHook = Callable[[Event], None]


class Default:
    """Marker for 'not passed', where None has a meaning of its own."""

    def __repr__(self) -> str:
        return "DEFAULT"


DEFAULT: Final = Default()


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Observers:
    """What watches a loop's runs: `AgentLoop(observers=Observers(...))`, the way `Redaction`
    groups what a loop redacts. `Observers()` counts on the default registry, traces to the
    global provider when one is set and calls no hook (docs/metrics.md, docs/otel.md).
    """

    metrics: LoopMetrics | Default | None = DEFAULT
    """A `LoopMetrics` the runs count on; default: shared instruments on prometheus_client's
    default registry (a delegated run without its own counts where its parent's loop does);
    None: no metrics."""
    tracing: TraceSettings | None = TraceSettings()
    """`TraceSettings(provider=..., content=...)`; default: the global provider, when one is
    set, looked up once per run; None: no spans."""
    on_event: EventHook | None = None
    """Called synchronously with every `Event` (`boundloop.events`) as it is recorded, before a
    run's own `run(on_event=...)`; an exception it raises fails the run."""


claim("boundloop", Observers)  # reported at its public home
