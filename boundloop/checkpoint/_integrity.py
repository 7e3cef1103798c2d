"""What a stored state must satisfy before a run continues from it.

A checkpoint is read back from a store others may write to. Its counters carry the budget
(`step`, `tool_calls`, `elapsed_s`, `usage`, the breaker's count): lowered, a resumed run gets
a fresh budget. What can be cross-checked is checked here, against what the state records:
every model response is a step, every recorded tool execution a tool call, every token of the
responses in `usage`. Numbers are finite and not negative. The turn's lists match its calls,
and every call waiting for a human is a call of the turn. A state that fails is refused
(`CheckpointCorrupt`, naming the field) before anything acts on it.

What cannot be cross-checked (`elapsed_s` lowered, a counter lowered to exactly what the rest
records, a row replaced by an older one of the same run) needs `AgentLoop(store=SignedStore(store, key))`:
a signature over the whole state.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final, TypeAlias

from ..errors import CheckpointCorrupt
from ..records import DECISIONS, FAILED_OUTCOMES, Turn
from ..state import LoopState, non_finite
from ..statemachine.table import Phase

Problem: TypeAlias = tuple[str, str]
"""The field at fault and what is wrong with it."""

_TOKENS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)


def check_state(task_id: str, state: LoopState) -> None:
    """Refuse a stored state that is inconsistent.

    Args:
        task_id: the task the store was asked for.
        state: the state its row holds.

    Raises:
        CheckpointCorrupt: the first inconsistency found, its field named (`.field`).
    """
    if state.task_id != task_id:
        raise CheckpointCorrupt(task_id, f"the row holds task {state.task_id!r}", field="task_id")
    for field, problem in _problems(state):
        raise CheckpointCorrupt(task_id, problem, field=field)


def _problems(state: LoopState) -> Iterator[Problem]:
    found = non_finite(state)
    if found is not None:
        yield found
    yield from _negatives(state)
    yield from _counters(state)
    if state.turn is not None:
        yield from _turn(state.turn)
    yield from _waiting(state)
    if state.phase is Phase.STOPPED and state.stop_reason is None:
        yield "stop_reason", "the run is stopped without a stop reason"


def _negatives(state: LoopState) -> Iterator[Problem]:
    usage = state.usage
    numbers: list[tuple[str, float | None]] = [
        ("elapsed_s", state.elapsed_s),
        ("step", state.step),
        ("tool_calls", state.tool_calls),
        ("consecutive_tool_errors", state.consecutive_tool_errors),
        ("repeated_calls", state.repeated_calls),
        ("continuations", state.continuations),
        ("opening", state.opening),
        ("usage.cost_usd", usage.cost_usd),
        *((f"usage.{name}", getattr(usage, name)) for name in _TOKENS),
    ]
    for field, value in numbers:
        if value is not None and value < 0:
            yield field, f"{value!r} is negative"
    for index, observation in enumerate(state.observations):
        if observation.attempts < 0:
            yield f"observations[{index}].attempts", f"{observation.attempts!r} is negative"


def _counters(state: LoopState) -> Iterator[Problem]:
    """The counters are at least what the responses and observations record."""
    turn = state.turn
    responses = len(state.responses) - (1 if turn is not None and turn.final else 0)
    if state.step < responses:
        yield "step", f"{state.step}, but the row records {responses} model calls"
    for index, observation in enumerate(state.observations):
        if observation.step > state.step:
            yield f"observations[{index}].step", f"{observation.step} is after the run's step {state.step}"
    executed = sum(observation.attempts for observation in state.observations) + _unrecorded(state)
    if state.tool_calls < executed:
        yield "tool_calls", f"{state.tool_calls}, but the row records {executed} tool executions"
    yield from _usage(state)
    breaker = 0
    for observation in state.observations:
        if observation.outcome == "ok":
            breaker = 0
        elif observation.outcome in FAILED_OUTCOMES and not observation.by_human:
            breaker += 1
    if state.consecutive_tool_errors < breaker:
        yield (
            "consecutive_tool_errors",
            f"{state.consecutive_tool_errors}, but the observations end with {breaker} failures in a row",
        )
    repeats = sum(1 for observation in state.observations if observation.outcome == "repeated")
    if state.repeated_calls < repeats:
        yield "repeated_calls", f"{state.repeated_calls}, but the observations record {repeats} repeats"
    for key, index in state.succeeded.items():
        if not 0 <= index < len(state.observations):
            yield f"succeeded[{key!r}]", f"{index} is not an observation"


def _unrecorded(state: LoopState) -> int:
    """Tool executions of the current turn not yet recorded as observations."""
    turn = state.turn
    if turn is None or (turn.answered and not turn.awaiting_human):
        return 0
    executed = 0
    for index, answer in enumerate(turn.answers):
        attempts = 0 if answer is None else answer.attempts
        executed += max(attempts, 1 if index in turn.invoked else 0)
    return executed


def _usage(state: LoopState) -> Iterator[Problem]:
    """`usage` holds at least the tokens the recorded responses were billed."""
    spent = dict.fromkeys(_TOKENS, 0)
    for index, response in enumerate(state.responses):
        usage: object = getattr(response, "usage_json", None)
        if not isinstance(usage, dict):
            yield f"responses[{index}].usage", "missing"
            return
        for name in _TOKENS:
            value: object = usage.get(name)  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
            spent[name] += value if isinstance(value, int) else 0
    for name, tokens in spent.items():
        recorded: int = getattr(state.usage, name)
        if recorded < tokens:
            yield f"usage.{name}", f"{recorded}, but the recorded responses used {tokens}"


def _turn(turn: Turn) -> Iterator[Problem]:
    calls = len(turn.calls)
    for field, items in (("turn.keys", turn.keys), ("turn.answers", turn.answers)):
        if len(items) != calls:
            yield field, f"{len(items)} entries for {calls} calls"
            return
    if len(turn.decisions) > calls:
        yield "turn.decisions", f"{len(turn.decisions)} entries for {calls} calls"
    for index, decision in enumerate(turn.decisions):
        if decision not in DECISIONS:
            yield f"turn.decisions[{index}]", f"{decision!r} is not a decision"
    yield from _answers(turn)
    for index in turn.invoked:
        if not 0 <= index < calls:
            yield "turn.invoked", f"{index} is not a call of the turn"
    for copy, first in turn.same_as.items():
        if not (0 <= copy < calls and 0 <= first < calls):
            yield "turn.same_as", f"{copy} -> {first} is not a pair of calls of the turn"


def _answers(turn: Turn) -> Iterator[Problem]:
    """Each answer answers the call at its index."""
    for index, answer in enumerate(turn.answers):
        if answer is not None and answer.call.id != turn.calls[index].id:
            yield (
                f"turn.answers[{index}]",
                f"answers {answer.call.id!r}, not the call {turn.calls[index].id!r}",
            )
        if answer is not None and answer.attempts < 0:
            yield f"turn.answers[{index}].attempts", f"{answer.attempts!r} is negative"


def _waiting(state: LoopState) -> Iterator[Problem]:
    """Every call waiting for a human is a call of the turn (or of a delegated run, named in
    `waiting_on`), and every waiting call is listed."""
    turn = state.turn
    ids = [] if turn is None else [call.id for call in turn.calls]
    pending = [approval.tool_use_id for approval in state.pending_approvals]
    for tool_use_id in pending:
        if tool_use_id not in ids and tool_use_id not in state.waiting_on:  # a delegated run's
            yield "pending_approvals", f"{tool_use_id!r} is not a call of the turn"
    escalation = state.escalation
    if (
        escalation is not None
        and escalation.tool_use_id not in ids
        and escalation.tool_use_id not in state.waiting_on
    ):
        yield "escalation", f"{escalation.tool_use_id!r} is not a call of the turn"
    if turn is None or not turn.awaiting_human:
        return
    asked = None if escalation is None else escalation.tool_use_id
    for call, decision in zip(turn.calls, turn.decisions, strict=False):
        if decision in ("escalate", "approve") and call.id not in pending and call.id != asked:
            yield "pending_approvals", f"the call {call.id!r} waits for a human but is not listed"
