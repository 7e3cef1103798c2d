"""Replay: re-drive a recorded run from its recorded model responses and tool results.

With its store, a run of a delegation tree is replayed with the runs below it: each from its
own stored state, its report nested in its parent's.

No model is called and no tool runs: the responses come from the recording, and each tool
call is answered with the result recorded for its `tool_use_id`. The replayed run goes
through the same table, guards, validation and budget as a live one, so a changed policy,
budget or tool schema shows up as a different trajectory. The report says whether the
trajectory is identical and, if not, where it first diverges.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, cast, final

import anyio
import anyio.to_thread
from anthropic.types import Message, MessageParam

from ._core import Cut, LoopConfig, Observers, Wiring, build_config, field_text, prepare
from ._core import drive as execute
from ._lazy import claim
from .errors import ScriptExhausted, UnhandledStop
from .events import (
    Event,
    Proposal,
    Resumed,
    Stop,
    ToolResult,
    Transition,
    Validation,
    from_dict,
    read_events,
    to_dict,
)
from .loop import AgentLoop
from .platforms import platform_named
from .policy import Policy
from .records import Observation, Provenance, StopReason
from .settings import LoopSpec
from .state import Budget, LoopResult, LoopState
from .testing import ScriptedClient
from .tools import Tool

if TYPE_CHECKING:
    from .checkpoint.store import CheckpointStore


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Divergence:
    """The first step where the replayed trajectory differs from the recorded one."""

    index: int
    expected: str
    """The recorded step ("" when the recording ended first)."""
    got: str
    """The replayed step ("" when the replay ended first)."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class ReplayReport:
    """What a replay found: identical or not, the first divergence, provenance changes."""

    task_id: str
    expected: list[str]
    """The recorded trajectory, one line per step."""
    got: list[str]
    """The replayed trajectory, in the same form."""
    provenance_changes: list[str]
    """What differs between the recording's configuration and the replaying loop's."""
    result: LoopResult | None
    """The replayed run's result (None if it raised)."""
    children: list[ReplayReport] = dataclasses.field(default_factory=list["ReplayReport"])
    """The reports of the runs it delegated to, in the order it started them (replayed with the
    store: `replay(..., store=...)`); each holds its own children's."""
    missing: list[str] = dataclasses.field(default_factory=list[str])
    """The task ids of the runs it delegated to that the store does not hold (their loops had no
    store): not replayed."""

    @property
    def divergence(self) -> Divergence | None:
        """The first step where this run's own trajectory differs, or None (see `identical` for
        the runs below it)."""
        for index, (expected, got) in enumerate(zip(self.expected, self.got, strict=False)):
            if expected != got:
                return Divergence(index=index, expected=expected, got=got)
        if len(self.expected) != len(self.got):
            index = min(len(self.expected), len(self.got))
            return Divergence(
                index=index,
                expected=self.expected[index] if index < len(self.expected) else "",
                got=self.got[index] if index < len(self.got) else "",
            )
        return None

    @property
    def identical(self) -> bool:
        """The replayed trajectory is the recorded one, step for step, and so is every replayed
        run below it."""
        return self.divergence is None and all(child.identical for child in self.children)

    def describe(self) -> str:
        """The report in a few lines, for a terminal; the runs below it indented under it."""
        lines = self._described(f"replay of task {self.task_id}")
        if self.divergence is None and not self.identical:
            lines.append("the tree diverged: a run below this one did not take its recorded path")
        return "\n".join(lines)

    def _described(self, title: str) -> list[str]:
        lines = self._own(title)
        for child in self.children:
            lines += ["  " + line for line in child._described(f"delegated run {child.task_id}")]
        lines += [f"  delegated run {task_id}: not in the store, not replayed" for task_id in self.missing]
        return lines

    def _own(self, title: str) -> list[str]:
        lines = [f"{title}: {len(self.expected)} recorded steps"]
        lines += [f"  provenance: {change}" for change in self.provenance_changes]
        divergence = self.divergence
        if divergence is None:
            lines.append("identical: the same states, tool calls, decisions and stop reason")
        else:
            lines.append(f"diverged at step {divergence.index}:")
            lines.append(f"  recorded: {divergence.expected or '(the recording ended)'}")
            lines.append(f"  replayed: {divergence.got or '(the replay ended)'}")
        return lines

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON object."""
        divergence = self.divergence
        return {
            "task_id": self.task_id,
            "identical": self.identical,
            "divergence": None if divergence is None else dataclasses.asdict(divergence),
            "provenance_changes": self.provenance_changes,
            "expected": self.expected,
            "got": self.got,
            "children": [child.to_dict() for child in self.children],
            "missing": self.missing,
        }


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Recording:
    task_id: str
    trace_id: str
    opening: list[MessageParam]
    responses: list[Message]
    results: dict[tuple[int, str], Observation]
    """Recorded results by (step, tool_use_id)."""
    human_reasons: dict[tuple[int, str], str]
    """A human's denial reasons, by (step, tool_use_id) (a trace records them; a state does not)."""
    provenance: Provenance | None
    trajectory: list[str]
    detailed: bool
    """The trajectory holds transitions and decisions (from a trace), not only tool outcomes."""
    model_settings: dict[str, Any] = dataclasses.field(default_factory=dict[str, Any])
    """The run's model settings (a state records them; a trace, only their hash)."""
    stop_reason: str | None = None
    """How the recorded run stopped (`cancelled`, `timeout`: the replay is cut where it was)."""
    children: list[str] = dataclasses.field(default_factory=list[str])
    """The runs it delegated to (a state records them; a trace does not)."""


async def replay(
    source: LoopState | Sequence[Event] | str | Path,
    loop: AgentLoop | None = None,
    *,
    store: CheckpointStore | None = None,
) -> ReplayReport:
    """Re-drive a recorded run with no model and no real tools, and compare the trajectories.

    Args:
        source: a `LoopState` (e.g. from a store), a run's events (`LoopResult.events`, or
            the events of a run and its resumes, in order), or the path of a state JSON file
            or of a JSON-lines trace written by `LoopResult.write_events` / `--trace` (this
            release's earlier trace format too).
        loop: an `AgentLoop` whose configuration (tools, policy, budget) the recording is
            replayed through; default: the configuration recorded with the run.
        store: the store the run is in: the runs it delegated to (a state's `children`) are
            replayed too, each from its stored state with its recorded configuration, and so on
            down the tree (`ReplayReport.children`). Without it, the run is replayed alone: its
            delegations are tool calls answered with their recorded results, as any.

    Returns:
        The report: identical or the first divergence, and provenance changes.

    Raises:
        ValueError: the source is not a state or trace, or records too little to replay (a
            run below it too).
        OSError: the file cannot be read.
        CheckpointCorrupt: a run below it is stored unreadable.
    """
    recording = await anyio.to_thread.run_sync(_recording, source)
    report = await _replay(recording, loop)
    if store is not None:
        await _replay_below(report, recording.children, store, {recording.task_id})
    return report


async def _replay_below(
    report: ReplayReport, children: list[str], store: CheckpointStore, seen: set[str]
) -> None:
    """Replay the runs `report`'s run delegated to, from their states in `store`, into its report
    (each run once, whatever a damaged store says)."""
    for task_id in children:
        if task_id in seen:
            continue
        seen.add(task_id)
        state = await store.load(task_id)
        if state is None:
            report.missing.append(task_id)
            continue
        recording = _from_state(state)
        child = await _replay(recording, None)
        report.children.append(child)
        await _replay_below(child, recording.children, store, seen)


async def _replay(recording: _Recording, loop: AgentLoop | None) -> ReplayReport:
    """Replay one run's recording."""
    # A run cancelled or timed out while it waited for the model or a tool is cut at the same call:
    # the model call past the recorded responses, or the call recorded `cancelled`.
    cut = Cut(reason=StopReason(recording.stop_reason)) if recording.stop_reason in _CUTS else None
    config = _config(recording, loop, cut)
    state = LoopState(
        task_id=recording.task_id,
        trace_id=recording.trace_id,
        goal="(replay)",
        started_at=0.0,
        provenance=config.provenance,
        # The loop's settings when one is given (a change is in the report), else the run's.
        model_settings=config.spec.settings.data() if loop is not None else recording.model_settings,
        messages=list(recording.opening),
        opening=len(recording.opening),
    )
    result: LoopResult | None
    try:
        result = await execute(config, state, cancel=None if cut is None else cut.event)
        events = list(result.events)
        decisions = _human_decisions(recording, result.state)
        while decisions is not None:  # the recorded run went on after a human decided: so does this one
            approvals, reply = decisions
            resumed = prepare(result.state, approvals, reply)
            result = await execute(config, result.state, resumed=resumed)
            events += [event for event in result.events if not isinstance(event, Resumed)]
            decisions = _human_decisions(recording, result.state)
        got = _trajectory(events, result.state, detailed=recording.detailed)
    except (ScriptExhausted, UnhandledStop) as exc:
        partial = exc.result if isinstance(exc, UnhandledStop) else None
        result = partial
        got = (
            [] if partial is None else _trajectory(partial.events, partial.state, detailed=recording.detailed)
        )
        got.append(f"error: {exc}")
    return ReplayReport(
        task_id=recording.task_id,
        expected=recording.trajectory,
        got=got,
        provenance_changes=_changes(recording.provenance, config.provenance),
        result=result,
    )


def _human_decisions(
    recording: _Recording, state: LoopState
) -> tuple[dict[str, bool | str], str | None] | None:
    """The decisions a human made at this stop, read back from the recorded answers; None when
    the run does not wait for a human or the recording has no answer to give."""
    turn = state.turn
    if state.stop_reason is not StopReason.NEEDS_HUMAN or turn is None or not turn.awaiting_human:
        return None
    approvals: dict[str, bool | str] = {}
    for pending in state.pending_approvals:
        answer = recording.results.get((pending.step, pending.tool_use_id))
        if answer is None:
            return None
        if answer.by_human and answer.outcome == "denied":
            reason = recording.human_reasons.get((pending.step, pending.tool_use_id))
            approvals[pending.tool_use_id] = False if reason is None else reason
        else:
            approvals[pending.tool_use_id] = True
    reply: str | None = None
    if state.escalation is not None:
        answer = recording.results.get((state.escalation.step, state.escalation.tool_use_id))
        if answer is None:
            return None
        reply = str(answer.content)
    return approvals, reply


def _recording(source: LoopState | Sequence[Event] | str | Path) -> _Recording:
    """The recording in `source` (reads files: call it in a worker thread)."""
    if isinstance(source, LoopState):
        return _from_state(source)
    if not isinstance(source, str | Path):
        # Events as a trace file holds them: recorded payloads as their redacted JSON.
        return _from_trace([from_dict(to_dict(event)) for event in source])
    path = Path(source)
    text = path.read_text(encoding="utf-8")
    if _is_event_line(text.lstrip().split("\n", 1)[0]):
        return _from_trace(read_events(path))
    return _from_state(LoopState.from_json(text))


def _is_event_line(line: str) -> bool:
    """Whether a file's first line is an event (a trace), not (the start of) a state."""
    try:
        first: object = json.loads(line)
    except ValueError:
        return False
    return isinstance(first, dict) and "kind" in first


def _from_state(state: LoopState) -> _Recording:
    return _Recording(
        task_id=state.task_id,
        trace_id=state.trace_id,
        opening=state.messages[: state.opening],
        responses=[response.message() for response in state.responses],
        results={(o.step, o.tool_use_id): o for o in state.observations},
        human_reasons={},
        provenance=state.provenance,
        trajectory=_trajectory([], state, detailed=False),
        detailed=False,
        model_settings=dict(state.model_settings),
        stop_reason=None if state.stop_reason is None else str(state.stop_reason),
        children=list(state.children),
    )


def _from_trace(events: list[Event]) -> _Recording:
    stop = next((event for event in reversed(events) if isinstance(event, Stop)), None)
    if stop is None or stop.opening is None:
        raise ValueError("the trace has no stop event with the run's opening messages: it cannot be replayed")
    responses: list[Message] = []
    results: dict[tuple[int, str], Observation] = {}
    human_reasons: dict[tuple[int, str], str] = {}
    for event in events:
        if isinstance(event, Proposal) and event.response is not None:
            response = event.response.json()  # redacts the whole message: once per response
            if isinstance(response, dict):
                responses.append(Message.model_construct(**cast(dict[str, Any], response)))
        if not isinstance(event, ToolResult):
            continue
        key = (event.step, event.tool_use_id)
        results[key] = Observation(
            step=event.step,
            tool_use_id=event.tool_use_id,
            tool=event.tool,
            input=cast(dict[str, Any], (None if event.input is None else event.input.json()) or {}),
            outcome=event.outcome,
            content=cast(Any, "" if event.content is None else event.content.json()),
            attempts=event.attempts,
            by_human=event.by_human,
        )
        if event.by_human and event.reason is not None:
            human_reasons[key] = event.reason
    return _Recording(
        task_id=stop.task_id or "replay",
        trace_id=stop.trace_id or "replay",
        opening=cast(list[MessageParam], stop.opening.json()),
        responses=responses,
        results=results,
        human_reasons=human_reasons,
        provenance=stop.provenance,
        trajectory=_trajectory(events, None, detailed=True),
        detailed=True,
        stop_reason=stop.stop_reason,
    )


def _config(recording: _Recording, loop: AgentLoop | None, cut: Cut | None = None) -> LoopConfig:
    """The replaying configuration: the loop's, or the recorded one; a recorded client and tools
    (and, with `cut`, a last model call that cuts the run)."""
    recorded_on = None if recording.provenance is None else platform_named(recording.provenance.platform)
    # Where the recorded run ran: its requests are built (and its model priced) as they were there.
    client = ScriptedClient(
        recording.responses if cut is None else [*recording.responses, _cuts(cut)],
        platform=recorded_on or "anthropic",
    )
    if loop is not None:
        return dataclasses.replace(
            loop.config,
            client=client,
            store=None,
            metrics=None,
            on_event=None,
            recorded=recording.results,
            cut=cut,
        )
    recorded = recording.provenance
    if recorded is None or (not recorded.tools and recording.results):
        raise ValueError("the recording has no configuration to replay with: pass loop=")
    tools = [_stand_in(entry) for entry in recorded.tools]
    policy = _policy(recorded.policy)
    spec = LoopSpec.of(
        name="replay",
        model=recorded.model,
        budget=Budget(**recorded.budget),
        policy=policy,
    )
    config = build_config(
        spec, Wiring(client=client, tools=tools, observers=Observers(metrics=None, tracing=None))
    )
    # The recorded hashes stand: the system prompt itself is not recorded, only its hash.
    return dataclasses.replace(config, provenance=recorded, recorded=recording.results, cut=cut)


def _cuts(cut: Cut) -> Callable[[Mapping[str, object]], Awaitable[Message]]:
    """A model call that cuts the run and never answers, as the recorded one."""

    async def reached(_: Mapping[str, object]) -> Message:
        await cut.reached()

    return reached


def _stand_in(entry: Mapping[str, Any]) -> Tool:
    def unreachable(**_: object) -> str:
        raise AssertionError("replay answers tool calls from the recording")

    return Tool(
        name=str(entry["name"]),
        description=str(entry.get("description") or "(replayed)"),
        input_schema=cast(dict[str, Any], entry.get("input_schema") or {"type": "object"}),
        handler=unreachable,
        requires_approval=bool(entry.get("requires_approval", False)),
    )


def _policy(raw: Mapping[str, Any]) -> Policy:
    """The recorded policy's data (its hooks are recorded by name only, and not replayed); a
    setting the recording leaves out keeps `Policy`'s default."""
    data: dict[str, Any] = {
        name: value
        for name, value in raw.items()
        if name in _POLICY_DATA and (value is not None or name == "allowed")
    }
    return Policy(**data)


_POLICY_DATA: Final = frozenset(field.name for field in dataclasses.fields(Policy)) - {
    "success",
    "approve",
    "signal_handlers",
}
"""The settings of `Policy` that are data."""


def _trajectory(events: Sequence[Event], state: LoopState | None, *, detailed: bool) -> list[str]:
    """One line per step: transitions, decisions and tool outcomes (or, from a state, tool
    outcomes only), then the stop reason."""
    if not detailed:
        assert state is not None
        outcomes = [f"tool {o.tool} {o.tool_use_id}: {o.outcome}" for o in state.observations]
        return [*outcomes, f"stop: {state.stop_reason}"]
    lines: list[str] = []
    for event in events:
        if isinstance(event, Transition):
            guard = event.guard
            lines.append(f"{event.source} -> {event.dest}" + (f" [{guard}]" if guard else ""))
        elif isinstance(event, Validation):
            lines += [f"decide {call.tool} {call.tool_use_id}: {call.decision}" for call in event.calls]
        elif isinstance(event, ToolResult):
            lines.append(f"tool {event.tool} {event.tool_use_id}: {event.outcome}")
        elif isinstance(event, Stop):
            lines.append(f"stop: {event.stop_reason}")
    return lines


def _changes(recorded: Provenance | None, replaying: Provenance) -> list[str]:
    if recorded is None:
        return ["the recording has no provenance"]
    changes: list[str] = []
    for field in ("model", "fallback_model", "version"):  # the model route and the loop's version
        if getattr(recorded, field) != getattr(replaying, field):
            changes.append(f"{field} {field_text(recorded, field)} -> {field_text(replaying, field)}")
    for field, what in (
        ("system_sha256", "system prompt"),
        ("tools_sha256", "tool manifest"),
        ("policy_sha256", "policy"),
        ("settings_sha256", "model settings"),
        ("output_sha256", "output schema"),
    ):
        if getattr(recorded, field) != getattr(replaying, field):
            changes.append(f"the {what} differs from the recording's")
    return changes


_CUTS = frozenset({StopReason.CANCELLED, StopReason.TIMEOUT})
"""The stops that cut a run short from outside (a cancel, the deadline): a replay re-enacts them."""

claim("boundloop", Divergence, ReplayReport)  # reported at its public home
