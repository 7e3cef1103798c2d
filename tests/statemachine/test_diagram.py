"""The state diagram: drawn from the table, kept in docs, laid over a run's trace, rendered by graphviz."""

from __future__ import annotations

import json
import re
import struct
from pathlib import Path

import anyio
import pytest

from boundloop import AgentLoop, Budget, GraphvizMissing, Observers, ScriptedClient, tool
from boundloop.events import Event, Transition, read_events
from boundloop.statemachine.diagram import (
    FORMATS,
    mermaid_block,
    render,
    render_dot,
    render_image,
    render_mermaid,
    replace_mermaid_block,
    state_names,
    trace_path,
)
from boundloop.statemachine.table import TRANSITIONS
from tests.conftest import require_binary
from tests.helpers import text, tool_use

DOC = Path(__file__).resolve().parents[2] / "docs" / "state-machine.md"
GUARD_NAMES = sorted({guard for row in TRANSITIONS for guard in row["conditions"]})


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


async def run_trace(*script: dict[str, object], budget: Budget | None = None) -> list[Event]:
    loop = AgentLoop(
        ScriptedClient(script),
        model="claude-sonnet-4-5",
        tools=[lookup],
        budget=budget or Budget(max_steps=6),
        observers=Observers(metrics=None),
    )
    result = await loop.run("Look up a and b.")
    return list(result.events)


def edge_lines(mermaid: str) -> dict[tuple[str, str], str]:
    lines = re.findall(r"^\s*(\w+) --> (\w+): (.*)$", mermaid, flags=re.MULTILINE)
    return {(source, dest): label for source, dest, label in lines}


def test_mermaid_names_every_state_guard_and_edge() -> None:
    """The mermaid diagram has every state, every row's trigger and guard, and marks start and final."""
    mermaid = render_mermaid()
    for state in state_names():
        assert f'state "{state}" as {state}' in mermaid
    edges = edge_lines(mermaid)
    for row in TRANSITIONS:
        label = row["trigger"] + "".join(f" [{guard}]" for guard in row["conditions"])
        assert label in edges[(row["source"], row["dest"])].split(" | ")
    assert set(GUARD_NAMES) <= set(re.findall(r"\[(\w+)\]", mermaid))
    assert "[*] --> assemble" in mermaid
    assert "stopped --> [*]" in mermaid
    assert mermaid.startswith("---\ntitle: boundloop\n---\nstateDiagram-v2\n")


def test_mermaid_is_deterministic() -> None:
    """Two renders of the same table are byte-identical, so a committed diagram can be compared."""
    assert render_mermaid() == render_mermaid()


def test_committed_diagram_matches_the_table() -> None:
    """docs/state-machine.md holds the current diagram; regenerate it when the table changes."""
    committed = mermaid_block(DOC.read_text(encoding="utf-8"))
    assert committed == render_mermaid(), (
        "docs/state-machine.md is stale: run `boundloop diagram --output docs/state-machine.md`"
    )


def test_replace_mermaid_block_keeps_the_prose() -> None:
    """Updating a markdown file swaps only the mermaid block and keeps the text around it."""
    before = "# Title\n\nprose\n\n```mermaid\nold\n```\n\nafter\n"
    after = replace_mermaid_block(before, "new\n")
    assert after == "# Title\n\nprose\n\n```mermaid\nnew\n```\n\nafter\n"
    assert mermaid_block(after) == "new\n"
    assert mermaid_block(replace_mermaid_block("# Only prose\n", "x\n")) == "x\n"


async def test_trace_counts_each_edge_taken() -> None:
    """A run of two tool turns and an answer counts each edge it took, and ends in stopped."""
    trace = await run_trace(
        tool_use(("lookup", {"key": "a"})),
        tool_use(("lookup", {"key": "b"})),
        text("a and b found"),
    )
    path = trace_path(trace)
    taken = {
        (TRANSITIONS[i]["source"], TRANSITIONS[i]["dest"], tuple(TRANSITIONS[i]["conditions"])): n
        for i, n in path.counts.items()
    }
    assert taken == {
        ("assemble", "propose", ("within_budget",)): 3,
        ("propose", "validate", ()): 3,
        ("validate", "act", ("has_tool_calls",)): 2,
        ("act", "observe", ()): 2,
        ("observe", "assemble", ("within_budget",)): 2,
        ("validate", "stopped", ("final_answer",)): 1,
    }
    assert path.last == "stopped"
    assert path.visited == set(state_names())


async def test_trace_overlay_in_mermaid() -> None:
    """The overlaid mermaid diagram labels taken edges with their counts and colours the path."""
    trace = await run_trace(tool_use(("lookup", {"key": "a"})), text("found"))
    mermaid = render_mermaid(trace)
    edges = edge_lines(mermaid)
    assert edges[("assemble", "propose")] == "assembled [within_budget] (2x) | assembled [answer_at_limit]"
    assert edges[("validate", "act")] == "validated [has_tool_calls] (1x)"
    assert edges[("validate", "stopped")] == "validated [final_answer] (1x) | validated [must_stop] | halt"
    assert edges[("validate", "assemble")] == "validated [resume_turn] | validated [answer_at_limit]"
    assert "Class stopped s_active" in mermaid
    assert "Class act s_previous" in mermaid


async def test_budget_stop_is_drawn_on_the_budget_edge() -> None:
    """A run stopped by max_steps after its tools is counted on observe -> stopped [budget_spent]."""
    trace = await run_trace(tool_use(("lookup", {"key": "a"})), text("unused"), budget=Budget(max_steps=1))
    edges = edge_lines(render_mermaid(trace))
    assert edges[("observe", "stopped")] == (
        "observed [breaker_open] | observed [budget_spent] (1x) | observed [tool_failed] | halt"
    )


async def test_trace_round_trips_through_jsonl(tmp_path: Path) -> None:
    """A trace written as JSON lines reads back into the same overlay."""
    trace = await run_trace(tool_use(("lookup", {"key": "a"})), text("found"))
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(event.to_dict()) + "\n" for event in trace), encoding="utf-8")
    assert render_mermaid(await anyio.to_thread.run_sync(read_events, path)) == render_mermaid(trace)


def test_read_trace_names_the_bad_line(tmp_path: Path) -> None:
    """A line that is not an event is reported with its file and line number."""
    path = tmp_path / "bad.jsonl"
    first = {"kind": "run_started", "seq": 0, "task_id": "t", "at": 0.0, "step": 0, "trace_id": "tr"}
    path.write_text(
        json.dumps({**first, "model": "m", "schema_version": 2}) + "\nnot json\n", encoding="utf-8"
    )
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: not an event \(Expecting value"):
        read_events(path)


def test_unknown_transition_in_trace_is_an_error() -> None:
    """A trace with an edge the table does not have (an older loop) is rejected, not drawn."""
    event = Transition(
        seq=0, task_id="t", step=0, at=0.0, source="act", dest="propose", trigger="acted", duration_s=0.0
    )
    with pytest.raises(ValueError, match="act -> propose"):
        trace_path([event])


def test_dot_source_names_every_state_and_marks_final() -> None:
    """The graphviz source has every state, every guard, a start point and a double-bordered final state."""
    dot = render_dot()
    for state in state_names():
        assert re.search(rf"^\s*{state} \[", dot, flags=re.MULTILINE)
    for guard in GUARD_NAMES:
        assert f"[{guard}]" in dot
    assert "__start__ -> assemble" in dot
    assert "stopped [peripheries=2]" in dot


def test_missing_dot_binary_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Without the dot binary, svg rendering raises GraphvizMissing naming the graphviz package."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GraphvizMissing, match="install the system package 'graphviz'"):
        render_image("svg")


def test_unknown_format_is_rejected() -> None:
    """Only the listed formats render."""
    assert FORMATS == ("mermaid", "dot", "svg", "png")
    with pytest.raises(ValueError, match="unknown diagram format"):
        render("pdf")  # type: ignore[arg-type]


@pytest.mark.integration
async def test_svg_and_png_through_real_graphviz(tmp_path: Path) -> None:
    """Real graphviz renders an svg naming every state and a valid png of non-trivial size."""
    require_binary("dot", "graphviz")
    trace = await run_trace(tool_use(("lookup", {"key": "a"})), text("found"))
    svg_path, png_path = tmp_path / "loop.svg", tmp_path / "loop.png"
    svg = await anyio.to_thread.run_sync(render_image, "svg", svg_path, trace)
    png = await anyio.to_thread.run_sync(render_image, "png", png_path)

    assert svg_path.read_bytes() == svg
    svg_text = svg.decode()
    assert "<svg" in svg_text
    assert svg_text.rstrip().endswith("</svg>")
    assert len(svg) > 5_000
    for state in state_names():
        assert f">{state}</text>" in svg_text
    assert "(1x)" in svg_text

    assert png_path.read_bytes() == png
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    assert png[12:16] == b"IHDR"
    width, height = struct.unpack(">II", png[16:24])
    assert width > 400
    assert height > 100
    assert len(png) > 10_000
