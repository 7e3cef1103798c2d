"""Export a stored run as an eval fixture: production to regression (`boundloop eval --export`).

The run's recorded responses become the model script, its executed tool calls the mocked
results (per tool, in the order the mocks hand them out), its provenance the tools, policy and
budget, and its outcome the expectations. Decisions a human made on resume are read back from
the answers they produced and become the case's `resume` list.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from ..prices import resolve_price
from ..records import Observation, Provenance, StopReason
from ..state import LoopState
from ._fixture import schema
from ._mocks import DEFAULT_TIMEOUT_S

_CASE_ID: Final = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
_NOT_ID: Final = re.compile(r"[^A-Za-z0-9_.:-]")
_RETRY: Final[Mapping[str, Any]] = {"status": "retryable_error", "reason": "exported retry"}
_RETRIES_SPENT: Final = re.compile(r"RetryableToolError: (.*) \(after \d+ attempts?\)", re.DOTALL)
"""The error of a call whose every attempt asked for a retry: its last attempt did too."""
_CUTS: Final = frozenset({StopReason.CANCELLED, StopReason.TIMEOUT})
"""Stops from outside the run (a cancel, its deadline): the case is cut where the recording ends."""
_DENIED_BY_HUMAN: Final = " was denied by a human"
_DENIED_BY_APPROVER: Final = " was denied by the approver"


def export_case(state: LoopState, *, case_id: str | None = None) -> dict[str, Any]:
    """A stored run as an eval fixture (a JSON-ready dict that `parse_case` accepts).

    Args:
        state: the run, stopped (from a store, or `LoopResult.state`).
        case_id: the fixture's `case_id`; default: the task id, with every character the
            fixture format does not allow written as `_`.

    Returns:
        The fixture: goal, model turns, mocked tool results, the provenance's tools, policy
        and budget (when recorded), the human decisions on resume, and the expectations.

    Raises:
        ValueError: the run has not stopped (no stop reason to expect), or `case_id` does not
            match the fixture format.
    """
    if state.stop_reason is None:
        raise ValueError(f"task {state.task_id} has not stopped: there is no outcome to expect")
    chosen = case_id if case_id is not None else _case_id(state.task_id)
    if not _CASE_ID.fullmatch(chosen):
        raise ValueError(f"case_id {chosen!r} does not match {_CASE_ID.pattern}")
    notes = [
        f"Exported from task {state.task_id}.",
        "The system prompt is not recorded (only its hash): the case runs without one.",
    ]
    provenance = state.provenance
    executed = [o for o in state.observations if o.attempts > 0]
    fixture: dict[str, Any] = {"case_id": chosen, "description": "", "goal": state.goal or "(no goal)"}
    if provenance is not None:
        fixture["model_name"] = provenance.model
    fixture["model"] = [
        response.message().model_dump(mode="json", exclude_none=True, warnings=False)
        for response in state.responses
    ]
    mocked = _mocked(executed, notes)
    if mocked:
        fixture["mocked_tools"] = mocked
    policy: dict[str, Any] = {}
    resume: list[dict[str, Any]] = []
    if provenance is None:
        notes.append(
            "The run has no provenance: its tools, policy, budget and human decisions are not exported."
        )
    else:
        timing_out = {o.tool for o in executed if o.outcome == "timeout"}
        policy = _policy(provenance, notes)
        fixture["tools"] = _tools(provenance, timing_out)
        fixture["budget"] = _budget(provenance, notes)
        if policy:
            fixture["policy"] = policy
        resume = _resume(state.observations, provenance, policy)
        if resume:
            fixture["resume"] = resume
    if any(error.kind == "model_api" for error in state.errors):
        notes.append("Model API errors are not exported: the script holds only the responses received.")
    if state.opening > 1:
        notes.append(
            f"The run started from {state.opening} messages of history; the case starts from the goal."
        )
    if (
        state.stop_reason in _CUTS
    ):  # cut where the recording ends: the model call or tool call it never answered
        fixture["cut"] = str(state.stop_reason)
    fixture["description"] = " ".join(notes)
    fixture["expected"] = _expected(state, executed, policy, resumed=bool(resume))
    return fixture


def _case_id(task_id: str) -> str:
    return _NOT_ID.sub("_", task_id)[:128] or "exported"


def _mocked(executed: Sequence[Observation], notes: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each tool's results in the order the mocks hand them out: per step, the first attempts
    of its calls in block order, then their retries, round by round."""
    mocked: dict[str, list[dict[str, Any]]] = {}
    by_step: dict[int, list[Observation]] = {}
    for observation in executed:
        by_step.setdefault(observation.step, []).append(observation)
    for step in sorted(by_step):
        batch = by_step[step]
        for attempt in range(1, max(o.attempts for o in batch) + 1):
            for observation in batch:
                if observation.attempts > attempt:
                    mocked.setdefault(observation.tool, []).append(dict(_RETRY))
                elif observation.attempts == attempt:
                    mocked.setdefault(observation.tool, []).append(_result(observation))
    if any(o.outcome == "invalid_result" for o in executed):
        notes.append(
            "A tool result that did not match its declared output (invalid_result) is not recorded: "
            "it is exported as an error."
        )
    if any(o.outcome == "cancelled" for o in executed):
        notes.append(
            "A call cancelled while running (the run's deadline or a cancel) is exported as an error."
        )
    return mocked


def _result(observation: Observation) -> dict[str, Any]:
    content = observation.content
    if observation.outcome == "timeout":
        return {"status": "timeout"}
    if observation.outcome != "ok":
        text = _text(content)
        spent = _RETRIES_SPENT.fullmatch(text) if observation.outcome == "error" else None
        if spent is not None:
            return {"status": "retryable_error", "reason": spent.group(1)}
        return {"status": "error", "error": text}
    if isinstance(content, list):
        return {"status": "ok", "output": content}
    return {"status": "ok", "output": _output(content)}


def _output(text: str) -> object:
    """The value the tool returned: JSON the loop wrote for a non-string value, else the text."""
    try:
        value: object = json.loads(text)
    except ValueError:
        return text
    if isinstance(value, str) or _looks_like_blocks(value):  # a returned string is its own text
        return text
    return value if json.dumps(value, ensure_ascii=False) == text else text


def _looks_like_blocks(value: object) -> bool:
    """A list of objects with a `type`: returned, it would be sent as content blocks, not JSON."""
    if not isinstance(value, list):
        return False
    items: list[object] = value  # pyright: ignore[reportUnknownVariableType]
    return any(isinstance(item, dict) and "type" in item for item in items)


def _tools(provenance: Provenance, timing_out: set[str]) -> list[dict[str, Any]]:
    """The recorded manifest, without the escalation tool (the loop adds it itself)."""
    escalation = provenance.policy.get("escalation_tool")
    tools: list[dict[str, Any]] = []
    for entry in provenance.tools:
        name = str(entry["name"])
        if name == escalation:
            continue
        tool: dict[str, Any] = {"name": name}
        if entry.get("description"):
            tool["description"] = str(entry["description"])
        if isinstance(entry.get("input_schema"), dict):
            tool["input_schema"] = entry["input_schema"]
        if entry.get("requires_approval"):
            tool["requires_approval"] = True
        if name in timing_out:  # the recorded timeout is not: a mocked timeout ends at once
            tool["timeout_s"] = DEFAULT_TIMEOUT_S
        tools.append(tool)
    return tools


def _fields(definition: str) -> set[str]:
    properties: Mapping[str, Any] = schema()["$defs"][definition]["properties"]
    return set(properties)


def _budget(provenance: Provenance, notes: list[str]) -> dict[str, Any]:
    allowed = _fields("budget")
    budget = {key: value for key, value in provenance.budget.items() if key in allowed and value is not None}
    if "max_cost_usd" in budget and resolve_price(provenance.model) is None:
        del budget["max_cost_usd"]  # its price was the caller's own: not recorded
        notes.append(f"max_cost_usd is dropped: there is no built-in price for {provenance.model}.")
    return budget


def _policy(provenance: Provenance, notes: list[str]) -> dict[str, Any]:
    recorded = provenance.policy
    allowed = _fields("policy")
    policy = {
        key: value
        for key, value in recorded.items()
        if key in allowed and value is not None and (value != [] or key == "allowed")
    }  # an empty allow-list allows nothing: it is kept
    hooks = [name for name in ("approve", "success") if recorded.get(name)]
    if hooks:
        notes.append(
            f"The policy's {' and '.join(hooks)} hook is not exported"
            + (": the approver's decisions become resume decisions." if "approve" in hooks else ".")
        )
    return policy


def _resume(
    observations: Sequence[Observation], provenance: Provenance, policy: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """The decisions at each `needs_human` stop the run was resumed from, in step order.

    A call of a tool that needs approval waited for a human if it ran (approved) or a human
    (or the in-process approver) denied it; a call of the escalation tool answered `ok` got
    the human's reply. The stop a run ended with has no answers recorded: no decision.
    """
    gated = {str(t["name"]) for t in provenance.tools if t.get("requires_approval")}
    gated |= set(_names(policy.get("requires_approval", ())))
    escalation = policy.get("escalation_tool")
    by_step: dict[int, dict[str, Any]] = {}
    for observation in observations:
        decision = by_step.setdefault(observation.step, {})
        if observation.tool == escalation and observation.outcome == "ok" and not observation.attempts:
            decision["reply"] = _text(observation.content)
        elif observation.tool in gated and (observation.by_human or observation.attempts > 0):
            approvals: dict[str, bool | str] = decision.setdefault("approvals", {})
            approvals[observation.tool_use_id] = _approval(observation)
        elif observation.tool in gated and _DENIED_BY_APPROVER in _text(observation.content):
            decision.setdefault("approvals", {})[observation.tool_use_id] = False
    return [by_step[step] for step in sorted(by_step) if by_step[step]]


def _approval(observation: Observation) -> bool | str:
    text = _text(observation.content)
    if observation.outcome != "denied" or _DENIED_BY_HUMAN not in text:
        return True
    reason = text.split(_DENIED_BY_HUMAN, 1)[1].removesuffix("; not run")
    return reason.removeprefix(": ") if reason else False


def _text(content: str | list[dict[str, Any]]) -> str:
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)


def _names(value: object) -> Iterable[str]:
    if isinstance(value, list):
        items: list[object] = value  # pyright: ignore[reportUnknownVariableType]
        return [str(item) for item in items]
    return ()


def _expected(
    state: LoopState, executed: Sequence[Observation], policy: Mapping[str, Any], *, resumed: bool
) -> dict[str, Any]:
    assert state.stop_reason is not None  # checked by export_case
    events = ["proposal", "validation", "stop"]
    if state.observations:
        events.insert(2, "tool_result")
    if resumed:
        events.append("resumed")
    expected: dict[str, Any] = {
        "stop_reason": str(state.stop_reason),
        "tool_sequence": [o.tool for o in executed],
        "max_tool_calls": state.tool_calls,
        "max_steps": state.step,
    }
    forbidden = list(_names(policy.get("forbidden")))
    if forbidden:
        expected["forbidden_tools"] = forbidden
    expected["requires_trace_events"] = events
    return expected
