"""Validation of a batch: every proposed tool call decided before any of them runs.

The order is the policy's: forbidden, registry, allow-list, JSON schema, the run's history
(repeats of a successful call), approval, and what is left of `max_tool_calls`. A call that
cannot run is answered with a result saying why, so the transcript stays valid.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Final, final

from ..policy import Policy, ToolCall
from ..state import JSON, Budget, LoopState, StopReason
from .dispatch import CallResult, Planned, refused
from .registry import ToolRegistry
from .tools import ToolInputError

_CANONICAL_JSON: Final = json.JSONEncoder(sort_keys=True, separators=(",", ":"), default=str).encode
"""Built once: `json.dumps` with options builds a new encoder on every call."""
REPEAT_NOTE: Final = "\n[repeated call: this is the result of the identical earlier call]"


def canonical(name: str, tool_input: object) -> str:
    """The identity of a call for repeat detection: tool name and canonical JSON input."""
    return name + "\x00" + _CANONICAL_JSON(tool_input)


@final
class BatchValidator:
    """Decides the tool calls of each response of one run; remembers its successful calls."""

    __slots__ = ("_budget", "_policy", "_redact", "_state", "_tools", "succeeded")

    def __init__(
        self,
        *,
        policy: Policy,
        tools: ToolRegistry,
        budget: Budget,
        state: LoopState,
        redact: Callable[[str | None], str | None],
    ) -> None:
        self._policy = policy
        self._tools = tools
        self._budget = budget
        self._state = state
        self._redact = redact
        self.succeeded: dict[str, CallResult] = {}
        """Canonical call -> its successful result: the history repeats are answered from."""

    async def plan(
        self, calls: Sequence[ToolCall], keys: Sequence[str]
    ) -> tuple[list[Planned], list[JSON], tuple[StopReason, str] | None]:
        """Decide every call: execute, deny, repeat or escalate.

        Two passes: the synchronous checks decide whether the batch may run at all; only
        then is an in-process approver asked, so it never approves a call that cannot run.

        Returns:
            The planned calls (a result for each one that will not run), the decision of each
            for the trace, and `(stop_reason, detail)` when the batch must not run at all.
        """
        planned: list[Planned] = []
        decisions: list[JSON] = []
        blocked: list[str] = []
        escalated: list[str] = []
        to_approve: list[int] = []
        for index, (call, key) in enumerate(zip(calls, keys, strict=True)):
            item, decision = self._decide(call, key)
            planned.append(item)
            decisions.append(self._record(item, decision))
            if decision == "block":
                blocked.append(call.name)
            elif decision == "escalate":
                escalated.append(call.name)
            elif decision == "approve":
                to_approve.append(index)
        stop = self._batch_stop(planned, blocked, escalated)
        if stop is not None:
            _refuse_all(planned, stop[1])
            return planned, decisions, stop
        approve = self._policy.approve
        for index in to_approve:
            item = planned[index]
            assert approve is not None  # "approve" is only decided when there is an approver
            approved = await approve(item.call)
            decisions[index] = {**decisions[index], "decision": "execute" if approved else "deny"}
            if not approved:
                item.tool = None
                item.result = refused(
                    item.call, "denied", f"{item.call.name} was denied by the approver: not run"
                )
                decisions[index]["reason"] = item.result.content
        return planned, decisions, None

    def remember(self, key: str, result: CallResult) -> None:
        """A call succeeded: the same call again will be answered from this result."""
        self.succeeded[key] = result

    def _batch_stop(
        self, planned: list[Planned], blocked: list[str], escalated: list[str]
    ) -> tuple[StopReason, str] | None:
        if blocked:
            return StopReason.POLICY_BLOCKED, f"forbidden tool proposed: {', '.join(blocked)}"
        if escalated:
            return StopReason.NEEDS_HUMAN, f"approval required for {', '.join(escalated)}"
        state = self._state
        limit = self._budget.max_tool_calls
        runnable = sum(1 for item in planned if item.tool is not None)
        if limit is not None and state.tool_calls + runnable > limit:
            state.exceeded = {"limit": "max_tool_calls", "value": limit, "used": state.tool_calls}
            left = limit - state.tool_calls
            return (
                StopReason.MAX_TOOL_CALLS,
                f"{runnable} tool calls proposed, {left} left of max_tool_calls={limit}",
            )
        return None

    def _decide(self, call: ToolCall, key: str) -> tuple[Planned, str]:
        """One call against the policy, the registry, the schema and the run's history."""
        policy = self._policy
        name = call.name
        item = Planned(call=call)
        if policy.is_forbidden(name):
            item.result = refused(call, "denied", f"{name} is forbidden by policy: not run")
            return item, "block" if policy.on_forbidden == "stop" else "deny"
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            item.result = refused(call, "invalid", f"unknown tool {name!r}; known tools: {known}")
            return item, "deny"
        if not policy.is_allowed(name):
            item.result = refused(call, "denied", f"{name} is not allowed in this run: not run")
            return item, "deny"
        try:
            item.arguments = tool.validate(call.input)
        except ToolInputError as exc:
            item.result = refused(call, "invalid", f"invalid input for {name}: {exc}")
            return item, "deny"
        earlier = self.succeeded.get(key)
        if earlier is not None:
            self._state.repeated_calls += 1
            item.result = CallResult(call=call, outcome="repeated", content=_with_note(earlier, REPEAT_NOTE))
            return item, "repeat"
        if tool.requires_approval or name in policy.requires_approval:
            if policy.approve is None:
                self._state.pending_approvals.append(
                    {"tool_use_id": call.id, "tool": name, "input": call.input, "step": call.step}
                )
                item.result = refused(call, "denied", f"{name} awaits human approval: not run")
                return item, "escalate"
            item.tool = tool
            return item, "approve"
        item.tool = tool
        return item, "execute"

    def _record(self, item: Planned, decision: str) -> JSON:
        """The trace record of one decision; an invalid action is also recorded as an error."""
        result = item.result
        call = item.call
        if result is None:
            return {"tool": call.name, "tool_use_id": call.id, "decision": decision}
        reason = self._redact(str(result.content))
        if result.outcome == "invalid":
            self._state.errors.append(
                {"kind": "invalid_action", "step": call.step, "tool": call.name, "message": reason}
            )
        return {"tool": call.name, "tool_use_id": call.id, "decision": decision, "reason": reason}


def _refuse_all(planned: list[Planned], detail: str) -> None:
    """The batch does not run: answer every call not already answered."""
    for item in planned:
        if item.result is None:
            item.tool = None
            item.result = refused(item.call, "denied", f"not run: {detail}")


def _with_note(earlier: CallResult, note: str) -> str | list[dict[str, Any]]:
    content = earlier.content
    if isinstance(content, str):
        return content + note
    return [*content, {"type": "text", "text": note.strip()}]
