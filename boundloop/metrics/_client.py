"""prometheus_client's own instruments as a `Backend`: multiprocess mode.

In multiprocess mode (`PROMETHEUS_MULTIPROC_DIR` set) every value must reach prometheus_client's
mmap files, which a `MultiProcessCollector` in another process sums; plain Python values
(`LocalStore`) would never leave this process. So there the loop records on real `Counter`,
`Histogram` and `Gauge` instruments, children resolved once per loop, as before `LocalStore`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import final

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ._families import Family
from ._store import Counting, Observing, fits_exemplar


@final
class _ClientHistogram:
    """A `Histogram` child taking a trace id for its exemplar."""

    __slots__ = ("_child",)

    def __init__(self, child: Histogram) -> None:
        self._child = child

    def observe(self, amount: float, trace_id: str | None) -> None:
        if trace_id is None or not fits_exemplar(trace_id):
            self._child.observe(amount)
        else:
            self._child.observe(amount, {"trace_id": trace_id})


@final
class _ClientCountedHistogram:
    """A `Histogram` child and the `Counter` child that counts its observations."""

    __slots__ = ("_counter", "_histogram")

    def __init__(self, counter: Counter, histogram: Histogram) -> None:
        self._counter = counter
        self._histogram = _ClientHistogram(histogram)

    def observe(self, amount: float, trace_id: str | None) -> None:
        self._counter.inc()
        self._histogram.observe(amount, trace_id)


@final
class ClientInstruments:
    """Every family registered as a prometheus_client instrument on `registry`, once."""

    def __init__(self, registry: CollectorRegistry, namespace: str, families: Sequence[Family]) -> None:
        self._counters: dict[str, Counter] = {}
        self._histograms: dict[str, Histogram] = {}
        self._gauge: Gauge | None = None
        for family in families:
            labels = family.labelnames
            name, doc = family.name, family.documentation
            if family.type == "counter":
                self._counters[name] = Counter(name, doc, labels, namespace=namespace, registry=registry)
            elif family.type == "histogram":
                self._histograms[name] = Histogram(
                    name, doc, labels, namespace=namespace, registry=registry, buckets=family.buckets
                )
            else:
                self._gauge = Gauge(
                    name,
                    doc,
                    labels,
                    namespace=namespace,
                    registry=registry,
                    # Multiprocess mode: sum over the live processes; a dead worker's runs drop out.
                    multiprocess_mode="livesum",
                )

    def counter(self, family: Family, labels: tuple[str, ...]) -> Counting:
        return self._counters[family.name].labels(*labels)

    def histogram(self, family: Family, labels: tuple[str, ...]) -> Observing:
        return _ClientHistogram(self._histograms[family.name].labels(*labels))

    def counted_histogram(self, counter: Family, histogram: Family, labels: tuple[str, ...]) -> Observing:
        return _ClientCountedHistogram(
            self._counters[counter.name].labels(*labels), self._histograms[histogram.name].labels(*labels)
        )

    def gauge(self, labels: tuple[str, ...]) -> Gauge:
        assert self._gauge is not None, "the families have no gauge"
        return self._gauge.labels(*labels)
