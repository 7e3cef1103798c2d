"""Reading the exported spans."""

from __future__ import annotations

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def finished(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    """The spans ended so far, in the order they ended."""
    return list(exporter.get_finished_spans())


def named(spans: list[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    """The spans whose name starts with `prefix`, in the order they ended."""
    return [span for span in spans if span.name.startswith(prefix)]


def only(spans: list[ReadableSpan], prefix: str) -> ReadableSpan:
    """The one span whose name starts with `prefix`."""
    found = named(spans, prefix)
    assert len(found) == 1, [span.name for span in spans]
    return found[0]
