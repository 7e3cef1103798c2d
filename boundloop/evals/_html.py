"""The HTML report of an eval run: one self-contained page, its state diagrams drawn inline.

`render_html` writes the figures, a row per case and, for a case that did not pass, the path
its run took on the state machine next to the edges that end a run with the stop reason the
case expected. The SVG is drawn here from `STATES` and `TRANSITIONS` (graphviz may be
missing). Nothing is loaded from elsewhere, and everything a case carries is redacted and
escaped: ids, answers and failures may hold model text.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Final

from ..records import StopReason
from ..statemachine.diagram import trace_path
from ..statemachine.table import STATES, TRANSITIONS, Phase, Trigger
from ._html_live import LIVE_CSS, live_section
from ._html_live import escaped as _e
from ._report import EvalReport
from ._runner import CaseResult

# -- which edges end a run with which stop reason ---------------------------------------


def _stop_row(source: Phase, guard: str | None = None) -> int:
    """The index of the row `source -> stopped` on `guard` (None: the HALT row)."""
    for index, row in enumerate(TRANSITIONS):
        if row["source"] != source or row["dest"] != Phase.STOPPED:
            continue
        if (row["trigger"] == Trigger.HALT) if guard is None else guard in row["conditions"]:
            return index
    raise LookupError(f"TRANSITIONS has no edge {source} -> stopped [{guard or 'halt'}]")


_HALTS: Final = frozenset(_stop_row(phase) for phase in STATES if phase is not Phase.STOPPED)
_ASSEMBLE_SPENT: Final = _stop_row(Phase.ASSEMBLE, "budget_spent")
_OBSERVE_SPENT: Final = _stop_row(Phase.OBSERVE, "budget_spent")
_MUST_STOP: Final = _stop_row(Phase.VALIDATE, "must_stop")
# Tokens, cost and time: `_budget.spent`/`call_spent` in assemble, `spent` in observe, and
# `_validation._batch_stop` (no batch runs past a ceiling) through `stop_at` in validate.
_CEILINGS: Final = frozenset({_ASSEMBLE_SPENT, _OBSERVE_SPENT, _MUST_STOP})
# With `on_exhausted="final_answer"` the step or tool-call budget's reason is decided first; the
# final-answer call that follows ends in validate [must_stop], or halts in assemble or propose when it fails
# (`_propose._failed` keeps the reason) or is interrupted (`_driver.abort` keeps a reason already decided).
_FINAL_CALL: Final = frozenset({_MUST_STOP, _stop_row(Phase.ASSEMBLE), _stop_row(Phase.PROPOSE)})

STOP_EDGES: Final[Mapping[StopReason, frozenset[int]]] = MappingProxyType(
    {
        # `_validation.validate`: a FINAL route (`stops.on_end_turn`) -> finish(COMPLETED).
        StopReason.COMPLETED: frozenset({_stop_row(Phase.VALIDATE, "final_answer")}),
        # `_driver.execute` -> abort(FAILED) on any exception, in any state (model errors make
        # propose return HALT); `stops.on_tool_use`: tool_use without a tool_use block.
        StopReason.FAILED: _HALTS | {_MUST_STOP},
        StopReason.REFUSED: frozenset({_MUST_STOP}),  # stops.on_refusal
        # `_validation._batch_stop`: the model asked a human, or a call needs approval;
        # `_budget.stop_at` from observe: the circuit breaker (errors in a row, repeats).
        StopReason.NEEDS_HUMAN: frozenset({_MUST_STOP, _stop_row(Phase.OBSERVE, "breaker_open")}),
        # `_driver.execute`: the cancel event or the caller's cancellation, in any state.
        StopReason.CANCELLED: _HALTS,
        StopReason.POLICY_BLOCKED: frozenset({_MUST_STOP}),  # _validation._batch_stop: forbidden
        StopReason.EVIDENCE_MISSING: frozenset({_MUST_STOP}),  # stops.on_end_turn
        StopReason.INVALID_OUTPUT: frozenset({_MUST_STOP}),  # _core.output.checked_final
        # `_budget.spent` in assemble and in observe; then the final-answer call, if due.
        StopReason.MAX_STEPS: _FINAL_CALL | {_ASSEMBLE_SPENT, _OBSERVE_SPENT},
        # `_validation._batch_stop`: the batch exceeds what is left; a final answer due past a
        # ceiling is dropped in assemble, which then stops [budget_spent].
        StopReason.MAX_TOOL_CALLS: _FINAL_CALL | {_ASSEMBLE_SPENT},
        # A ceiling seen by a check, or the deadline's cancel scope in any state (`abort`).
        StopReason.TIMEOUT: _CEILINGS | _HALTS,
        StopReason.TOKEN_BUDGET: _CEILINGS,
        StopReason.COST_BUDGET: _CEILINGS,
        StopReason.TRUNCATED: frozenset({_MUST_STOP}),  # stops.on_max_tokens
        StopReason.CONTEXT_EXCEEDED: frozenset({_MUST_STOP}),  # stops.on_context_exceeded
        # `_dispatch.act` decides it, observe stops [tool_failed]; interrupted in between (the
        # checkpoint after act), `abort` keeps it and halts from observe.
        StopReason.TOOL_FAILURE: frozenset(
            {_stop_row(Phase.OBSERVE, "tool_failed"), _stop_row(Phase.OBSERVE)}
        ),
    }
)
"""Stop reason -> the rows of `TRANSITIONS` (indices) through which a run can end with it.

Derived from where the handlers and the driver set each reason, with the default signal
handlers the eval cases run on (a custom `SignalHandler` may stop with any reason through
validate [must_stop]). A failing `on_event` hook or store can also halt a run whose stop
was just decided, keeping its reason: faults of the host, not paths of the loop, left out.
"""

# -- the diagram ------------------------------------------------------------------------

_WIDTH, _HEIGHT = 420, 380
_AT: Final[Mapping[str, tuple[float, float]]] = {
    # The work cycle clockwise around a ring, `stopped` at its centre: every state has an
    # edge into it, so those are short spokes; the one chord (validate -> assemble) runs
    # between assemble and validate, away from the centre.
    Phase.ASSEMBLE: (140, 56),
    Phase.PROPOSE: (296, 56),
    Phase.VALIDATE: (366, 216),
    Phase.ACT: (216, 338),
    Phase.OBSERVE: (78, 216),
    Phase.STOPPED: (216, 216),
}
_HALF: Final = (40.0, 13.0)
_HALF_FINAL: Final = (36.0, 16.0)

_Key = tuple[str, str, bool]
"""A drawn edge: source, destination, and whether it is the HALT row."""

# Per drawn edge: its bend (px to the left of travel) and where its label is centred
# (x, y, text-anchor), placed by hand clear of every box, line and other label.
_GEOMETRY: Final[Mapping[_Key, tuple[float, float, float, str]]] = {
    (Phase.ASSEMBLE, Phase.PROPOSE, False): (0, 218, 34, "middle"),
    (Phase.PROPOSE, Phase.VALIDATE, False): (0, 338, 140, "start"),
    (Phase.VALIDATE, Phase.ACT, False): (0, 299, 297, "start"),
    (Phase.ACT, Phase.OBSERVE, False): (0, 139, 297, "end"),
    (Phase.OBSERVE, Phase.ASSEMBLE, False): (0, 117, 96, "end"),
    (Phase.VALIDATE, Phase.ASSEMBLE, False): (-45, 290, 156, "end"),
    (Phase.ASSEMBLE, Phase.STOPPED, False): (0, 172, 106, "start"),
    (Phase.VALIDATE, Phase.STOPPED, False): (0, 283, 183, "middle"),
    (Phase.OBSERVE, Phase.STOPPED, False): (0, 149, 188, "middle"),
    (Phase.ASSEMBLE, Phase.STOPPED, True): (-14, 150, 150, "end"),
    (Phase.PROPOSE, Phase.STOPPED, True): (0, 276, 90, "end"),
    (Phase.VALIDATE, Phase.STOPPED, True): (16, 289, 238, "middle"),
    (Phase.ACT, Phase.STOPPED, True): (0, 222, 290, "start"),
    (Phase.OBSERVE, Phase.STOPPED, True): (-16, 149, 238, "middle"),
}
"""A new edge of the table without an entry is drawn straight, its label at its middle."""


def _group_edges() -> dict[_Key, list[int]]:
    """Table rows by drawn edge: rows sharing source and destination share one line."""
    edges: dict[_Key, list[int]] = {}
    for index, row in enumerate(TRANSITIONS):
        key = (row["source"], row["dest"], row["trigger"] == Trigger.HALT)
        edges.setdefault(key, []).append(index)
    return edges


_EDGES: Final = _group_edges()


def _edge_id(index: int) -> str:
    """The `data-edge` of the line that draws row `index` of `TRANSITIONS` (`source-dest[:halt]`)."""
    row = TRANSITIONS[index]
    return f"{row['source']}-{row['dest']}" + (":halt" if row["trigger"] == Trigger.HALT else "")


def _half(state: str) -> tuple[float, float]:
    return _HALF_FINAL if state == Phase.STOPPED else _HALF


def _border(state: str, toward: tuple[float, float], gap: float = 0.0) -> tuple[float, float]:
    """Where the line from a state's centre toward a point leaves its box, `gap` px beyond."""
    x, y = _AT[state]
    dx, dy = toward[0] - x, toward[1] - y
    half_w, half_h = _half(state)
    scale = min(half_w / abs(dx) if dx else math.inf, half_h / abs(dy) if dy else math.inf)
    length = math.hypot(dx, dy) or 1.0
    return x + dx * scale + dx / length * gap, y + dy * scale + dy / length * gap


def _edge(
    key: _Key, rows: Sequence[int], lit: Mapping[int, int], mode: str, prefix: str
) -> tuple[str, str, str]:
    """One drawn edge: its path, its label's backing card (over lines, under boxes), its label."""
    source, dest, halt = key
    on = any(row in lit for row in rows)
    bend, x, y, anchor = _GEOMETRY.get(key, (0.0, math.nan, math.nan, "middle"))
    (x1, y1), (x2, y2) = _AT[source], _AT[dest]
    length = math.hypot(x2 - x1, y2 - y1)
    control = ((x1 + x2) / 2 + bend * (y2 - y1) / length, (y1 + y2) / 2 - bend * (x2 - x1) / length)
    start, end = _border(source, control, 1.0), _border(dest, control, 2.0)
    classes = "edge" + (" halt" if halt else "") + (f" {mode}" if on else "")
    marker = "lit" if on else "halt" if halt else "plain"
    data = f'data-edge="{_e(_edge_id(rows[0]))}" data-rows="{" ".join(map(str, rows))}"'
    path = (
        f'<path class="{classes}" {data} marker-end="url(#{prefix}-{marker})" '
        f'd="M{start[0]:.1f},{start[1]:.1f} Q{control[0]:.1f},{control[1]:.1f} {end[0]:.1f},{end[1]:.1f}"/>'
    )
    lines: list[tuple[str, bool]] = []  # one per row: its guard (and count), and whether it is lit
    for row in rows:
        text = "halt" if halt else " & ".join(TRANSITIONS[row]["conditions"])
        count = lit.get(row, 0) if mode == "taken" else 0
        if count:
            text = f"{text} \u00d7{count}".strip()
        if text and (row in lit or not halt):  # a halt is written only where it matters
            lines.append((text, row in lit))
    if not lines:
        return path, "", ""
    if math.isnan(x):
        x, y = (start[0] + 2 * control[0] + end[0]) / 4, (start[1] + 2 * control[1] + end[1]) / 4 - 6
    y -= 5.5 * (len(lines) - 1)  # centred on its lines
    spans = "".join(
        f'<tspan class="{"on" if lit_row else "off"}" x="{x:.1f}" dy="{11 if n else 0}">{_e(line)}</tspan>'
        for n, (line, lit_row) in enumerate(lines)
    )
    # A backing card, sized from the text (about 6 px a character): lines pass under a label.
    width = 6.0 * max(len(line) for line, _ in lines) + 4
    left = {"start": x - 2, "middle": x - width / 2, "end": x - width + 2}[anchor]
    card = _box(left, y - 9, width, 11.0 * len(lines) + 2, "card")
    text = f'<text class="{classes.replace("edge", "label")}" {data} text-anchor="{anchor}" y="{y:.1f}">'
    return path, card, f"{text}{spans}</text>"


def _node(state: str, visited: frozenset[str], last: str | None) -> str:
    x, y = _AT[state]
    half_w, half_h = _half(state)
    final = state == Phase.STOPPED
    classes = "node" + (" visited" if state in visited else "") + (" last" if state == last else "")
    parts = [f'<g class="{classes}" data-state="{_e(state)}">']
    if state == last:  # the ring: where the run ended
        parts.append(_rect(x, y, half_w + 4, half_h + 4, "ring"))
    parts.append(_rect(x, y, half_w, half_h, "box"))
    if final:  # a double border, as state diagrams mark a final state
        parts.append(_rect(x, y, half_w - 3, half_h - 3, "inner"))
    parts.append(f'<text x="{x:.1f}" y="{y + 4:.1f}" text-anchor="middle">{_e(state)}</text></g>')
    return "".join(parts)


def _rect(x: float, y: float, half_w: float, half_h: float, cls: str) -> str:
    return _box(x - half_w, y - half_h, 2 * half_w, 2 * half_h, cls, min(half_h, 9))


def _box(left: float, top: float, width: float, height: float, cls: str, radius: float = 2) -> str:
    return (
        f'<rect class="{cls}" x="{left:.1f}" y="{top:.1f}" width="{width:.1f}" height="{height:.1f}" '
        f'rx="{radius:.1f}"/>'
    )


def render_svg(
    lit: Mapping[int, int],
    *,
    mode: str,
    prefix: str,
    title: str,
    visited: frozenset[str] = frozenset(),
    last: str | None = None,
) -> str:
    """The state machine as an inline SVG, some edges highlighted.

    Args:
        lit: rows of `TRANSITIONS` to highlight -> how often each was taken (0: not counted).
        mode: the class of a highlighted edge: `taken` (with counts) or `expected`.
        prefix: makes the marker ids unique in the page.
        title: the image's accessible title.
        visited: states to shade.
        last: the state to ring.

    Returns:
        One `<svg>` element, well-formed XML.
    """
    markers = "".join(
        f'<marker id="{prefix}-{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="8" '
        f'markerHeight="8" markerUnits="userSpaceOnUse" orient="auto">'
        f'<path class="tip-{name}" d="M0,0 L10,5 L0,10 z"/></marker>'
        for name in ("plain", "halt", "lit")
    )
    drawn = [_edge(key, rows, lit, mode, prefix) for key, rows in _EDGES.items()]
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="machine {_e(mode)}" width="{_WIDTH}" '
        f'height="{_HEIGHT}" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" aria-labelledby="{prefix}-title">'
        f'<title id="{prefix}-title">{_e(title)}</title><defs>{markers}</defs>'
        + "".join(path for path, _, _ in drawn)
        + "".join(card for _, card, _ in drawn)
        + "".join(_node(str(state), visited, last) for state in STATES)
        + "".join(label for _, _, label in drawn)
        + f'<text class="legend" x="6" y="{_HEIGHT - 6}">dashed: halt (timeout, cancellation, failure)</text>'
        "</svg>"
    )


# -- the page ---------------------------------------------------------------------------

_CSS: Final = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#1f2328;background:#fff}
h1{font-size:22px;margin:0 0 12px}h2{font-size:17px;margin:24px 0 8px}
table{border-collapse:collapse}th,td{padding:4px 10px;border-bottom:1px solid #d0d7de;text-align:left;
vertical-align:top}th{background:#f6f8fa}td.num{text-align:right;font-variant-numeric:tabular-nums}
.desc{color:#59636e;font-size:12px}.status{font-weight:600;border-radius:4px;padding:1px 6px}
.status-passed{background:#dafbe1;color:#116329}.status-failed{background:#ffebe9;color:#a40e26}
.status-error{background:#fff1c2;color:#7d4e00}code{font-size:13px}
details{border:1px solid #d0d7de;border-radius:6px;padding:8px 12px;margin:10px 0}
summary{cursor:pointer}.diagrams{display:flex;flex-wrap:wrap;gap:16px}figure{margin:8px 0}
figcaption{font-size:13px;max-width:420px;margin-bottom:4px}
svg.machine{font:10px system-ui,sans-serif;background:#fff;border:1px solid #eaeef2}
.edge{fill:none;stroke:#8c959f;stroke-width:1.2}.edge.halt{stroke:#d0d7de;stroke-dasharray:4 3}
.edge.taken{stroke:#0969da;stroke-width:2.6;stroke-dasharray:none}
.edge.expected{stroke:#1a7f37;stroke-width:2.6;stroke-dasharray:none}
.tip-plain{fill:#8c959f}.tip-halt{fill:#d0d7de}.taken .tip-lit{fill:#0969da}.expected .tip-lit{fill:#1a7f37}
.label{fill:#59636e}.card{fill:#fff;fill-opacity:.85}
.taken .on{fill:#0969da;font-weight:600}.expected .on{fill:#1a7f37;font-weight:600}
.node .box{fill:#fff;stroke:#57606a;stroke-width:1.2}.node .inner{fill:none;stroke:#57606a}
.node.visited .box{fill:#ddf4ff}.node .ring{fill:none;stroke:#cf222e;stroke-width:2.5}
.node text{fill:#1f2328;font-size:11px}.legend{fill:#8c959f;font-size:9px}
"""

_STATUS: Final = {"passed": "pass", "failed": "fail", "error": "error", "skipped": "skipped"}
_COLUMNS: Final = (
    "case|status|expected stop|actual stop|steps|tool calls|tokens|latency ms|replay|first failure"
)


def render_html(report: EvalReport, *, title: str = "boundloop evals") -> str:
    """The report as one self-contained HTML page: inline CSS and SVG, no script, no link out.

    Args:
        report: the results of an eval run.
        title: the page's title and heading.

    Returns:
        The page, deterministic for a given report.
    """
    figures = "".join(
        f'<tr><th scope="row">{_e(k)}</th><td>{_e(v)}</td></tr>' for k, v in report.figures.rows()
    )
    details = [_details(result, n) for n, result in enumerate(report.results) if not result.passed]
    head = "".join(f'<th scope="col">{_e(column)}</th>' for column in _COLUMNS.split("|"))
    rows = "".join(_row(result) for result in report.results)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{_CSS}{LIVE_CSS}</style></head><body>\n<h1>{_e(title)}</h1>\n"
        f'<table class="figures"><tbody>{figures}</tbody></table>\n<h2>Cases</h2>\n'
        f'<table class="cases"><thead><tr>{head}</tr></thead><tbody>\n{rows}</tbody></table>\n'
        + (f"<h2>Cases that did not pass</h2>\n{''.join(details)}" if details else "")
        + live_section(report.live)
        + "</body></html>\n"
    )


def _row(result: CaseResult) -> str:
    case = result.case
    name = _e(case.case_id)
    shown = name if result.passed else f'<a href="#case-{name}">{name}</a>'
    description = f'<div class="desc">{_e(case.description)}</div>' if case.description else ""
    replay = {True: "identical", False: "diverged", None: "n/a"}[result.replay_identical]
    cells = [
        f'<td class="case" title="{_e(case.description)}">{shown}{description}</td>',
        f'<td><span class="status status-{result.status}">{_STATUS[result.status]}</span></td>',
        f"<td>{_e(case.expected.stop_reason)}</td>",
        f"<td>{'-' if result.stop_reason is None else _e(result.stop_reason)}</td>",
        *(f'<td class="num">{value:,}</td>' for value in (result.steps, result.tool_calls, result.tokens)),
        f'<td class="num">{result.duration_s * 1000:.1f}</td>',
        f'<td title="{_e(result.replay_detail)}">{replay}</td>',
        f"<td>{_e(result.first_failure)}</td>",
    ]
    return f'<tr class="status-row-{result.status}">{"".join(cells)}</tr>\n'


def _details(result: CaseResult, n: int) -> str:
    """A case that did not pass: every failure, and its path next to the expected ending."""
    case = result.case
    failures = "".join(f"<li>{_e(failure)}</li>" for failure in result.failures)
    status = f'<span class="status status-{result.status}">{_STATUS[result.status]}</span>'
    parts = [
        f'<details id="case-{_e(case.case_id)}"><summary>{status} <code>{_e(case.case_id)}</code> '
        f"{_e(result.first_failure)}</summary>",
        f'<p class="desc">{_e(case.description)}</p>' if case.description else "",
        f'<ol class="failures">{failures}</ol>',
    ]
    if result.answer is not None:
        parts.append(f'<p class="answer">answer: <q>{_e(result.answer)}</q></p>')
    try:
        path = trace_path(result.trace)
    except ValueError as exc:  # a trace from another version of the table: no diagram, say why
        parts.append(f"<p>no diagram: {_e(exc)}</p>")
        path = None
    if path is not None and path.counts:
        parts.append(_diagrams(result, n, path.counts, path.visited, path.last))
    return "".join(parts) + "</details>\n"


def _diagrams(
    result: CaseResult, n: int, counts: Mapping[int, int], visited: frozenset[str], last: str | None
) -> str:
    reason = result.case.expected.stop_reason
    rows = sorted(STOP_EDGES[reason])
    through = ", ".join(
        f"{TRANSITIONS[row]['source']} [{' & '.join(TRANSITIONS[row]['conditions']) or 'halt'}]"
        for row in rows
    )
    got = "-" if result.stop_reason is None else result.stop_reason
    run_caption = f"this run: ended <code>{_e(got)}</code> in <code>{_e(last)}</code>"
    expected_caption = f"expected: a run ends <code>{_e(reason)}</code> through: {_e(through)}"
    run = render_svg(counts, mode="taken", prefix=f"d{n}-run", title="this run", visited=visited, last=last)
    expected = render_svg(
        dict.fromkeys(rows, 0), mode="expected", prefix=f"d{n}-expected", title=f"expected: {reason}"
    )
    return (
        f'<div class="diagrams"><figure class="run"><figcaption>{run_caption}</figcaption>{run}</figure>'
        f'<figure class="expected"><figcaption>{expected_caption}</figcaption>{expected}</figure></div>'
    )
