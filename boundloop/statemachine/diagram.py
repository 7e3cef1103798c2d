"""State diagrams of the loop, drawn from the transition table by transitions' diagram extension.

The diagram is drawn by a machine that `machine.build` makes, the builder of the machine every
run fires, from the same `table.STATES` and `table.TRANSITIONS`, so it cannot drift from the
loop. Guards are written on the edges as `[guard]`, the final state is marked (`--> [*]` in
mermaid, a double border in graphviz), and a run's trace can be laid over it: the states the
run visited are coloured, the state it ended in is highlighted and every edge it took is
labelled with how often (`(2x)`).

The engine is picked explicitly: mermaid text needs nothing; dot source needs the `graphviz`
Python package; svg and png also need the `dot` binary (Debian package `graphviz`). transitions
itself falls back silently from graphviz to mermaid; here a missing piece raises
`GraphvizMissing` instead.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, final

from transitions.extensions.diagrams import GraphMachine
from transitions.extensions.diagrams_mermaid import Graph as MermaidGraph

from ..errors import GraphvizMissing
from ..events import Event, Stop, Transition
from ..records import Limit, StopReason
from .machine import build
from .table import INITIAL, STATES, TRANSITIONS, TransitionRow

__all__ = [
    "DiagramFormat",
    "FORMATS",
    "ImageFormat",
    "TITLE",
    "TracePath",
    "mermaid_block",
    "render",
    "render_dot",
    "render_image",
    "render_mermaid",
    "replace_mermaid_block",
    "require_dot",
    "state_names",
    "trace_path",
]

DiagramFormat = Literal["mermaid", "dot", "svg", "png"]
FORMATS: Final[tuple[DiagramFormat, ...]] = ("mermaid", "dot", "svg", "png")
ImageFormat = Literal["svg", "png"]
TITLE: Final = "boundloop"

_Engine = Literal["mermaid", "graphviz"]


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class TracePath:
    """The path one or more runs took through the transition table."""

    counts: Mapping[int, int]
    """Index into `TRANSITIONS` -> how often that edge was taken."""
    visited: frozenset[str]
    """Every state the runs were in."""
    last: str | None
    """The state the last run ended in (None for a trace without transitions)."""


def trace_path(trace: Iterable[Event]) -> TracePath:
    """Count how often each edge of the table was taken in a trace.

    Edges that share trigger, source and destination (`validate -> stopped` on
    `final_answer` or `must_stop`) are told apart by the `guard` the transition event
    records, or else by the stop reason of the run.

    Args:
        trace: the events of one or more runs, in order (`LoopResult.events`, `read_events`).

    Returns:
        The edge counts, the visited states and the last state.

    Raises:
        ValueError: the trace holds a transition that is not in the table.
    """
    counts: Counter[int] = Counter()
    visited: set[str] = set()
    last: str | None = None
    pending: list[tuple[Transition, list[int]]] = []
    for event in trace:
        if isinstance(event, Stop):
            for waiting, candidates in pending:
                counts[_pick(waiting, candidates, event.stop_reason)] += 1
            pending.clear()
        if not isinstance(event, Transition):
            continue
        candidates = _candidates(event)
        visited.update((event.source, event.dest))
        last = event.dest
        if len(candidates) == 1:
            counts[candidates[0]] += 1
        else:
            pending.append((event, candidates))
    for waiting, candidates in pending:
        counts[_pick(waiting, candidates, None)] += 1
    return TracePath(counts=dict(counts), visited=frozenset(visited), last=last)


def _candidates(event: Transition) -> list[int]:
    found = [
        index
        for index, row in enumerate(TRANSITIONS)
        if row["source"] == event.source and row["dest"] == event.dest and row["trigger"] == event.trigger
    ]
    if not found:
        raise ValueError(
            f"the trace has a transition {event.source} -> {event.dest} (trigger {event.trigger!r}) "
            "that is not in the transition table"
        )
    return found


def _pick(event: Transition, candidates: list[int], stop_reason: str | None) -> int:
    wanted = [event.guard] if event.guard is not None else []
    if stop_reason == StopReason.COMPLETED:
        wanted.append("final_answer")
    elif Limit.stopping(stop_reason) is not None:
        wanted.append("budget_spent")
    elif stop_reason == StopReason.NEEDS_HUMAN:
        wanted.append("breaker_open")
    wanted.append("must_stop")
    for guard in wanted:
        for index in candidates:
            if guard in TRANSITIONS[index]["conditions"]:
                return index
    return candidates[0]


def render_mermaid(trace: Iterable[Event] | None = None, *, title: str = TITLE) -> str:
    """The state diagram as mermaid `stateDiagram-v2` text, deterministic for a given table.

    Args:
        trace: lay this run's path over the diagram.
        title: the diagram's title.

    Raises:
        ValueError: the trace holds a transition that is not in the table.
    """
    graph = _graph("mermaid", trace)
    source: str = graph.get_graph(title=title).source
    # transitions writes the title as a bare front-matter line; mermaid reads `title:`.
    front = f"---\n{title}\n---\n"
    if source.startswith(front):
        source = f"---\ntitle: {title}\n---\n" + source[len(front) :]
    return "\n".join(line.rstrip() for line in source.splitlines()) + "\n"


def replace_mermaid_block(markdown: str, mermaid: str) -> str:
    """Replace the first fenced mermaid block of a markdown text (append one if there is none).

    `boundloop diagram --output docs/state-machine.md` uses this, so the prose around the
    diagram stays as written.
    """
    fence = "```mermaid\n"
    start = markdown.find(fence)
    if start < 0:
        return markdown.rstrip() + ("\n\n" if markdown.strip() else "") + fence + mermaid + "```\n"
    end = markdown.find("```", start + len(fence))
    if end < 0:
        raise ValueError("the mermaid block is not closed with ```")
    return markdown[: start + len(fence)] + mermaid + markdown[end:]


def mermaid_block(markdown: str) -> str | None:
    """The text of the first fenced mermaid block of a markdown text, or None."""
    fence = "```mermaid\n"
    start = markdown.find(fence)
    if start < 0:
        return None
    end = markdown.find("```", start + len(fence))
    return None if end < 0 else markdown[start + len(fence) : end]


def render_dot(trace: Iterable[Event] | None = None, *, title: str = TITLE) -> str:
    """The state diagram as graphviz dot source.

    Args:
        trace: lay this run's path over the diagram.
        title: the diagram's title.

    Raises:
        GraphvizMissing: the `graphviz` Python package is not installed.
        ValueError: the trace holds a transition that is not in the table.
    """
    graph = _graph("graphviz", trace)
    source: str = graph.get_graph(title=title).source
    return source


def render_image(
    format: ImageFormat,
    path: str | Path | None = None,
    trace: Iterable[Event] | None = None,
    *,
    title: str = TITLE,
) -> bytes:
    """Render the state diagram to svg or png with graphviz's `dot`.

    Args:
        format: `"svg"` or `"png"`.
        path: also write the image to this file.
        trace: lay this run's path over the diagram.
        title: the diagram's title.

    Returns:
        The image bytes.

    Raises:
        GraphvizMissing: the `dot` binary or the `graphviz` Python package is missing.
        ValueError: an unknown format, or a trace transition that is not in the table.
    """
    if format not in ("svg", "png"):
        raise ValueError(f"image format must be 'svg' or 'png', got {format!r}")
    require_dot()
    graph = _graph("graphviz", trace)
    digraph = graph.get_graph(title=title)
    # graphviz ships no type information: use it as Any, at this one call.
    graphviz: Any = importlib.import_module("graphviz")
    try:
        image: bytes = digraph.pipe(format=format)
    except graphviz.ExecutableNotFound as exc:
        raise GraphvizMissing("the graphviz `dot` binary", _DOT_FIX) from exc
    if path is not None:
        Path(path).write_bytes(image)
    return image


def render(format: DiagramFormat, trace: Iterable[Event] | None = None, *, title: str = TITLE) -> bytes:
    """Render the diagram in any format, as bytes (text formats are UTF-8).

    Raises:
        GraphvizMissing: the format needs graphviz and it is missing.
        ValueError: an unknown format, or a trace transition that is not in the table.
    """
    if format == "mermaid":
        return render_mermaid(trace, title=title).encode()
    if format == "dot":
        return render_dot(trace, title=title).encode()
    if format in ("svg", "png"):
        return render_image(format, trace=trace, title=title)
    raise ValueError(f"unknown diagram format {format!r}; choose one of {', '.join(FORMATS)}")


_DOT_FIX: Final = "install the system package 'graphviz' (apt-get install graphviz, brew install graphviz)"
_PACKAGE_FIX: Final = "install the Python package: pip install graphviz"


def require_dot() -> str:
    """The path of graphviz's `dot` binary.

    Raises:
        GraphvizMissing: `dot` is not on PATH.
    """
    dot = shutil.which("dot")
    if dot is None:
        raise GraphvizMissing("the graphviz `dot` binary", _DOT_FIX)
    return dot


# -- the diagram machine ------------------------------------------------------------------


def _label(row: TransitionRow, taken: int) -> str:
    label = row["trigger"]
    if row["conditions"]:
        label += f" [{' & '.join(row['conditions'])}]"
    if taken:
        label += f" ({taken}x)"
    return label


def _graph(engine: _Engine, trace: Iterable[Event] | None) -> Any:
    """A transitions graph of the table, styled with the trace's path (transitions is untyped here)."""
    path = None if trace is None else trace_path(trace)
    counts: Mapping[int, int] = {} if path is None else path.counts
    # The runtime's builder, with transitions' GraphMachine: the diagram is the machine runs fire.
    machine = build(
        _DiagramMachine,
        TRANSITIONS,
        labels=[_label(row, counts.get(index, 0)) for index, row in enumerate(TRANSITIONS)],
        graph_engine=engine,
        show_conditions=False,
        title=TITLE,
    )
    graph: Any = machine.graph_cls(machine)
    if path is not None:
        _style(graph, path)
    return graph


def _style(graph: Any, path: TracePath) -> None:
    taken = {(TRANSITIONS[index]["source"], TRANSITIONS[index]["dest"]) for index in path.counts}
    for row in TRANSITIONS:
        pair = (row["source"], row["dest"])
        graph.custom_styles["edge"][pair[0]][pair[1]] = "previous" if pair in taken else "untaken"
    for state in sorted(path.visited):
        graph.set_node_style(state, "previous")
    if path.last is not None:
        graph.set_node_style(path.last, "active")


class _MermaidFinal(MermaidGraph):
    """transitions' flat mermaid graph, plus the `--> [*]` marker on final states."""

    def _add_nodes(self, states: list[dict[str, str]], container: list[str]) -> None:
        super()._add_nodes(states, container)
        container.extend(f"{state['name']} --> [*]" for state in states if state.get("final"))


def _graphviz_graph() -> type[Any]:
    if importlib.util.find_spec("graphviz") is None:
        raise GraphvizMissing("the `graphviz` Python package", _PACKAGE_FIX)
    from transitions.extensions.diagrams_graphviz import Graph as GraphvizGraph

    class _GraphvizFinal(GraphvizGraph):
        """transitions' graphviz graph, plus a start point and a double border on final states."""

        def _add_nodes(self, states: list[dict[str, str]], container: Any) -> None:
            super()._add_nodes(states, container)
            container.node("__start__", label="", shape="point", width="0.15")
            container.edge("__start__", str(INITIAL))
            for state in states:
                if state.get("final"):
                    container.node(state["name"], peripheries="2")

    return _GraphvizFinal


_STYLES: Final[dict[str, Any]] = {
    **GraphMachine.style_attributes,
    "node": {
        **GraphMachine.style_attributes["node"],  # type: ignore[dict-item]
        # Visited states and the state a run ended in; a double border is kept for final states.
        "active": {"color": "red", "fillcolor": "darksalmon", "peripheries": "1"},
        "previous": {"color": "blue", "fillcolor": "azure", "peripheries": "1"},
    },
    "edge": {
        "default": {"color": "black"},
        "previous": {"color": "blue", "fontcolor": "blue", "penwidth": "2"},
        "untaken": {"color": "gray60", "fontcolor": "gray50", "style": "dashed"},
    },
}


class _DiagramMachine(GraphMachine):
    """A GraphMachine that uses the engine it is told to, or fails: never a silent fallback."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.style_attributes = _STYLES

    def _init_graphviz_engine(self, graph_engine: str) -> type[Any]:
        if graph_engine == "mermaid":
            return _MermaidFinal
        if graph_engine == "graphviz":
            return _graphviz_graph()
        raise ValueError(f"unknown graph engine {graph_engine!r}")


def state_names() -> Sequence[str]:
    """Every state of the table, in table order (what a complete diagram must name)."""
    return [str(state) for state in STATES]
