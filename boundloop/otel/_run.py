"""One run's spans, built from its trace events: `invoke_agent` over the run, a `chat` span per
model call, an `execute_tool` span per tool call, and a `transition` event per edge.

The driver makes a `RunSpans` only for a run that is traced, and `RunContext.emit` hands it
every trace event first (`observe`), so an untraced run does no work per event. The run span
is the current span while the run goes on. A model call's `chat` span is always boundloop's and
the current span while the call runs, so the anthropic SDK's own span of the call (when the SDK
traces) is its child (`_chat.ChatSpans`). A tool call's span is the current span while its tool
function runs, so a parallel batch's spans overlap and a span a tool function starts is a child
of its call's (`_tools.ToolSpans`). Telemetry never fails a run: a failure here is logged and
dropped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
from collections.abc import Generator
from typing import TYPE_CHECKING, Final, final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import NonRecordingSpan, Span, SpanContext, SpanKind, Status, StatusCode, TraceFlags
from opentelemetry.util.types import AttributeValue

from ..events import Error, Event, Proposal, Resumed, ToolResult, ToolStarted, Transition
from ..records import StopReason, Usage
from . import _content
from ._chat import ChatSpans, provider_name, reasoning_tokens
from ._setup import RUN_TRACING, TracedLoop, Tracing
from ._tools import ToolSpans, epoch_ns

if TYPE_CHECKING:
    from ..state import LoopState

log = logging.getLogger("boundloop.otel")

_W3C_TRACE_ID: Final = re.compile(r"[0-9a-f]{32}")
_MODEL_ERRORS: Final = frozenset({"model_api", "model_response"})


def _parent(state: LoopState, adopt_trace_id: bool) -> otel_context.Context | None:
    """The run span's parent: the caller's current span if any; else, for a trace id the run
    did not make (given by the caller, or stored by an earlier session), that trace, joined
    under a remote parent as a propagated context would be; else none (a new trace)."""
    if adopt_trace_id or trace.get_current_span().get_span_context().is_valid:
        return None
    if _W3C_TRACE_ID.fullmatch(state.trace_id) is None or not int(state.trace_id, 16):
        return None  # not a W3C trace id: the run gets a trace of its own
    remote = SpanContext(
        trace_id=int(state.trace_id, 16),
        span_id=int.from_bytes(os.urandom(8)) or 1,
        is_remote=True,
        trace_flags=TraceFlags(TraceFlags.SAMPLED),
    )
    return trace.set_span_in_context(NonRecordingSpan(remote))


def start_run(
    config: TracedLoop, state: LoopState, tracing: Tracing, *, adopt_trace_id: bool
) -> RunSpans | None:
    """The spans of a run that starts now; None (the run goes on untraced) if the provider fails."""
    try:
        return RunSpans(config, state, tracing, adopt_trace_id=adopt_trace_id)
    except Exception:  # telemetry never fails a run
        log.warning("could not start the run's span; the run is not traced", exc_info=True)
        return None


@final
class RunSpans:
    """The spans of one traced run (one session of it: a resume is a run span of its own)."""

    __slots__ = (
        "chat",
        "config",
        "content",
        "errors_before",
        "finish_reason",
        "parent",
        "path",
        "reasoning",
        "span",
        "state",
        "tools",
        "tracer",
        "tracing",
        "usage_before",
    )

    def __init__(
        self, config: TracedLoop, state: LoopState, tracing: Tracing, *, adopt_trace_id: bool
    ) -> None:
        self.config = config
        self.state = state
        self.tracing = tracing
        self.tracer = tracing.tracer
        self.content = config.trace_content
        self.span: Span = self.tracer.start_span(
            f"invoke_agent {config.spec.name}",
            context=_parent(state, adopt_trace_id),
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.provider.name": provider_name(config),
                "gen_ai.agent.name": config.spec.name,
                "gen_ai.request.model": config.spec.model,
                "gen_ai.request.max_tokens": config.spec.max_tokens,
                "gen_ai.conversation.id": state.task_id,
                **({} if config.spec.version is None else {"gen_ai.agent.version": config.spec.version}),
            },
        )
        own = self.span.get_span_context()
        if adopt_trace_id and own.is_valid:  # one id for the spans, the JSON-lines trace and exemplars
            state.trace_id = f"{own.trace_id:032x}"
        self.span.set_attribute("boundloop.trace_id", state.trace_id)
        self.parent = trace.set_span_in_context(self.span)
        self.path: list[str] = []
        self.finish_reason: str | None = None
        """The stop reason of this session's last response."""
        self.reasoning: int | None = None
        """This session's thinking tokens, when a response's usage reported them."""
        self.chat = ChatSpans(config, state, self.tracer, self.parent)
        """The `chat` spans; `chat.current` is the run context's `model_span` hook."""
        self.tools = ToolSpans(config, self.tracer, self.parent)
        """The `execute_tool` spans; `tools.current` is the run context's `tool_span` hook."""
        self.usage_before = dataclasses.replace(state.usage)
        self.errors_before = len(state.errors)

    @contextlib.contextmanager
    def current(self) -> Generator[None]:
        """The run span as the current span, in the run's task and the tasks it starts; its
        tracing the one a run it delegates to inherits (`run_tracing`)."""
        token = otel_context.attach(self.parent)
        tracing = RUN_TRACING.set(self.tracing)
        try:
            yield
        finally:
            RUN_TRACING.reset(tracing)
            otel_context.detach(token)

    def observe(self, event: Event) -> None:
        """Record an event on the spans; never raises."""
        try:
            if isinstance(event, Transition):
                self._transition(event)
            elif isinstance(event, ToolResult):
                self.tools.finish(event)
            elif isinstance(event, ToolStarted):
                self.tools.batch_at = event.at
            elif isinstance(event, Proposal):
                self._proposal(event)
            elif isinstance(event, Error):
                self._error(event)
            elif isinstance(event, Resumed):
                self.span.set_attribute("boundloop.resumed_from", event.from_phase)
        except Exception:  # telemetry never fails a run
            log.debug("could not record a %s event on the run's spans", event.kind, exc_info=True)

    def _transition(self, event: Transition) -> None:
        source, dest = event.source, event.dest
        self.path.append(f"{source}->{dest}")
        attributes: dict[str, AttributeValue] = {
            "boundloop.source": source,
            "boundloop.dest": dest,
            "boundloop.trigger": str(event.trigger),
        }
        guard = event.guard
        if guard is not None:
            attributes["boundloop.guard"] = guard
        self.span.add_event("transition", attributes, timestamp=epoch_ns(event.at))
        if dest == "propose":
            self.chat.propose_at = event.at

    def _proposal(self, event: Proposal) -> None:
        self.finish_reason = event.stop_reason
        thinking = reasoning_tokens(self.state.responses[-1])
        if thinking is not None:
            self.reasoning = (self.reasoning or 0) + thinking
        self.chat.finish(event)

    def _error(self, event: Error) -> None:
        at = epoch_ns(event.at)
        exception: dict[str, AttributeValue] = {
            "exception.type": event.type,
            "exception.message": event.message,
            "boundloop.error.kind": event.error_kind,
        }
        self.span.add_event("exception", exception, timestamp=at)
        if event.error_kind in _MODEL_ERRORS:  # the call failed or its response was unusable
            self.chat.fail(event, exception)

    def end(self, exc: BaseException | None) -> None:
        """Close the run span: outcome, usage of this session, path, and an error status for a
        run that failed or an exception that leaves `run()` (not for a cancellation)."""
        try:
            self.chat.end()
            self.tools.end()
            self._finish(exc)
        except Exception:  # telemetry never fails a run
            log.debug("could not record the end of the run on its span", exc_info=True)
        finally:
            self.span.end()

    def _finish(self, exc: BaseException | None) -> None:
        state = self.state
        span = self.span
        reason = state.stop_reason
        usage = _spent(state.usage, self.usage_before)
        attributes: dict[str, AttributeValue] = {
            "boundloop.stop_reason": str(reason),
            "boundloop.step": state.step,
            "boundloop.tool_calls": state.tool_calls,
            "boundloop.path": self.path,
            "gen_ai.usage.input_tokens": usage.input_tokens
            + usage.cache_read_input_tokens
            + usage.cache_creation_input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": usage.cache_read_input_tokens,
            "gen_ai.usage.cache_creation.input_tokens": usage.cache_creation_input_tokens,
        }
        if self.finish_reason is not None:
            attributes["gen_ai.response.finish_reasons"] = [self.finish_reason]
        if self.reasoning is not None:
            attributes["gen_ai.usage.reasoning.output_tokens"] = self.reasoning
        if usage.cost_usd is not None:  # None: the model has no price, the cost is not tracked
            attributes["boundloop.cost_usd"] = usage.cost_usd
        if self.content:
            attributes.update(self._run_content())
        span.set_attributes(attributes)
        error_type = self._error_type(exc)
        if error_type is not None:
            span.set_attribute("error.type", error_type)
            detail = state.stop_detail if self.content and state.stop_detail else None
            span.set_status(Status(StatusCode.ERROR, detail))

    def _error_type(self, exc: BaseException | None) -> str | None:
        """The run's `error.type`: the exception that leaves `run()`, else for a failed run the
        last exception this session recorded; None for anything else (a cancellation included)."""
        if exc is not None and not isinstance(exc, Exception):
            return None  # the application stopped the run: no error of the run's own
        if exc is not None:
            return type(exc).__qualname__
        if self.state.stop_reason is not StopReason.FAILED:
            return None
        errors = self.state.errors[self.errors_before :]
        return next((error.type for error in reversed(errors) if error.type), None) or "failed"

    def _run_content(self) -> dict[str, AttributeValue]:
        state = self.state
        redact = self.config.redactor
        content: dict[str, AttributeValue] = {
            "gen_ai.input.messages": _content.messages(state.messages[: state.opening], redact),
        }
        if state.answer is not None:
            content["gen_ai.output.messages"] = _content.output(state.answer, redact)
        if self.config.spec.system is not None:
            content["gen_ai.system_instructions"] = _content.system_instructions(
                self.config.spec.system, redact
            )
        if state.stop_detail:
            content["boundloop.stop_detail"] = state.stop_detail
        return content


def _spent(now: Usage, before: Usage) -> Usage:
    """What this session spent: a resumed run's usage carries the earlier sessions'."""
    return Usage(
        input_tokens=now.input_tokens - before.input_tokens,
        output_tokens=now.output_tokens - before.output_tokens,
        cache_read_input_tokens=now.cache_read_input_tokens - before.cache_read_input_tokens,
        cache_creation_input_tokens=now.cache_creation_input_tokens - before.cache_creation_input_tokens,
        cost_usd=None if now.cost_usd is None else now.cost_usd - (before.cost_usd or 0.0),
        cache_savings_usd=None
        if now.cache_savings_usd is None
        else now.cache_savings_usd - (before.cache_savings_usd or 0.0),
    )
