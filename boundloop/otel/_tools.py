"""A traced run's `execute_tool` spans: the current span while a tool function runs, finished from the trace.

A call whose tool function runs gets its span when the tool function first starts (`current`, the run
context's `tool_span` hook, entered around each attempt), so a span the tool function starts is its
child; the span's time is the tool function's, from its first attempt's start to its last attempt's
end. The call's `tool_result` event (`finish`) adds the outcome, the attempts and, on opt-in,
the content, and ends it. A call that never ran its tool function (denied, repeated, invalid,
cancelled before it started, or answered by a copy of an identical call) gets its span from
that event alone. Telemetry never fails a run: a failure here is logged and dropped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Generator
from contextvars import Token
from typing import TYPE_CHECKING, final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from ..events import ToolResult
from ..records import FAILED_OUTCOMES, ToolCall
from ..redaction import recorded_call_id
from . import _content
from ._setup import TracedLoop

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer


log = logging.getLogger("boundloop.otel")


def epoch_ns(seconds: float) -> int:
    """Epoch seconds (a trace event's `at`) as OpenTelemetry's epoch nanoseconds."""
    return int(seconds * 1e9)


@final
@dataclasses.dataclass(slots=True)
class _Running:
    """The span of a call whose tool function has started, until its `tool_result` event."""

    span: Span
    context: otel_context.Context
    """The run's context with this span current: what each attempt attaches."""
    end: int | None = None
    """When the tool function's last attempt so far returned (epoch ns)."""


@final
class ToolSpans:
    """The `execute_tool` spans of one traced run (one session of it)."""

    __slots__ = ("batch_at", "config", "parent", "running", "tracer")

    def __init__(self, config: TracedLoop, tracer: Tracer, parent: otel_context.Context) -> None:
        self.config = config
        self.tracer = tracer
        self.parent = parent
        """The run span's context: each call's span is its child."""
        self.batch_at: float | None = None
        """When the current batch started (its `tool_call` event)."""
        self.running: dict[str, _Running] = {}
        """The spans of calls whose tool function started, by tool_use id as the trace records it."""

    def _attributes(self, name: str, call_id: str, step: int) -> dict[str, AttributeValue]:
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
            "boundloop.step": step,
        }
        tool = self.config.tools.get(name)
        if tool is not None and tool.description:
            attributes["gen_ai.tool.description"] = tool.description
        return attributes

    def _start(self, name: str, attributes: dict[str, AttributeValue], start: int | None) -> Span:
        return self.tracer.start_span(
            f"execute_tool {name}",
            context=self.parent,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=start,
        )

    @contextlib.contextmanager
    def current(self, call: ToolCall) -> Generator[None]:
        """The call's span as the current span while one attempt of its tool function runs."""
        running: _Running | None = None
        token: Token[otel_context.Context] | None = None
        try:
            key = recorded_call_id(call.id, self.config.redactor)
            running = self.running.get(key)
            if running is None:  # the first attempt: the span starts now
                span = self._start(call.name, self._attributes(call.name, key, call.step), None)
                running = self.running[key] = _Running(span, trace.set_span_in_context(span, self.parent))
            token = otel_context.attach(running.context)
        except Exception:  # telemetry never fails a run: the tool function runs under the run span
            log.debug("could not start the span of a tool call", exc_info=True)
        try:
            yield
        finally:
            if running is not None:
                running.end = time.time_ns()
            if token is not None:
                otel_context.detach(token)

    def finish(self, event: ToolResult) -> None:
        """A call's `ToolResult` event: its outcome on its span, which ends."""
        name = event.tool
        call_id = event.tool_use_id
        outcome = event.outcome
        attempts = event.attempts
        attributes: dict[str, AttributeValue] = {
            "boundloop.tool.outcome": outcome,
            "boundloop.tool.attempts": attempts,
        }
        if self.config.trace_content:
            redact = self.config.redactor
            attributes["gen_ai.tool.call.arguments"] = _content.as_json(event.input, redact)
            attributes["gen_ai.tool.call.result"] = _content.as_json(event.content, redact)
        running = self.running.pop(call_id, None)
        if running is not None:  # its tool function ran under this span
            span = running.span
            span.set_attributes(attributes)
            end = running.end
        else:
            if attempts and self.batch_at is not None:  # it ran: from its batch's start, for its duration
                start = self.batch_at
                finished = start + event.duration_s
            else:  # answered without running its tool function
                start = finished = event.at
            span = self._start(
                name, self._attributes(name, call_id, event.step) | attributes, epoch_ns(start)
            )
            end = epoch_ns(finished)
        if outcome in FAILED_OUTCOMES:
            span.set_attribute("error.type", outcome)
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=end)

    def end(self) -> None:
        """End the spans of calls whose result the run never recorded (it raised meanwhile)."""
        running, self.running = self.running, {}
        for call in running.values():
            call.span.end(end_time=call.end)
