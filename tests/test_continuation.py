"""The state is the run: continuing from any checkpoint gives the same rest of the trajectory.

Every trajectory runs once with a store that keeps each checkpoint. Then, for each
checkpoint, a fresh `AgentLoop` with the same configuration continues from the state read
back from JSON, with a model that serves only the responses not yet consumed; the rest of
the trajectory must be identical: the transitions (a state saved in `act` goes through
`validate` once more first), the tool calls, the transcript, the stop reason and the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from boundloop import Budget, LoopResult, LoopState, Observers, Policy, ScriptedClient, StopReason
from boundloop.events import Event, ToolResult, Transition
from boundloop.statemachine import Phase, Trigger
from tests.helpers import blocks, text, tool_use
from tests.test_loop import TRAJECTORIES, make_loop

JSON = dict[str, Any]


@dataclass
class Checkpoint:
    state_json: str
    transitions_before: int
    """Transitions the run had taken when the state was saved."""


@dataclass
class RecordingStore:
    """A checkpoint store that keeps every save, with where in the trace it happened."""

    events: list[Event] = field(default_factory=list[Event])
    saved: list[Checkpoint] = field(default_factory=list[Checkpoint])

    async def save(self, state: LoopState) -> None:
        taken = sum(1 for event in self.events if event.kind == "transition")
        self.saved.append(Checkpoint(state.to_json(), taken))

    async def load(self, task_id: str) -> LoopState | None:
        return None


VALIDATED_AGAIN = (Phase.VALIDATE, Phase.ACT, Trigger.VALIDATED, "has_tool_calls")
"""The edge a run continued from a checkpoint in `act` takes first: its calls are decided again."""


def edges(trace: Sequence[Event]) -> list[tuple[str | None, str | None, str | None, Any]]:
    return [(e.source, e.dest, e.trigger, e.guard) for e in trace if isinstance(e, Transition)]


def tool_results(trace: Sequence[Event]) -> list[tuple[Any, ...]]:
    return [(e.tool, e.tool_use_id, e.outcome) for e in trace if isinstance(e, ToolResult)]


def transcript(result: LoopResult) -> list[list[JSON]]:
    return [blocks(message) for message in result.messages]


EXTRA = [
    pytest.param(
        [tool_use(("broken", {"key": "a"}), ("broken", {"key": "b"})), text("never")],
        {},
        StopReason.NEEDS_HUMAN,
        id="breaker-opens",
    ),
    pytest.param(
        [tool_use(("lookup", {"key": "a"})), tool_use(("lookup", {"key": "a"})), text("done")],
        {},
        StopReason.COMPLETED,
        id="repeat-answered-from-history",
    ),
    pytest.param(
        [tool_use(("lookup", {"key": "a"})), tool_use(("lookup", {"key": "b"})), text("best effort")],
        {"budget": Budget(max_steps=2, on_exhausted="final_answer")},
        StopReason.MAX_STEPS,
        id="final-answer-at-max-steps",
    ),
    pytest.param(
        [tool_use(("lookup", {"key": "a"}), ("lookup_sync", {"key": "b"})), text("best effort")],
        {"budget": Budget(max_steps=4, max_tool_calls=1, on_exhausted="final_answer")},
        StopReason.MAX_TOOL_CALLS,
        id="final-answer-at-max-tool-calls",
    ),
    pytest.param(
        [text("half", stop_reason="max_tokens"), tool_use(("lookup", {"key": "a"})), text("done")],
        {"policy": Policy(on_max_tokens="continue", required_evidence={"lookup"})},
        StopReason.COMPLETED,
        id="continuation-then-evidence",
    ),
]
CASES = [pytest.param(p.values[0], p.values[1], p.values[3], id=p.id) for p in TRAJECTORIES] + EXTRA


@pytest.mark.parametrize(("script", "options", "expected_stop"), CASES)
async def test_continuing_from_every_checkpoint_gives_the_same_trajectory(
    script: list[JSON], options: JSON, expected_stop: StopReason
) -> None:
    """From each saved state, a fresh loop goes on exactly as the original run did."""
    script = [{**item, "id": f"msg_{index}"} for index, item in enumerate(script)]
    first_client = ScriptedClient(script)
    store = RecordingStore()
    original = await make_loop(
        first_client, store=store, observers=Observers(on_event=store.events.append), **options
    ).run("goal")
    assert original.stop_reason is expected_stop
    assert store.saved, "every run saves at least its final checkpoint"
    assert store.saved[-1].state_json == original.state.to_json()
    for checkpoint in store.saved:
        state = LoopState.from_json(checkpoint.state_json)
        rest = script[len(state.responses) :]
        client = ScriptedClient(rest)
        where = f"checkpoint in {state.phase} at step {state.step}"
        # A state saved in act is validated again before its calls run: one more edge first.
        again = [VALIDATED_AGAIN] if state.phase is Phase.ACT else []
        continued = await make_loop(client, **options)._continue(state)
        assert edges(continued.events) == again + edges(original.events)[checkpoint.transitions_before :], (
            where
        )
        expected_results = tool_results(original.events)[
            sum(
                1
                for e in original.events[: _event_index(original.events, checkpoint)]
                if e.kind == "tool_result"
            ) :
        ]
        assert tool_results(continued.events) == expected_results, where
        assert transcript(continued) == transcript(original), where
        assert continued.stop_reason is original.stop_reason, where
        assert continued.answer == original.answer, where
        assert client.remaining == first_client.remaining, where
        assert _comparable(continued.state) == _comparable(original.state), where


def _event_index(trace: Sequence[Event], checkpoint: Checkpoint) -> int:
    """The index in the trace just after the transition the checkpoint followed."""
    seen = 0
    for index, event in enumerate(trace):
        if seen == checkpoint.transitions_before:
            return index
        if event.kind == "transition":
            seen += 1
    return len(trace)


def _comparable(state: LoopState) -> JSON:
    """The state without wall-clock figures and event counts, which differ between two sessions."""
    raw = state.to_dict()
    raw.pop("elapsed_s")
    raw.pop("next_seq")  # a continued session records its own events (resumed, a validation again)
    turn = raw["turn"]
    if turn is not None:
        turn["invoked"] = sorted(turn["invoked"])  # the order calls start in is the scheduler's
        for answer in turn["answers"]:
            if answer is not None:
                answer.pop("duration_s")
    return raw
