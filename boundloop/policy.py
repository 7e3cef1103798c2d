"""Policy: what the model may do, what needs a human, and what counts as done.

A policy's signal handlers route each response by its API stop_reason: `SignalHandler`,
`SignalContext`, `Route` and `Verdict` are written here, beside it (`boundloop.signals` holds
the built-in handlers and re-exports them).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import types
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias, cast, final

from .errors import ConfigurationError
from .records import StopReason, ToolCall
from .state import ZERO, LoopState

if TYPE_CHECKING:
    from anthropic.types import Message

__all__ = [
    "ApprovalDecision",
    "Approver",
    "Policy",
    "Route",
    "SignalContext",
    "SignalHandler",
    "SuccessCheck",
    "ToolErrors",
    "Verdict",
    "answer_text",
]

_API_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")

ApprovalDecision: TypeAlias = bool | str
"""A decision on a call that needs approval: `True` approves it; `False` denies it; a string
denies it, with that string as the reason the model sees. Nothing else approves."""
Approver: TypeAlias = Callable[[ToolCall], Awaitable[ApprovalDecision]]
"""`Policy.approve`: `async def approve(call: ToolCall) -> bool | str`, asked once per call that
needs approval, after every other check passed. Only `True` runs the call; `False` or a reason
string answers it as denied, the string being the reason the model sees ("yes" too). Any
other value (None, 1, ...) raises `ConfigurationError`: the run ends as `failed`, the error
recorded in `state.errors`, and no call of the batch runs."""
SuccessCheck = Callable[[LoopState, "str | None"], bool]


class Verdict(enum.Enum):
    """Where a signal handler sends the run (`Route.verdict`)."""

    TOOL_CALLS = "tool_calls"
    """Validate the response's tool calls and run the allowed ones."""
    RESUME = "resume"
    """Another model turn without tools: pause_turn, a max_tokens continuation, a nudge."""
    FINAL = "final"
    """The answer is accepted: the run completes."""
    STOP = "stop"
    """The run stops with `Route.stop_reason`."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """Where a response sends the run."""

    verdict: Verdict
    """`TOOL_CALLS`, `RESUME`, `FINAL` or `STOP`."""
    stop_reason: StopReason | None = None
    detail: str | None = None
    nudge: str | None = None
    """For RESUME: a user message to send first (e.g. which evidence is missing)."""
    continuation: bool = False
    """For RESUME: counts against `Policy.max_continuations`."""

    def __post_init__(self) -> None:
        if not isinstance(self.verdict, Verdict):  # pyright: ignore[reportUnnecessaryIsInstance]
            raise ValueError(f"Route.verdict must be a Verdict, not {self.verdict!r}")
        if self.verdict is Verdict.STOP and (
            self.stop_reason is None or self.stop_reason is StopReason.COMPLETED
        ):
            raise ValueError("a STOP route needs a stop_reason other than completed")


@final
@dataclasses.dataclass(frozen=True, slots=True)
class SignalContext:
    """What a signal handler may consult besides the response."""

    policy: Policy
    state: LoopState
    earlier_text: str = ""
    """Text of the same assistant turn before this response (a paused or cut-off turn)."""

    def answer(self, message: Message) -> str:
        """The whole turn's text: what came before a pause or continuation, then this response."""
        return self.earlier_text + answer_text(message)


def answer_text(message: Message) -> str:
    """The text blocks of a response, joined: the answer, never a control signal."""
    return "".join(block.text for block in message.content if block.type == "text")


class SignalHandler(Protocol):
    """`Policy.signal_handlers`' handler of one API stop_reason: `(message, ctx) -> Route`
    (`boundloop.signals`: `stop`, `Route`, the built-in handlers)."""

    def __call__(self, message: Message, ctx: SignalContext, /) -> Route:
        """The route of a response that stopped for this stop_reason."""
        ...


ToolErrors: TypeAlias = Literal["report", "raise", "stop"]
"""What a failing tool does: report it to the model, raise it from `run()`, or stop the run."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True, init=False)
class Policy:
    """Decisions about actions and completion; limits live in `Budget`."""

    allowed: frozenset[str] | None = None
    """If given, only these tools may run; others are answered with an error."""
    forbidden: frozenset[str] = frozenset()
    """Never run. Default: the run stops with `policy_blocked`."""
    requires_approval: frozenset[str] = frozenset()
    """Need a human: `approve` decides in-process, else the run stops with `needs_human`."""
    required_evidence: frozenset[str] = frozenset()
    """Tools that must have succeeded before a final answer is accepted."""
    success: SuccessCheck | None = None
    """`success(state, answer)`: an extra completion check on a final answer."""
    approve: Approver | None = None
    """`async (ToolCall) -> bool | str` deciding approval-gated calls in-process: only `True`
    approves; `False` or a reason string denies (see `Approver`)."""
    on_forbidden: Literal["stop", "report"] = "stop"
    on_missing_evidence: Literal["stop", "continue"] = "stop"
    on_max_tokens: Literal["stop", "continue"] = "stop"
    on_unknown_tool: Literal["stop", "report"] = "report"
    """A tool name the model invents: `report` answers it as unknown and goes on; `stop` ends
    the run `failed` before any call of the batch runs."""
    max_continuations: int = dataclasses.field(default=2, metadata=ZERO)
    """max_tokens continuations / evidence nudges allowed in one run."""
    escalation_tool: str | None = None
    """A tool the model calls to ask a human (input: `reason`): the run stops with
    `needs_human` and the reason; `AgentLoop.resume(task_id, reply=...)` answers it."""
    require_approval_for_destructive: bool = False
    """Every side-effecting tool needs a human, as in `requires_approval`: the `side_effect=True`
    tools and the MCP tools marked `destructiveHint` (and not `readOnlyHint`)."""
    on_tool_error: ToolErrors = "report"
    """A tool that still fails after its retries: `report` answers the model with the error
    (`is_error`) and goes on; `stop` ends the run `tool_failure`; `raise` raises its exception
    from `run()` (the other calls of the batch are cancelled)."""
    signal_handlers: Mapping[str, SignalHandler | None] = dataclasses.field(
        default_factory=lambda: types.MappingProxyType({}), hash=False
    )
    """Handlers by API stop_reason, over the built-in ones (`boundloop.signals`); None for one
    makes that stop_reason raise `UnhandledStop`. Code, as `success` and `approve` are."""

    def __init__(
        self,
        *,
        allowed: Collection[str] | None = None,
        forbidden: Collection[str] = (),
        requires_approval: Collection[str] = (),
        required_evidence: Collection[str] = (),
        success: SuccessCheck | None = None,
        approve: Approver | None = None,
        on_forbidden: Literal["stop", "report"] = "stop",
        on_missing_evidence: Literal["stop", "continue"] = "stop",
        on_max_tokens: Literal["stop", "continue"] = "stop",
        on_unknown_tool: Literal["stop", "report"] = "report",
        max_continuations: int = 2,
        escalation_tool: str | None = None,
        require_approval_for_destructive: bool = False,
        on_tool_error: ToolErrors = "report",
        signal_handlers: Mapping[str, SignalHandler | None] | None = None,
    ) -> None:
        sets = {
            "allowed": allowed,
            "forbidden": forbidden,
            "requires_approval": requires_approval,
            "required_evidence": required_evidence,
        }
        frozen: dict[str, frozenset[str] | None] = {}
        for name, value in sets.items():
            frozen[name] = None if value is None else _tool_names(name, value)
        for name, value in frozen.items():
            object.__setattr__(self, name, value)
        overlap = (frozen["allowed"] or frozenset()) & self.forbidden
        if overlap:
            raise ConfigurationError(f"tools both allowed and forbidden: {sorted(overlap)}")
        if self.forbidden & self.required_evidence:
            raise ConfigurationError(
                f"required evidence from forbidden tools: {sorted(self.forbidden & self.required_evidence)}"
            )
        choices = {
            "on_forbidden": (on_forbidden, ("stop", "report")),
            "on_missing_evidence": (on_missing_evidence, ("stop", "continue")),
            "on_max_tokens": (on_max_tokens, ("stop", "continue")),
            "on_unknown_tool": (on_unknown_tool, ("stop", "report")),
            "on_tool_error": (on_tool_error, ("report", "raise", "stop")),
        }
        for name, (value, options) in choices.items():
            if value not in options:
                raise ConfigurationError(f"Policy.{name} must be one of {options}, got {value!r}")
            object.__setattr__(self, name, value)
        for name, hook in (("success", success), ("approve", approve)):
            if hook is not None and not callable(hook):
                raise ConfigurationError(f"Policy.{name} must be a callable, got {hook!r}")
        if (
            not isinstance(cast(object, max_continuations), int)
            or isinstance(max_continuations, bool)
            or max_continuations < 0
        ):
            raise ConfigurationError(
                f"Policy.max_continuations must be an int >= 0, got {max_continuations!r}"
            )
        object.__setattr__(self, "success", success)
        object.__setattr__(self, "signal_handlers", _signal_handlers(signal_handlers))
        object.__setattr__(self, "approve", approve)
        object.__setattr__(self, "max_continuations", max_continuations)
        if not isinstance(cast(object, require_approval_for_destructive), bool):
            raise ConfigurationError(
                f"Policy.require_approval_for_destructive must be True or False, got "
                f"{require_approval_for_destructive!r}"
            )
        object.__setattr__(self, "require_approval_for_destructive", require_approval_for_destructive)
        object.__setattr__(self, "escalation_tool", self._checked_escalation_tool(escalation_tool))

    def _checked_escalation_tool(self, name: str | None) -> str | None:
        if name is None:
            return None
        if not isinstance(cast(object, name), str) or not _API_NAME.fullmatch(name):
            raise ConfigurationError(f"Policy.escalation_tool must be a tool name for the API, got {name!r}")
        if name in self.forbidden or name in self.requires_approval:
            raise ConfigurationError(f"Policy.escalation_tool {name!r} cannot be forbidden or need approval")
        return name

    def fingerprint(self) -> str:
        """The policy's decisions as canonical JSON (hooks by qualified name), for provenance."""

        def hook(fn: object) -> str | None:
            return (
                None if fn is None else f"{getattr(fn, '__module__', '?')}.{getattr(fn, '__qualname__', '?')}"
            )

        # Settings added later, written only when not their default: every policy that leaves
        # them keeps the hash it had.
        later: dict[str, object] = {}
        if self.require_approval_for_destructive:
            later["require_approval_for_destructive"] = True
        if self.on_unknown_tool == "stop":
            later["on_unknown_tool"] = "stop"
        return json.dumps(
            {
                **later,
                "allowed": None if self.allowed is None else sorted(self.allowed),
                "forbidden": sorted(self.forbidden),
                "requires_approval": sorted(self.requires_approval),
                "required_evidence": sorted(self.required_evidence),
                "success": hook(self.success),
                "approve": hook(self.approve),
                "on_forbidden": self.on_forbidden,
                "on_missing_evidence": self.on_missing_evidence,
                "on_max_tokens": self.on_max_tokens,
                "max_continuations": self.max_continuations,
                "escalation_tool": self.escalation_tool,
            },
            sort_keys=True,
        )

    def is_forbidden(self, name: str) -> bool:
        """The tool may never run."""
        return name in self.forbidden

    def needs_approval(self, name: str, *, requires_approval: bool, side_effect: bool) -> bool:
        """A call of this tool waits for a human (its own flag, `requires_approval`, or destructive)."""
        return (
            requires_approval
            or name in self.requires_approval
            or (side_effect and self.require_approval_for_destructive)
        )

    def is_allowed(self, name: str) -> bool:
        """The tool passes the allow-list (when there is one)."""
        return self.allowed is None or name in self.allowed


def _signal_handlers(
    given: Mapping[str, SignalHandler | None] | None,
) -> Mapping[str, SignalHandler | None]:
    """`Policy.signal_handlers`, checked and read once (a stop_reason str to a handler or None)."""
    if given is None:
        return types.MappingProxyType({})
    if not isinstance(cast(object, given), Mapping):
        raise ConfigurationError(f"Policy.signal_handlers maps stop_reasons to handlers, got {given!r}")
    for stop_reason, handler in given.items():
        if not isinstance(cast(object, stop_reason), str) or not (handler is None or callable(handler)):
            raise ConfigurationError(
                "Policy.signal_handlers maps a stop_reason str to a handler, got "
                f"{stop_reason!r}: {handler!r}"
            )
    return types.MappingProxyType(dict(given))


def _tool_names(field: str, value: object) -> frozenset[str]:
    """A policy field's tool names, read once (the caller may pass a generator)."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigurationError(
            f"Policy.{field} takes a collection of tool names, not a {type(value).__name__}"
        )
    names = frozenset(cast(Iterable[object], value))
    strange = sorted(repr(name) for name in names if not isinstance(name, str))
    if strange:
        raise ConfigurationError(f"Policy.{field} takes tool names (str), got {', '.join(strange)}")
    return cast(frozenset[str], names)
