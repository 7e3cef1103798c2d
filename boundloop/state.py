"""The values a run is made of: stop reasons, budgets, usage, trace events, state and result."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Literal, cast, final

import pydantic
from anthropic.types import Message, MessageParam

from . import errors
from .model import parse_message
from .trace import TraceEvent, json_default, write_trace

JSON = dict[str, Any]


class StopReason(enum.StrEnum):
    """Why a run ended: an outcome returned in `LoopResult`, never a string match on prose."""

    COMPLETED = "completed"
    FAILED = "failed"
    REFUSED = "refused"
    NEEDS_HUMAN = "needs_human"
    CANCELLED = "cancelled"
    POLICY_BLOCKED = "policy_blocked"
    EVIDENCE_MISSING = "evidence_missing"
    MAX_STEPS = "max_steps"
    MAX_TOOL_CALLS = "max_tool_calls"
    TIMEOUT = "timeout"
    TOKEN_BUDGET = "token_budget"
    COST_BUDGET = "cost_budget"
    TRUNCATED = "truncated"
    CONTEXT_EXCEEDED = "context_exceeded"


BUDGET_STOPS: Final = frozenset(
    {
        StopReason.MAX_STEPS,
        StopReason.MAX_TOOL_CALLS,
        StopReason.TIMEOUT,
        StopReason.TOKEN_BUDGET,
        StopReason.COST_BUDGET,
    }
)


_COUNTS: Final = frozenset(
    {
        "max_steps",
        "max_tool_calls",
        "max_total_tokens",
        "max_consecutive_tool_errors",
        "max_repeated_calls",
        "max_tool_retries",
    }
)
"""Budget fields that count something: ints only (a 1.5 retry limit is a mistake)."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Budget:
    """Hard limits of one run. `max_steps` is required: there is no unbounded loop."""

    max_steps: int
    """Model calls allowed in the run (pause_turn and continuations count)."""
    max_tool_calls: int | None = None
    """Tool executions allowed in the run; each retry attempt counts."""
    timeout_s: float | None = None
    """Wall clock for the whole run, enforced with an anyio cancel scope."""
    max_total_tokens: int | None = None
    """Input + output + cache tokens over all model calls, from the API's `usage`."""
    max_cost_usd: float | None = None
    """Cost from `usage` and the price table; needs a known price for the model."""
    max_consecutive_tool_errors: int = 2
    """Failing tool results in a row that open the circuit breaker (`needs_human`)."""
    max_repeated_calls: int = 2
    """Repeats of an earlier successful call tolerated; one more stops the run (`needs_human`)."""
    max_tool_retries: int = 0
    """Retries of a handler that raised `RetryableToolError`."""
    tool_timeout_s: float | None = None
    """Default per-tool timeout when the tool sets none."""
    retry_backoff_s: float = 0.1
    """First retry delay; doubles on each further attempt."""
    on_exhausted: Literal["stop", "final_answer"] = "stop"
    """`final_answer`: when `max_steps` or `max_tool_calls` is spent, one last model call
    without tools (`tool_choice: none`) for the best answer; the stop reason stays the budget's.
    Time, tokens and cost are hard ceilings: no call is made after them."""

    def __post_init__(self) -> None:
        def positive(name: str, value: float | None, *, allow_zero: bool = False) -> None:
            if value is None:
                return
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise errors.ConfigurationError(f"Budget.{name} must be a number, got {value!r}")
            if name in _COUNTS and not isinstance(value, int):
                raise errors.ConfigurationError(f"Budget.{name} counts: it must be an int, got {value!r}")
            if math.isnan(value) or value < 0 or (value == 0 and not allow_zero):
                raise errors.ConfigurationError(f"Budget.{name} must be > 0, got {value!r}")

        if not isinstance(self.max_steps, int) or isinstance(self.max_steps, bool):
            raise errors.ConfigurationError(f"Budget.max_steps must be an int, got {self.max_steps!r}")
        positive("max_steps", self.max_steps)
        positive("max_tool_calls", self.max_tool_calls, allow_zero=True)
        positive("timeout_s", self.timeout_s)
        positive("max_total_tokens", self.max_total_tokens)
        positive("max_cost_usd", self.max_cost_usd)
        positive("max_consecutive_tool_errors", self.max_consecutive_tool_errors)
        positive("max_repeated_calls", self.max_repeated_calls, allow_zero=True)
        positive("max_tool_retries", self.max_tool_retries, allow_zero=True)
        positive("tool_timeout_s", self.tool_timeout_s)
        positive("retry_backoff_s", self.retry_backoff_s, allow_zero=True)
        if self.on_exhausted not in ("stop", "final_answer"):
            raise errors.ConfigurationError(
                f"Budget.on_exhausted must be 'stop' or 'final_answer', got {self.on_exhausted!r}"
            )


@final
@dataclasses.dataclass(slots=True, kw_only=True)
class Usage:
    """Tokens and cost summed over every model call of a run."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def total_tokens(self) -> int:
        """All tokens billed: input, output and both cache kinds."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_input_tokens
            + self.cache_creation_input_tokens
        )

    def to_dict(self) -> JSON:
        """The usage as a JSON object."""
        return dataclasses.asdict(self)


@final
@dataclasses.dataclass(slots=True, kw_only=True)
class LoopState:
    """Everything a run knows, outside the model: JSON-serialisable, enough to resume or replay."""

    task_id: str
    trace_id: str
    goal: str
    started_at: float
    """Epoch seconds."""
    step: int = 0
    """Model calls made."""
    tool_calls: int = 0
    """Tool executions made (retry attempts included)."""
    usage: Usage = dataclasses.field(default_factory=Usage)
    messages: list[MessageParam] = dataclasses.field(default_factory=list[MessageParam])
    """The transcript, as Messages API params; assistant turns exactly as received."""
    observations: list[JSON] = dataclasses.field(default_factory=list[JSON])
    """One record per answered tool_use: step, tool, input, outcome, content."""
    errors: list[JSON] = dataclasses.field(default_factory=list[JSON])
    """Model API failures, invalid actions and tool errors, in order."""
    pending_approvals: list[JSON] = dataclasses.field(default_factory=list[JSON])
    """Tool calls waiting for a human decision (`needs_human`)."""
    responses: list[Message] = dataclasses.field(default_factory=list[Message])
    """Every model response as received, for replay."""
    consecutive_tool_errors: int = 0
    repeated_calls: int = 0
    continuations: int = 0
    """max_tokens continuations and evidence nudges used."""
    stop_reason: StopReason | None = None
    stop_detail: str | None = None
    """Why, in one line: the limit hit, the blocked tool, the API error."""
    answer: str | None = None
    exceeded: JSON | None = None
    """For a budget stop: `{"limit": "max_steps", "value": 8, "used": 8}`."""

    def to_dict(self) -> JSON:
        """The state as a JSON object."""
        raw = {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}
        raw["usage"] = self.usage.to_dict()
        raw["stop_reason"] = None if self.stop_reason is None else str(self.stop_reason)
        raw["messages"] = [_plain(message) for message in self.messages]
        raw["responses"] = [_dump(response) for response in self.responses]
        return raw

    def to_json(self) -> str:
        """The state as a JSON string (`from_json` reads it back)."""
        return json.dumps(self.to_dict(), default=json_default)

    @classmethod
    def from_json(cls, text: str) -> LoopState:
        """Rebuild a state written by `to_json`."""
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ValueError("LoopState JSON must be an object")
        fields = cast(dict[str, Any], raw)
        fields["usage"] = Usage(**fields.get("usage", {}))
        fields["responses"] = [parse_message(raw) for raw in fields.get("responses", [])]
        if fields.get("stop_reason") is not None:
            fields["stop_reason"] = StopReason(fields["stop_reason"])
        return cls(**fields)


def _dump(value: pydantic.BaseModel) -> JSON:
    # exclude_unset: exactly the fields the API sent, as the SDK itself sends them back.
    return value.model_dump(mode="json", exclude_unset=True)


def _plain(message: MessageParam) -> JSON:
    """A message with any SDK content blocks dumped to dicts."""
    content = message["content"]
    if isinstance(content, str):
        return dict(message)
    return {
        **message,
        "content": [_dump(block) if isinstance(block, pydantic.BaseModel) else block for block in content],
    }


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class LoopResult:
    """The outcome of `AgentLoop.run`: a typed stop reason, the answer, the state and the trace."""

    stop_reason: StopReason
    answer: str | None
    state: LoopState
    trace: Sequence[TraceEvent]

    @property
    def messages(self) -> list[MessageParam]:
        """The full transcript as Messages API params."""
        return self.state.messages

    @property
    def usage(self) -> Usage:
        """Tokens and cost of the run."""
        return self.state.usage

    @property
    def ok(self) -> bool:
        """True when the run completed."""
        return self.stop_reason is StopReason.COMPLETED

    def unwrap(self) -> str:
        """Return the answer of a completed run.

        Returns:
            The final answer text.

        Raises:
            BudgetExceeded: the run stopped at a budget.
            RunFailed, Refused, NeedsHuman, RunCancelled, PolicyBlocked, EvidenceMissing,
                Truncated, ContextExceeded: the run stopped for that reason.
        """
        if self.stop_reason is StopReason.COMPLETED:
            return self.answer or ""
        raise errors.error_for(self)

    def write_trace(self, path: str | Path) -> None:
        """Write the trace as JSON lines, one event per line."""
        write_trace(self.trace, path)

    def to_dict(self) -> JSON:
        """The result as a JSON object (`boundloop demo --json`)."""
        return {
            "stop_reason": str(self.stop_reason),
            "answer": self.answer,
            "usage": self.usage.to_dict(),
            "state": self.state.to_dict(),
            "trace": [event.to_dict() for event in self.trace],
        }

    def to_json(self, *, indent: int | None = None) -> str:
        """The result as a JSON string."""
        return json.dumps(self.to_dict(), default=json_default, indent=indent)
