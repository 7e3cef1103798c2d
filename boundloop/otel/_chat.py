"""A traced run's `chat {model}` spans: one per model call, always boundloop's, current while the call runs.

The model call runs in `current(request)` (the run context's `model_span` hook), which starts the
call's span with the request's attributes (`_request.request_attributes`, `server.*`) and makes it
the current span, so the anthropic SDK's own span of the call (when the SDK traces) is its child,
and so are the HTTP client's. The call's `proposal` event (`finish`) adds the response's attributes
and ends it; an `error` event of a failed call or an unusable response (`fail`) ends it with an
error status. A span whose call never reached either (cancelled, or an exception that leaves
`run()`) ends with the run. Telemetry never fails a run: a failure here is logged and dropped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Generator, Mapping
from contextvars import Token
from typing import TYPE_CHECKING, final

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from ..events import Error, Proposal
from ..platforms import FEATURES
from . import _content
from ._request import request_attributes, server_attributes
from ._setup import TracedLoop
from ._tools import epoch_ns

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from ..records import ModelResponse
    from ..state import LoopState

log = logging.getLogger("boundloop.otel")


def provider_name(config: TracedLoop) -> str:
    """`gen_ai.provider.name`: the conventions' name for the provider the loop's client calls
    (`anthropic`, `aws.bedrock`, `gcp.vertex_ai`: `boundloop.platforms.FEATURES`)."""
    return FEATURES[config.platform].provider_name


def reasoning_tokens(response: ModelResponse) -> int | None:
    """The response's thinking tokens, when its usage reports them (`output_tokens_details`)."""
    details: object = response.usage_json.get("output_tokens_details")
    tokens: object = details.get("thinking_tokens") if isinstance(details, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None


@final
@dataclasses.dataclass(slots=True)
class _Running:
    """The span of a model call that started, until its `proposal` or `error` event."""

    span: Span
    end: int | None = None
    """When the call returned or raised (epoch ns)."""
    raised: BaseException | None = None
    """What the call raised, if it did."""


@final
class ChatSpans:
    """The `chat` spans of one traced run (one session of it)."""

    __slots__ = ("config", "parent", "propose_at", "running", "server", "state", "tracer")

    def __init__(
        self, config: TracedLoop, state: LoopState, tracer: Tracer, parent: otel_context.Context
    ) -> None:
        self.config = config
        self.state = state
        self.tracer = tracer
        self.parent = parent
        """The run span's context: each call's span is its child."""
        self.server = server_attributes(config.client)
        self.propose_at: float | None = None
        """When the run last entered `propose` (the start of a span made from an event alone)."""
        self.running: _Running | None = None

    def _start(self, attributes: Mapping[str, AttributeValue], start: int | None) -> Span:
        model = self.config.spec.model
        return self.tracer.start_span(
            f"chat {model}",
            context=self.parent,
            kind=SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": provider_name(self.config),
                "gen_ai.request.model": model,
                "gen_ai.conversation.id": self.state.task_id,
                **self.server,
                **attributes,
            },
            start_time=start,
        )

    @contextlib.contextmanager
    def current(self, request: Mapping[str, object]) -> Generator[None]:
        """The call's span as the current span while the model call runs."""
        running: _Running | None = None
        token: Token[otel_context.Context] | None = None
        try:
            self.end()  # a call that never got its event (it cannot happen; never leak a span)
            running = self.running = _Running(self._start(request_attributes(request), None))
            token = otel_context.attach(trace.set_span_in_context(running.span, self.parent))
        except Exception:  # telemetry never fails a run: the call runs under the run span
            log.debug("could not start the span of a model call", exc_info=True)
        try:
            yield
        except BaseException as exc:
            if running is not None:
                running.raised = exc
            raise
        finally:
            if running is not None:
                running.end = time.time_ns()
            if token is not None:
                otel_context.detach(token)

    def _take(self, event_at: float) -> tuple[Span, int] | None:
        running, self.running = self.running, None
        if running is None:
            return None
        return running.span, running.end if running.end is not None else epoch_ns(event_at)

    def finish(self, event: Proposal) -> None:
        """A call's `proposal` event: the response's attributes on its span, which ends."""
        state = self.state
        response = state.responses[-1]  # recorded before its event
        cache_read = event.cache_read_input_tokens
        cache_creation = event.cache_creation_input_tokens
        attributes: dict[str, AttributeValue] = {
            "boundloop.step": event.step,
            "gen_ai.response.id": response.id,
            "gen_ai.response.model": response.model,
            # The conventions count every input token; Anthropic's input_tokens excludes the cache.
            "gen_ai.usage.input_tokens": event.input_tokens + cache_read + cache_creation,
            "gen_ai.usage.output_tokens": event.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": cache_read,
            "gen_ai.usage.cache_creation.input_tokens": cache_creation,
        }
        thinking = reasoning_tokens(response)
        if thinking is not None:
            attributes["gen_ai.usage.reasoning.output_tokens"] = thinking
        if event.stop_reason is not None:
            attributes["gen_ai.response.finish_reasons"] = [event.stop_reason]
        if event.final_answer:
            attributes["boundloop.final_answer"] = True
        if self.config.trace_content:
            redact = self.config.redactor
            attributes["gen_ai.input.messages"] = _content.messages(state.messages[:-1], redact)
            attributes["gen_ai.output.messages"] = _content.output(response.content_json, redact)
            if self.config.spec.system is not None:
                attributes["gen_ai.system_instructions"] = _content.system_instructions(
                    self.config.spec.system, redact
                )
        taken = self._take(event.at)
        if taken is None:  # its call ran outside the hook: the span from the event alone
            span = self._start(
                {"gen_ai.request.max_tokens": self.config.spec.max_tokens},
                epoch_ns(event.at - event.duration_s),
            )
            end = epoch_ns(event.at)
        else:
            span, end = taken
        span.set_attributes(attributes)
        span.end(end_time=end)

    def fail(self, event: Error, exception: Mapping[str, AttributeValue]) -> None:
        """A failed call, or one whose response is unusable: its span ends with an error status."""
        status_code = event.status_code
        error_type = str(status_code) if status_code is not None else event.type
        at = epoch_ns(event.at)
        taken = self._take(event.at)
        if taken is None:
            start = self.propose_at if self.propose_at is not None else event.at
            span, end = self._start({}, epoch_ns(start)), at
        else:
            span, end = taken
        span.set_attributes({"boundloop.step": event.step, "error.type": error_type})
        span.add_event("exception", exception, timestamp=at)
        span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=end)

    def end(self) -> None:
        """End the span of a call that got no event: an error status when the call raised an
        exception (not a cancellation: the application or the run's deadline stopped it)."""
        running, self.running = self.running, None
        if running is None:
            return
        raised = running.raised
        if isinstance(raised, Exception):
            running.span.set_attribute("error.type", type(raised).__qualname__)
            running.span.set_status(Status(StatusCode.ERROR))
        running.span.end(end_time=running.end)
