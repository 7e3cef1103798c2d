"""Replay: re-drive a recorded run from its recorded model responses and tool results.

No model is called and no tool runs: the responses come from the recording, and each tool
call is answered with the result recorded for its `tool_use_id`. The replayed run goes
through the same table, guards, validation and budget as a live one, so a changed policy,
budget or tool schema shows up as a different trajectory. The report says whether the
trajectory is identical and, if not, where it first diverges.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast, final

import anyio.to_thread
from anthropic.types import Message, MessageParam

from ._core import LoopConfig, build_config, prepare
from ._core import drive as execute
from .errors import ScriptExhausted, UnhandledStop
from .loop import AgentLoop
from .policy import Policy
from .records import Observation, Provenance, StopReason
from .state import Budget, LoopResult, LoopState
from .testing import ScriptedClient
from .tools import Tool
from .trace import TraceEvent, json_default, read_trace


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

    @property
    def divergence(self) -> Divergence | None:
        """The first differing step, or None."""
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
        """The replayed trajectory is the recorded one, step for step."""
        return self.divergence is None

    def describe(self) -> str:
        """The report in a few lines, for a terminal."""
        lines = [f"replay of task {self.task_id}: {len(self.expected)} recorded steps"]
        lines += [f"  provenance: {change}" for change in self.provenance_changes]
        divergence = self.divergence
        if divergence is None:
            lines.append("identical: the same states, tool calls, decisions and stop reason")
        else:
            lines.append(f"diverged at step {divergence.index}:")
            lines.append(f"  recorded: {divergence.expected or '(the recording ended)'}")
            lines.append(f"  replayed: {divergence.got or '(the replay ended)'}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The report as a JSON object."""
        divergence = self.divergence
        return {
            "task_id": self.task_id,
            "identical": divergence is None,
            "divergence": None if divergence is None else dataclasses.asdict(divergence),
            "provenance_changes": self.provenance_changes,
            "expected": self.expected,
            "got": self.got,
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
    provenance: Provenance | None
    trajectory: list[str]
    detailed: bool
    """The trajectory holds transitions and decisions (from a trace), not only tool outcomes."""


async def replay(
    source: LoopState | Sequence[TraceEvent] | str | Path, loop: AgentLoop | None = None
) -> ReplayReport:
    """Re-drive a recorded run with no model and no real tools, and compare the trajectories.

    Args:
        source: a `LoopState` (e.g. from a store), a run's trace events (`LoopResult.trace`,
            or the traces of a run and its resumes, in order), or the path of a state JSON
            file or of a JSON-lines trace written by `LoopResult.write_trace` / `--trace`.
        loop: an `AgentLoop` whose configuration (tools, policy, budget) the recording is
            replayed through; default: the configuration recorded with the run.

    Returns:
        The report: identical or the first divergence, and provenance changes.

    Raises:
        ValueError: the source is not a state or trace, or records too little to replay.
        OSError: the file cannot be read.
    """
    recording = await anyio.to_thread.run_sync(_recording, source)
    config = _config(recording, loop)
    state = LoopState(
        task_id=recording.task_id,
        trace_id=recording.trace_id,
        goal="(replay)",
        started_at=0.0,
        provenance=config.provenance,
        messages=list(recording.opening),
        opening=len(recording.opening),
    )
    result: LoopResult | None
    try:
        result = await execute(config, state)
        events = list(result.trace)
        decisions = _human_decisions(recording, result.state)
        while decisions is not None:  # the recorded run went on after a human decided: so does this one
            approvals, reply = decisions
            resumed = prepare(result.state, approvals, reply)
            result = await execute(config, result.state, resumed=resumed)
            events += [event for event in result.trace if event.kind != "resume"]
            decisions = _human_decisions(recording, result.state)
        got = _trajectory(events, result.state, detailed=recording.detailed)
    except (ScriptExhausted, UnhandledStop) as exc:
        partial = exc.result if isinstance(exc, UnhandledStop) else None
        result = partial
        got = (
            [] if partial is None else _trajectory(partial.trace, partial.state, detailed=recording.detailed)
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
        text = str(answer.content)
        if answer.outcome == "denied" and " was denied by a human" in text:
            reason = text.split(" was denied by a human", 1)[1].removesuffix("; not run")
            approvals[pending.tool_use_id] = reason.removeprefix(": ") if reason else False
        else:
            approvals[pending.tool_use_id] = True
    reply: str | None = None
    if state.escalation is not None:
        answer = recording.results.get((state.escalation.step, state.escalation.tool_use_id))
        if answer is None:
            return None
        reply = str(answer.content)
    return approvals, reply


def _recording(source: LoopState | Sequence[TraceEvent] | str | Path) -> _Recording:
    """The recording in `source` (reads files: call it in a worker thread)."""
    if isinstance(source, LoopState):
        return _from_state(source)
    if not isinstance(source, str | Path):
        # Events as a trace file holds them: the data as JSON, SDK objects as dicts.
        plain = json.loads(json.dumps([event.to_dict() for event in source], default=json_default))
        return _from_trace([TraceEvent.from_dict(event) for event in plain])
    path = Path(source)
    text = path.read_text(encoding="utf-8")
    first = text.lstrip().split("\n", 1)[0]
    if '"kind"' in first and '"schema_version"' not in first:  # trace lines are events
        return _from_trace(read_trace(path))
    return _from_state(LoopState.from_json(text))


def _from_state(state: LoopState) -> _Recording:
    return _Recording(
        task_id=state.task_id,
        trace_id=state.trace_id,
        opening=state.messages[: state.opening],
        responses=list(state.responses),
        results={(o.step, o.tool_use_id): o for o in state.observations},
        provenance=state.provenance,
        trajectory=_trajectory([], state, detailed=False),
        detailed=False,
    )


def _from_trace(events: list[TraceEvent]) -> _Recording:
    stops = [event for event in events if event.kind == "stop"]
    if not stops or "opening" not in stops[-1].data:
        raise ValueError("the trace has no stop event with the run's opening messages: it cannot be replayed")
    stop = stops[-1].data
    responses = [
        Message.model_construct(**cast(dict[str, Any], event.data["response"]))
        for event in events
        if event.kind == "proposal" and isinstance(event.data.get("response"), dict)
    ]
    results = {
        (event.step, str(event.data["tool_use_id"])): Observation(
            step=event.step,
            tool_use_id=str(event.data["tool_use_id"]),
            tool=str(event.data["tool"]),
            input=cast(dict[str, Any], event.data.get("input") or {}),
            outcome=event.data["outcome"],
            content=event.data.get("content", ""),
            attempts=int(event.data.get("attempts") or 0),
        )
        for event in events
        if event.kind == "tool_result"
    }
    raw_provenance = stop.get("provenance")
    return _Recording(
        task_id=str(stop.get("task_id", "replay")),
        trace_id=str(stop.get("trace_id", "replay")),
        opening=cast(list[MessageParam], stop["opening"]),
        responses=responses,
        results=results,
        provenance=None
        if not isinstance(raw_provenance, dict)
        else Provenance(**cast(dict[str, Any], raw_provenance)),
        trajectory=_trajectory(events, None, detailed=True),
        detailed=True,
    )


def _config(recording: _Recording, loop: AgentLoop | None) -> LoopConfig:
    """The replaying configuration: the loop's, or the recorded one; a recorded client and tools."""
    client = ScriptedClient(recording.responses)
    if loop is not None:
        return dataclasses.replace(
            loop.config, client=client, store=None, metrics=None, on_event=None, recorded=recording.results
        )
    recorded = recording.provenance
    if recorded is None or (not recorded.tools and recording.results):
        raise ValueError("the recording has no configuration to replay with: pass loop=")
    tools = [_stand_in(entry) for entry in recorded.tools]
    policy = _policy(recorded.policy)
    config = build_config(
        client,
        model=recorded.model,
        tools=tools,
        budget=Budget(**recorded.budget),
        policy=policy,
        system=None,
        max_tokens=4096,
        name="replay",
        on_tool_error=recorded.policy.get("on_tool_error", "report"),
        max_tool_output_chars=100_000,
        redact=None,
        metrics=None,
        prices=None,
        signal_handlers=None,
        on_event=None,
        store=None,
    )
    # The recorded hashes stand: the system prompt itself is not recorded, only its hash.
    return dataclasses.replace(config, provenance=recorded, recorded=recording.results)


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
    sets = {name: raw.get(name) or () for name in ("forbidden", "requires_approval", "required_evidence")}
    return Policy(
        allowed=raw.get("allowed"),
        forbidden=sets["forbidden"],
        requires_approval=sets["requires_approval"],
        required_evidence=sets["required_evidence"],
        on_forbidden=raw.get("on_forbidden", "stop"),
        on_missing_evidence=raw.get("on_missing_evidence", "stop"),
        on_max_tokens=raw.get("on_max_tokens", "stop"),
        max_continuations=int(raw.get("max_continuations", 2)),
        escalation_tool=raw.get("escalation_tool"),
    )


def _trajectory(events: Sequence[TraceEvent], state: LoopState | None, *, detailed: bool) -> list[str]:
    """One line per step: transitions, decisions and tool outcomes (or, from a state, tool
    outcomes only), then the stop reason."""
    if not detailed:
        assert state is not None
        outcomes = [f"tool {o.tool} {o.tool_use_id}: {o.outcome}" for o in state.observations]
        return [*outcomes, f"stop: {state.stop_reason}"]
    lines: list[str] = []
    for event in events:
        data = event.data
        if event.kind == "transition":
            guard = data.get("guard")
            lines.append(f"{event.source} -> {event.dest}" + (f" [{guard}]" if guard else ""))
        elif event.kind == "validation":
            for call in cast(Iterable[Mapping[str, Any]], data.get("calls") or []):
                lines.append(f"decide {call.get('tool')} {call.get('tool_use_id')}: {call.get('decision')}")
        elif event.kind == "tool_result":
            lines.append(f"tool {data.get('tool')} {data.get('tool_use_id')}: {data.get('outcome')}")
        elif event.kind == "stop":
            lines.append(f"stop: {data.get('stop_reason')}")
    return lines


def _changes(recorded: Provenance | None, replaying: Provenance) -> list[str]:
    if recorded is None:
        return ["the recording has no provenance"]
    changes: list[str] = []
    if recorded.model != replaying.model:
        changes.append(f"model {recorded.model} -> {replaying.model}")
    for field, what in (
        ("system_sha256", "system prompt"),
        ("tools_sha256", "tool manifest"),
        ("policy_sha256", "policy"),
    ):
        if getattr(recorded, field) != getattr(replaying, field):
            changes.append(f"the {what} differs from the recording's")
    return changes
