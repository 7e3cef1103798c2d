"""The hot path's values in plain Python, exposed through one prometheus_client `Collector`.

A prometheus_client `Counter.inc()` or `Histogram.observe()` takes a lock, validates, and
(for a histogram) walks its buckets in Python: about a microsecond or two each, twenty times a
turn. Here a counter is an `int` attribute and a histogram a list of bucket counts indexed by
`bisect`, a sum and the last exemplar of each bucket; `LocalStore.collect()` turns them into the
same families, samples and exemplars prometheus_client's instruments produce.

No lock on the hot path, and no lost increment, whatever the interpreter's switch points (or
no GIL at all): each thread writes only to its own cells (its shard, keyed by thread id), and a
scrape adds up the shards of every thread, reading while the owners write (a value is a whole
int or float, old or new). The ids of live threads are unique, so a shard has one writer at a
time; an ended thread's id, and with it its shard and its counts, go to a later thread (as
the C library recycles them), so the shards number about the threads alive at once, not all
that ever recorded. Series and shards are created under the store's lock, once per label set
and thread; the scrape takes the same lock only to copy the lists it walks.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from typing import Final, Protocol, TypeAlias, final

import prometheus_client.metrics
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.samples import Exemplar, Sample
from prometheus_client.utils import INF, floatToGoString  # pyright: ignore[reportUnknownVariableType]

from ._families import Family

EXEMPLAR_MAX_RUNES: Final = 128
"""OpenMetrics' limit on an exemplar's label names and values together (prometheus_client enforces it)."""


class Counting(Protocol):
    """A counter child, prometheus_client's or a `LocalStore` cell: `inc(amount)` adds `amount`."""

    def inc(self, amount: float = 1) -> None: ...


class Observing(Protocol):
    """A histogram child: `observe(amount, trace_id)`, the trace id (or None) its bucket's exemplar."""

    def observe(self, amount: float, trace_id: str | None) -> None: ...


class Backend(Protocol):
    """Where a `BoundMetrics` records: `LocalStore`, or prometheus_client's own instruments.

    `counter()` and `histogram()` give the calling thread's child of a series, which exists
    (a counter at 0) from then on; `counted_histogram()` a histogram child whose every
    observation also counts one on `counter`, with the same labels; `gauge()` the child of
    `runs_active`.
    """

    def counter(self, family: Family, labels: tuple[str, ...]) -> Counting: ...

    def histogram(self, family: Family, labels: tuple[str, ...]) -> Observing: ...

    def counted_histogram(self, counter: Family, histogram: Family, labels: tuple[str, ...]) -> Observing: ...

    def gauge(self, labels: tuple[str, ...]) -> Gauge: ...


def fits_exemplar(trace_id: str) -> bool:
    """Whether `trace_id` fits in an exemplar: OpenMetrics allows 128 characters of label names
    and values in all. A longer id (the caller's own) is recorded without an exemplar: a metric
    never fails a run."""
    return len("trace_id") + len(trace_id) <= EXEMPLAR_MAX_RUNES


@final
class _Counter:
    """A counter's value in one thread."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count: float = 0

    def inc(self, amount: float = 1) -> None:
        if amount < 0:  # as prometheus_client refuses it
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self.count += amount


_Exemplar: TypeAlias = tuple[str, float, float]
"""trace id, observed value, Unix time."""


class _Histogram:
    """A histogram's values in one thread: per bucket (not cumulative) counts, the sum, exemplars."""

    __slots__ = ("bounds", "buckets", "count", "exemplars", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.buckets = [0] * len(bounds)
        self.exemplars: list[_Exemplar | None] = [None] * len(bounds)
        self.count = 0
        """Observations, for a `_CountedHistogram`; a plain histogram derives its count from the buckets."""
        self.sum = 0.0

    def observe(self, amount: float, trace_id: str | None) -> None:
        # The bucket is the first whose bound is not below `amount` (`amount <= bound`, as in
        # prometheus_client). NaN lands in the sum and in no bucket, as there.
        if amount == amount:
            index = bisect_left(self.bounds, amount)
            self.buckets[index] += 1
            if trace_id is not None and fits_exemplar(trace_id):
                self.exemplars[index] = (trace_id, amount, time.time())
        self.sum += amount


@final
class _CountedHistogram(_Histogram):
    """A histogram that also is a counter of its observations: an edge's two series in one cell."""

    __slots__ = ()

    def observe(self, amount: float, trace_id: str | None) -> None:
        self.count += 1
        if amount == amount:  # `_Histogram.observe`, inlined: this runs five times a turn
            index = bisect_left(self.bounds, amount)
            self.buckets[index] += 1
            if trace_id is not None and fits_exemplar(trace_id):
                self.exemplars[index] = (trace_id, amount, time.time())
        self.sum += amount


_Cell: TypeAlias = _Counter | _Histogram
_Key: TypeAlias = tuple[str, tuple[str, ...]]
"""A series: its family's name and its label values."""


@final
class LocalStore:
    """The values of every loop bound on one registry and namespace, and their `Collector`.

    Registered on the registry once; `collect()` yields the families in the order of `families`
    (the gauge's own, prometheus_client's `Gauge`, in its place), and `describe()` their names,
    so a clashing registration still raises "Duplicated timeseries" and `name[]` filters work.
    """

    def __init__(self, registry: CollectorRegistry, namespace: str, families: Sequence[Family]) -> None:
        self._namespace = namespace
        self._families = tuple(families)
        (gauge,) = (family for family in self._families if family.type == "gauge")
        self._gauge = Gauge(
            gauge.name, gauge.documentation, gauge.labelnames, namespace=namespace, registry=None
        )
        self._bounds = {family.name: (*family.buckets, INF) for family in self._families}
        self._les = {
            name: tuple(_go_float(bound) for bound in bounds) for name, bounds in self._bounds.items()
        }
        self._lock = threading.Lock()
        # Each series' creation time (its `_created`), in creation order, per family.
        self._series: dict[str, dict[tuple[str, ...], float]] = {f.name: {} for f in self._families}
        self._shards: dict[int, dict[_Key, _Cell]] = {}
        registry.register(self)

    def counter(self, family: Family, labels: tuple[str, ...]) -> Counting:
        cell = self._cell(family, labels, _Counter)
        assert isinstance(cell, _Counter)
        return cell

    def histogram(self, family: Family, labels: tuple[str, ...]) -> Observing:
        cell = self._cell(family, labels, lambda: _Histogram(self._bounds[family.name]))
        assert isinstance(cell, _Histogram)
        return cell

    def counted_histogram(self, counter: Family, histogram: Family, labels: tuple[str, ...]) -> Observing:
        cell = self._cell(histogram, labels, lambda: _CountedHistogram(self._bounds[histogram.name]))
        assert isinstance(cell, _CountedHistogram)
        # The counter's series reads the same cell's `count`.
        self._cell(counter, labels, lambda: cell)
        return cell

    def gauge(self, labels: tuple[str, ...]) -> Gauge:
        return self._gauge.labels(*labels)

    def _cell(self, family: Family, labels: tuple[str, ...], make: Callable[[], _Cell]) -> _Cell:
        """Declare the series (once) and return the calling thread's cell for it (made once)."""
        # Reads without the lock; writes (first series, first shard) under it, where `collect`
        # copies these dicts.
        created = self._series[family.name]
        if labels not in created:
            with self._lock:
                created.setdefault(labels, time.time())
        ident = threading.get_ident()
        shard = self._shards.get(ident)
        if shard is None:
            with self._lock:
                shard = self._shards.setdefault(ident, {})
        key = (family.name, labels)
        cell = shard.get(key)
        if cell is None:
            # Only this thread writes to its shard: no lock needed to add the cell.
            cell = shard[key] = make()
        return cell

    def describe(self) -> Iterator[Metric]:
        """The families, without samples: the names the registry reserves for this collector."""
        for family in self._families:
            name = family.full_name(self._namespace)
            if family.type == "counter":
                yield CounterMetricFamily(name, family.documentation, labels=family.labelnames)
            elif family.type == "histogram":
                yield HistogramMetricFamily(name, family.documentation, labels=family.labelnames)
            else:
                yield from self._gauge.describe()

    def collect(self) -> Iterator[Metric]:
        """Every family with every series, summed over the threads' shards."""
        with self._lock:
            shards = list(self._shards.values())
            series = {name: list(created.items()) for name, created in self._series.items()}
        # Honour `prometheus_client.disable_created_metrics()` as its own instruments do.
        use_created = bool(getattr(prometheus_client.metrics, "_use_created", True))
        for family in self._families:
            name = family.full_name(self._namespace)
            if family.type == "gauge":
                yield from self._gauge.collect()
            elif family.type == "counter":
                counters = CounterMetricFamily(name, family.documentation, labels=family.labelnames)
                for labels, created in series[family.name]:
                    key = (family.name, labels)
                    value = sum(cell.count for shard in shards if (cell := shard.get(key)) is not None)
                    counters.add_metric(labels, float(value), created if use_created else None)
                yield counters
            else:
                histograms = HistogramMetricFamily(name, family.documentation, labels=family.labelnames)
                for labels, created in series[family.name]:
                    cells = [shard.get((family.name, labels)) for shard in shards]
                    self._add_histogram(histograms, family, labels, [c for c in cells if c is not None])
                    if use_created:
                        series_labels = dict(zip(family.labelnames, labels, strict=True))
                        histograms.samples.append(Sample(f"{name}_created", series_labels, created))
                yield histograms

    def _add_histogram(
        self, histograms: HistogramMetricFamily, family: Family, labels: tuple[str, ...], cells: list[_Cell]
    ) -> None:
        """One series: cumulative buckets (with the newest exemplar of each), count and sum."""
        les = self._les[family.name]
        counts = [0] * len(les)
        exemplars: list[_Exemplar | None] = [None] * len(les)
        total = 0.0
        for cell in cells:
            assert isinstance(cell, _Histogram)
            total += cell.sum
            for index, (count, exemplar) in enumerate(zip(cell.buckets, cell.exemplars, strict=True)):
                counts[index] += count
                newest = exemplars[index]
                # The newest wins; on a tie, the later thread's (the shards are in creation order).
                if exemplar is not None and (newest is None or exemplar[2] >= newest[2]):
                    exemplars[index] = exemplar
        buckets: list[tuple[str, float] | tuple[str, float, Exemplar]] = []
        cumulative = 0.0
        for le, count, exemplar in zip(les, counts, exemplars, strict=True):
            cumulative += count
            if exemplar is None:
                buckets.append((le, cumulative))
            else:
                trace_id, value, at = exemplar
                buckets.append((le, cumulative, Exemplar({"trace_id": trace_id}, value, at)))
        histograms.add_metric(labels, buckets, total)


def _go_float(value: float) -> str:
    """A bucket bound as prometheus_client writes its `le` label."""
    text: str = floatToGoString(value)  # type: ignore[no-untyped-call]  # untyped upstream
    return text
