"""The typed records a `LoopState` is made of; `boundloop.state` re-exports them.

Slotted dataclasses; pydantic reads and writes them as part of `LoopState`'s JSON. The records
built for every tool call (`ToolCall`, `CallResult`, `Observation`), the turn and the response
(`ModelResponse`) are plain, like the events: a frozen dataclass's constructor sets each field
through `object.__setattr__`, which made a 3-tool turn ~4 % dearer. Nothing changes them after
creation; the rarer records stay frozen. They also take their fields positionally (in field
order): called with keywords, a class gets them as a dict built for the call (~2x the cost). The
loop builds each through its one factory (`ToolCall.of`, `CallResult.of`, `Turn.of`,
`Observation.of`, `ModelResponse.of`): a function called with keywords gets no dict, so the call
sites name every field and only the factory knows the order.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, final, get_args

if TYPE_CHECKING:
    from anthropic.types import ContentBlock, Message, ToolResultBlockParam
    from anthropic.types import Usage as SDKUsage

__all__ = [
    "CallResult",
    "Content",
    "DECISIONS",
    "Decision",
    "ErrorRecord",
    "Escalation",
    "Exceeded",
    "FAILED_OUTCOMES",
    "Limit",
    "ModelResponse",
    "OUTCOMES",
    "Observation",
    "Outcome",
    "PendingApproval",
    "Provenance",
    "RESUMABLE",
    "StopReason",
    "ToolCall",
    "Turn",
    "Usage",
    "call_digest",
    "empty_dict",
    "empty_list",
]


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
    TOOL_FAILURE = "tool_failure"
    INVALID_OUTPUT = "invalid_output"


RESUMABLE: Final = frozenset({StopReason.NEEDS_HUMAN, StopReason.CANCELLED})
"""The stops `resume` may continue (a run waiting for a human, a run a person cancelled); after
any other, nothing follows in the run's event log."""


def call_digest(call: str) -> str:
    """A call's identity as the repeat history keeps it: the SHA-256 (hex) of `tool NUL input
    JSON`, so a checkpoint holds no copy of the input (`redact_checkpoints` leaves it as is)."""
    return hashlib.sha256(call.encode("utf-8", "surrogatepass")).hexdigest()


class Limit(enum.StrEnum):
    """A limit of `Budget` that stops a run when spent; its value is the `Budget` field.

    Each member carries what the loop does at it: `stop`, the stop reason it ends the run
    with; `final_answer`, whether `Budget(on_exhausted="final_answer")` allows one last call
    without tools after it (time, tokens and cost are hard ceilings: no call is made after
    them); `breaker`, whether it opens the circuit breaker (`needs_human`) rather than spending
    a budget; `counter`, what of the run it compares with the field (a `LoopState` attribute,
    `usage.` one of `Usage`, or `clock`: the run's elapsed time).
    """

    stop: StopReason
    final_answer: bool
    breaker: bool
    counter: str

    def __new__(cls, field: str, stop: StopReason, counter: str, final_answer: bool, breaker: bool) -> Limit:
        member = str.__new__(cls, field)
        member._value_ = field
        member.stop = stop
        member.counter = counter
        member.final_answer = final_answer
        member.breaker = breaker
        return member

    # field, stop, counter, final_answer, breaker
    MAX_STEPS = ("max_steps", StopReason.MAX_STEPS, "step", True, False)
    MAX_TOOL_CALLS = ("max_tool_calls", StopReason.MAX_TOOL_CALLS, "tool_calls", True, False)
    MAX_SERVER_TOOL_USES = (
        "max_server_tool_uses",
        StopReason.MAX_TOOL_CALLS,
        "usage.total_server_tool_uses",
        True,
        False,
    )
    TIMEOUT_S = ("timeout_s", StopReason.TIMEOUT, "clock", False, False)
    MAX_TOTAL_TOKENS = ("max_total_tokens", StopReason.TOKEN_BUDGET, "usage.total_tokens", False, False)
    MAX_COST_USD = ("max_cost_usd", StopReason.COST_BUDGET, "usage.cost_usd", False, False)
    MAX_CONSECUTIVE_TOOL_ERRORS = (
        "max_consecutive_tool_errors",
        StopReason.NEEDS_HUMAN,
        "consecutive_tool_errors",
        False,
        True,
    )
    MAX_REPEATED_CALLS = ("max_repeated_calls", StopReason.NEEDS_HUMAN, "repeated_calls", False, True)

    @property
    def field(self) -> str:
        """The `Budget` field that sets it."""
        return self.value

    @classmethod
    def of(cls, field: str) -> Limit:
        """The limit the `Budget` field `field` sets (each member is named after its field)."""
        return cls[field.upper()]

    @classmethod
    def stopping(cls, reason: str | None) -> Limit | None:
        """The budget (not a breaker) whose stop reason is `reason`, or None."""
        for limit in cls:
            if not limit.breaker and limit.stop == reason:
                return limit
        return None


Decision: TypeAlias = Literal["execute", "deny", "block", "escalate", "approve", "repeat", "human_approved"]
"""What validation decides for a call (`Turn.decisions`); `human_approved`: a human approved it
on resume, so it runs without asking again once every other check passes again."""

DECISIONS: Final[frozenset[str]] = frozenset(get_args(Decision))

Outcome: TypeAlias = Literal[
    "ok", "error", "denied", "invalid", "timeout", "cancelled", "repeated", "invalid_result"
]
"""How one tool_use was answered; also the `outcome` label of `boundloop_tool_calls_total`."""

OUTCOMES: tuple[Outcome, ...] = (
    "ok",
    "error",
    "denied",
    "invalid",
    "timeout",
    "cancelled",
    "repeated",
    "invalid_result",
)


def _is_error(outcome: Outcome) -> bool:
    """Whether a call's result with this outcome is an error to the model: all but `ok` and `repeated`."""
    return outcome not in ("ok", "repeated")


FAILED_OUTCOMES: frozenset[Outcome] = frozenset({"error", "invalid", "timeout", "denied", "invalid_result"})
"""Outcomes that count towards the circuit breaker."""

Content: TypeAlias = str | list[dict[str, Any]]
"""A tool result's content: text, or Messages API content blocks."""


def empty_list() -> list[Any]:
    """A default factory: `list[str]` as a factory is a typing alias whose call costs 10x `[]`."""
    return []


def empty_dict() -> dict[Any, Any]:
    """A default factory (see `empty_list`)."""
    return {}


@final
@dataclasses.dataclass(slots=True)
class ToolCall:
    """One `tool_use` block the model proposed, as the policy sees it."""

    id: str
    name: str
    input: dict[str, Any]
    step: int
    """The model call (1-based) that proposed it."""

    @classmethod
    def of(cls, *, id: str, name: str, input: dict[str, Any], step: int) -> ToolCall:
        """The run's one way to build a `ToolCall` (one a call), by position."""
        return cls(id, name, input, step)


@final
@dataclasses.dataclass(slots=True)
class CallResult:
    """The answer to one tool_use block."""

    call: ToolCall
    outcome: Outcome
    content: Content
    duration_s: float = 0.0
    attempts: int = 0
    """Tool function invocations (0 when the call was not executed)."""
    by_human: bool = False
    """Decided by a human on resume: a denial is not the model's failure (no breaker count)."""
    reason: str | None = None
    """A human's denial: the reason they gave (None: denied without one)."""

    @classmethod
    def of(cls, *, call: ToolCall, outcome: Outcome, content: Content, attempts: int = 0) -> CallResult:
        """The run's one way to build a `CallResult` (one a call), by position; a call that ran
        gets its duration and attempts, and a human's decision its `by_human`, once known."""
        return cls(call, outcome, content, 0.0, attempts)

    @property
    def is_error(self) -> bool:
        """Whether the model sees this result as an error."""
        return _is_error(self.outcome)

    def to_block(self) -> ToolResultBlockParam:
        """The `tool_result` block answering the call."""
        block: ToolResultBlockParam = {
            "type": "tool_result",
            "tool_use_id": self.call.id,
            "content": self.content,  # type: ignore[typeddict-item]  # pyright: ignore[reportAssignmentType]
        }
        if self.is_error:
            block["is_error"] = True
        return block


@final
@dataclasses.dataclass(slots=True)
class Turn:
    """The scratch of the latest response: its tool calls and their answers, by block index."""

    calls: list[ToolCall]
    keys: list[str]
    """`canonical(name, input)` of each call (a digest): its identity for the repeat history."""
    answers: list[CallResult | None]
    """Decided in validate (denied, repeated, ...), filled in act; None: to run, or not decided."""
    decisions: list[str] = dataclasses.field(default_factory=empty_list)
    """What validation decided for each call: execute, deny, block, escalate, approve, repeat."""
    invoked: list[int] = dataclasses.field(default_factory=empty_list)
    """Indexes of calls whose tool function was invoked: their effect may have happened."""
    same_as: dict[int, int] = dataclasses.field(default_factory=empty_dict)
    """Identical calls of one batch: copy index -> the index of the call that runs for both."""
    answered: bool = False
    """The calls' tool_result message is in the transcript."""
    awaiting_human: bool = False
    """The answers in the transcript are provisional: the run waits for a human to decide."""
    final: bool = False
    """This response is the final-answer call at a spent budget."""

    @classmethod
    def of(cls, *, calls: list[ToolCall], keys: list[str], final: bool) -> Turn:
        """The run's one way to build a `Turn` (one a response), by position: no answer yet."""
        turn = cls(calls, keys, [None] * len(calls))
        turn.final = final
        return turn

    @property
    def open(self) -> bool:
        """The response has tool_use blocks not yet answered in the transcript."""
        return bool(self.calls) and not self.answered


@final
@dataclasses.dataclass(slots=True)
class Observation:
    """One answered tool_use: what was called and what came back."""

    step: int
    tool_use_id: str
    tool: str
    input: dict[str, Any]
    outcome: Outcome
    content: Content
    attempts: int = 0
    """Tool function invocations (0: answered without running)."""
    by_human: bool = False
    """Decided by a human on resume (an approval or a denial), not by the loop."""

    @classmethod
    def of(cls, result: CallResult) -> Observation:
        """The observation of an answered call."""
        call = result.call
        # Positionally, in field order (step, tool_use_id, tool, input, outcome, content,
        # attempts, by_human): a class called with keywords builds a dict for them, per call.
        return cls(
            call.step,
            call.id,
            call.name,
            call.input,
            result.outcome,
            result.content,
            result.attempts,
            result.by_human,
        )

    @property
    def is_error(self) -> bool:
        """Whether the model saw this result as an error (its `tool_result` said `is_error`)."""
        return _is_error(self.outcome)


@final
@dataclasses.dataclass(slots=True)
class ModelResponse:
    """A model response as the run keeps it: what the API sent, as JSON, without the SDK's objects.

    The content is the transcript's assistant turn made from the response: the same list, not a
    copy. `content` and `usage` read as the SDK's objects (built on each read), `message()` as
    the whole SDK `Message`, `json()` as the JSON the API sent.
    """

    id: str
    model: str
    stop_reason: str | None
    """As sent: a value this SDK does not know stays as it is."""
    content_json: list[dict[str, Any]]
    """The content blocks as the API sent them (the transcript holds this same list)."""
    usage_json: dict[str, Any]
    """`usage` as the API sent it."""
    stop_sequence: str | None = None
    extra_json: dict[str, Any] | None = None
    """The envelope's other fields as the API sent them (`container`, `stop_details`, ...); None
    when it sent none."""

    @classmethod
    def of(
        cls,
        *,
        id: str,
        model: str,
        stop_reason: str | None,
        stop_sequence: str | None,
        content_json: list[dict[str, Any]],
        usage_json: dict[str, Any],
        extra_json: dict[str, Any] | None,
    ) -> ModelResponse:
        """The run's one way to build a `ModelResponse` (one a response), by position."""
        return cls(id, model, stop_reason, content_json, usage_json, stop_sequence, extra_json)

    @property
    def content(self) -> list[ContentBlock]:
        """The content blocks as the SDK's objects."""
        return self.message().content

    @property
    def usage(self) -> SDKUsage:
        """`usage` as the SDK's object."""
        return self.message().usage

    @property
    def container_id(self) -> str | None:
        """The id of the response's `container` (code execution's sandbox), when it has one."""
        container: object = (self.extra_json or {}).get("container")
        found: object = container.get("id") if isinstance(container, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
        return found if isinstance(found, str) and found else None

    def json(self) -> dict[str, Any]:
        """The response as the JSON the API sent (a checkpoint holds this)."""
        return {
            "id": self.id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": self.content_json,
            "stop_reason": self.stop_reason,
            "stop_sequence": self.stop_sequence,
            "usage": self.usage_json,
            **(self.extra_json or {}),
        }

    def message(self) -> Message:
        """The response as the SDK's `Message`, built leniently as the SDK builds one it receives
        (`model_construct`: a stop_reason or a block type it does not know stays as sent)."""
        from anthropic.types import Message

        return Message.model_construct(**self.json())


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ErrorRecord:
    """A model API failure, an invalid action or a tool error; secrets redacted."""

    kind: str
    """`model_api`, `model_response`, `invalid_action`, `tool_error`, `tool_timeout`, `exception`, ..."""
    step: int
    message: str
    tool: str | None = None
    type: str | None = None
    """The exception's class name, for exceptions."""
    status_code: int | None = None
    request_id: str | None = None


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PendingApproval:
    """A tool call waiting for a human decision."""

    tool_use_id: str
    tool: str
    input: dict[str, Any]
    step: int


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Escalation:
    """The model asked for a human through `Policy(escalation_tool=...)`."""

    tool_use_id: str
    reason: str
    """The model's stated reason (redacted)."""
    step: int


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Exceeded:
    """A limit found spent: the `Budget` field, its configured value and what was used."""

    limit: str
    """`max_steps`, `max_tool_calls`, `max_server_tool_uses`, `timeout_s`, `max_total_tokens`,
    `max_cost_usd`, `max_consecutive_tool_errors` or `max_repeated_calls`."""
    value: float
    used: float
    pool: str | None = None
    """The budget pool whose ceiling it is (`max_cost_usd`, `max_total_tokens`); None: the run's
    own budget, or its delegation tree's."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Provenance:
    """What a run was made with, for replay: the model, hashes, and the settings replay needs."""

    model: str
    system_sha256: str
    tools_sha256: str
    policy_sha256: str
    tools: list[dict[str, Any]] = dataclasses.field(default_factory=empty_list)
    """The tool manifest (name, description, input_schema), as the model saw it."""
    policy: dict[str, Any] = dataclasses.field(default_factory=empty_dict)
    """The policy's decisions as data (hooks by qualified name)."""
    budget: dict[str, Any] = dataclasses.field(default_factory=empty_dict)
    """The `Budget` fields."""
    settings_sha256: str | None = None
    """The hash of the run's `ModelSettings` as canonical JSON; None: the run has none."""
    output_sha256: str | None = None
    """The hash of the structured output's JSON schema (`LoopSpec.output_schema`); None: none."""
    fallback_model: str | tuple[str, ...] | None = None
    """The model, or the models in order, a refused request is retried on, once each
    (`AgentLoop(fallback_model=...)`): one model is its name, as before routes; with `model`,
    the run's model route (`model_route`)."""
    version: str | None = None
    """The loop's version (`AgentLoop(version=...)`, a contract's `version`)."""
    cache_sha256: str | None = None
    """The hash of the loop's `cache` setting; None: the default, `"auto"`."""
    platform: str = "anthropic"
    """Where the loop's client runs (`boundloop.platforms.Platform`): `"anthropic"` (the Claude
    API), `"bedrock"`, `"bedrock_mantle"`, `"vertex"`, `"foundry"`, `"aws"`, `"google_cloud"`."""

    @property
    def model_route(self) -> tuple[str, ...]:
        """The run's model, then its fallback models in the order a refusal tries them."""
        fallbacks = self.fallback_model
        if fallbacks is None:
            return (self.model,)
        return (self.model, fallbacks) if isinstance(fallbacks, str) else (self.model, *fallbacks)


@final
@dataclasses.dataclass(slots=True, kw_only=True)
class Usage:
    """Tokens and cost summed over every model call of a run."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cost_usd: float | None = 0.0
    """None: not tracked, the model has no price (`boundloop.prices.UnpricedModelWarning`)."""
    cache_savings_usd: float | None = 0.0
    """What prompt caching saved: the cache reads' discount minus the cache writes' premium over
    the plain input rate, at the run's prices (`Price.cache_savings`); negative when the writes
    cost more than the reads saved. None when the model has no price."""
    server_tool_uses: dict[str, int] = dataclasses.field(default_factory=empty_dict)
    """Server tool uses by kind (`web_search`, `web_fetch`, ...), from `usage.server_tool_use`."""

    @property
    def total_server_tool_uses(self) -> int:
        """Server tool uses of every kind: what `Budget.max_server_tool_uses` limits."""
        return sum(self.server_tool_uses.values())

    @property
    def total_tokens(self) -> int:
        """All tokens billed: input, output and both cache kinds."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_input_tokens
            + self.cache_creation_input_tokens
        )

    def to_dict(self) -> dict[str, Any]:
        """The usage as a JSON object."""
        return dataclasses.asdict(self)
