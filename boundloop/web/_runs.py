"""The pages of runs: the list (`/`) and one run (`/runs/{task_id}`)."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from typing import Any, Final, cast
from urllib.parse import quote, urlencode

from ..checkpoint.paging import RunPage, in_tree_order
from ..checkpoint.store import StoredRun, status_of
from ..events import Event, redact_strings
from ..records import StopReason, Usage
from ..state import LoopState
from ._html import Html, age, as_json, cost, csrf_field, e, join
from ._timeline import rows

Redact = Callable[[str], str]

STATUSES: Final = ("running", "waiting", "stopped")
STOP_REASONS: Final = tuple(str(reason) for reason in StopReason)
"""The stop reasons the filter offers."""


def run_link(task_id: str) -> str:
    return "/runs/" + quote(task_id, safe="")


def _options(name: str, values: tuple[str, ...], chosen: str | None) -> Html:
    options = [Html(f'<option value="">any {e(name)}</option>')]
    for value in values:
        selected = " selected" if value == chosen else ""
        options.append(Html(f'<option value="{e(value)}"{selected}>{e(value)}</option>'))
    return Html(f'<select name="{e(name)}" id="filter-{e(name)}">{join(options)}</select>')


def runs_page(
    page: RunPage,
    states: dict[str, LoopState | str | None],
    filters: dict[str, str | None],
    redact: Redact,
) -> Html:
    """The list: one row per run of the page, the filters, and the link to the next page."""
    now = time.time()
    reasons = (
        STOP_REASONS
        if filters["stop_reason"] in (None, *STOP_REASONS)
        else (
            *STOP_REASONS,
            str(filters["stop_reason"]),
        )
    )
    form = Html(
        '<form method="get" action="/" id="filters">'
        f"{_options('status', STATUSES, filters['status'])} "
        f"{_options('stop_reason', reasons, filters['stop_reason'])} "
        '<button type="submit" id="filter-button">Filter</button> <a href="/">clear</a></form>'
    )
    body = [Html("<h1>Runs</h1>"), form]
    if not page.runs:
        body.append(Html('<p id="no-runs">No run matches.</p>'))
    else:
        head = "".join(
            f"<th>{e(name)}</th>"
            for name in ("task", "status", "stop reason", "goal", "model", "steps", "cost", "age")
        )
        rows_by_id = {row.task_id: row for row in page.runs}
        loaded = {task_id: state for task_id, state in states.items() if isinstance(state, LoopState)}
        parents = {task_id: state.parent_task_id for task_id, state in loaded.items()}
        children = {task_id: state.children for task_id, state in loaded.items()}
        lines = [
            _run_row(rows_by_id[task_id], states.get(task_id), redact, now, depth, parents.get(task_id))
            for depth, task_id in in_tree_order(list(rows_by_id), parents, children)
        ]
        body.append(
            Html(f'<table id="runs"><thead><tr>{head}</tr></thead><tbody>{join(lines)}</tbody></table>')
        )
    if page.next_cursor is not None:
        query = {key: value for key, value in filters.items() if value}
        query["cursor"] = page.next_cursor
        body.append(Html(f'<p><a id="next-page" href="/?{e(urlencode(query))}">Older runs →</a></p>'))
    return join(body)


def _run_row(
    row: StoredRun, state: LoopState | str | None, redact: Redact, now: float, depth: int, parent: str | None
) -> Html:
    """One run of the list; a delegated run indented under its parent, or naming it when its
    parent is not listed above it."""
    if isinstance(state, LoopState):
        goal = _goal(state, redact)
        model = state.provenance.model if state.provenance is not None else "-"
        money = cost(state.usage.cost_usd)
    else:
        goal, model, money = ("(deleted)" if state is None else f"(unreadable: {state})"), "-", "-"
    mark = (
        Html(f'<span class="below" data-depth="{depth}">{"&nbsp;&nbsp;" * (depth - 1)}└ </span>')
        if depth
        else ""
    )
    orphan = (
        Html(f' <span class="parent">(child of <a href="{e(run_link(parent))}">{e(parent)}</a>)</span>')
        if parent is not None and not depth
        else ""
    )
    cells = [
        Html(f'{mark}<a class="task" href="{e(run_link(row.task_id))}">{e(row.task_id)}</a>{orphan}'),
        Html(f'<span class="status-{e(row.status)}">{e(row.status)}</span>'),
        e(row.stop_reason or "-"),
        Html(f'<span class="goal">{e(goal)}</span>'),
        e(model),
        e(row.step),
        e(money),
        e(age(row.updated_at, now)),
    ]
    return Html("<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")


def _block(data: dict[str, Any]) -> Html:
    """One content block (redacted already)."""
    kind = data.get("type")
    if kind == "text":
        return Html(f"<pre>{e(data.get('text', ''))}</pre>")
    if kind in ("thinking", "redacted_thinking"):
        thought = data.get("thinking", "(redacted by the API)")
        return Html(f'<details class="thinking"><summary>thinking</summary><pre>{e(thought)}</pre></details>')
    if kind == "tool_use":
        call = f"<b>{e(data.get('name'))}</b> [{e(data.get('id'))}]"
        return Html(f"<div>tool call {call}<pre>{e(as_json(data.get('input')))}</pre></div>")
    if kind == "tool_result":
        error = " (error)" if data.get("is_error") else ""
        shown = data.get("content")
        text = shown if isinstance(shown, str) else as_json(shown)
        return Html(f"<div>result for [{e(data.get('tool_use_id'))}]{error}<pre>{e(text)}</pre></div>")
    return Html(f"<pre>{e(as_json(data))}</pre>")


def _blocks(content: object, redact: Redact) -> Html:
    """One message's content: text, thinking folded, tool calls and results (redacted)."""
    if isinstance(content, str):
        return Html(f"<pre>{e(redact(content))}</pre>")
    parts: list[Html] = []
    for block in cast("list[object]", content) if isinstance(content, list) else []:
        data = redact_strings(block, redact, all_keys=False)
        shown = cast("dict[str, Any]", data) if isinstance(data, dict) else {"value": data}
        parts.append(_block(shown))
    return join(parts)


def transcript(state: LoopState, redact: Redact) -> Html:
    items: list[Html] = []
    for message in state.messages:
        role = str(message.get("role", "?"))
        items.append(
            Html(
                f'<div class="msg"><span class="role">{e(role)}</span>'
                f"{_blocks(message.get('content'), redact)}</div>"
            )
        )
    if state.answer is not None:
        items.append(
            Html(
                '<div class="msg" id="answer"><span class="role">'
                f"answer</span><pre>{e(redact(state.answer))}</pre></div>"
            )
        )
    return join(items)


def _usage(usage: Usage) -> Html:
    values = {
        "input tokens": usage.input_tokens,
        "output tokens": usage.output_tokens,
        "cache reads": usage.cache_read_input_tokens,
        "cache writes": usage.cache_creation_input_tokens,
        "cost": cost(usage.cost_usd),
        "cache savings": cost(usage.cache_savings_usd),
    }
    return Html(
        '<table id="usage">'
        + "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in values.items())
        + "</table>"
    )


def diagram_html(task_id: str, mermaid: str | None) -> Html:
    """The state diagram with the run's path: an SVG (graphviz) as an image, else its text form."""
    if mermaid is None:
        src = run_link(task_id) + "/diagram.svg"
        return Html(
            '<div class="diagram">'
            f'<img id="diagram" alt="the state diagram with this run\'s path" src="{e(src)}"></div>'
        )
    return Html(
        '<div class="diagram"><p>graphviz is not installed: the diagram as mermaid text.</p>'
        f'<pre id="diagram">{e(mermaid)}</pre></div>'
    )


def has_graphviz() -> bool:
    return shutil.which("dot") is not None


Below = list[tuple[int, str, LoopState | str | None]]
"""The runs below a run in its delegation tree, depth first: (depth, task id, its state, or why
it could not be read: a message, or None when it is not in the store)."""

MAX_BELOW: Final = 500
"""The most runs a run's page lists below it (a wider tree is cut, and says so)."""


def _goal(state: LoopState, redact: Redact) -> str:
    goal = redact(state.goal)
    return goal if len(goal) <= 140 else goal[:139] + "…"


def tree_section(state: LoopState, below: Below, redact: Redact) -> Html:
    """The run's place in its delegation tree: its parent, the runs below it, and what the run
    and all of them spent together; nothing for a run that is not part of a tree."""
    if state.parent_task_id is None and not below:
        return Html("")
    parts = [Html("<h2>Delegation</h2>")]
    if state.parent_task_id is not None:
        parent = state.parent_task_id
        parts.append(
            Html(
                f'<p id="parent">Started by <a class="task" href="{e(run_link(parent))}">{e(parent)}</a>'
                " (a delegation)</p>"
            )
        )
    if not below:
        return join(parts)
    lines: list[Html] = []
    runs, input_tokens, output_tokens = 1, state.usage.input_tokens, state.usage.output_tokens
    spent: float | None = state.usage.cost_usd
    for depth, task_id, child in below:
        link = Html(f'<a class="task" href="{e(run_link(task_id))}">{e(task_id)}</a>')
        if isinstance(child, LoopState):
            runs += 1
            input_tokens += child.usage.input_tokens
            output_tokens += child.usage.output_tokens
            own = child.usage.cost_usd
            spent = None if spent is None or own is None else spent + own
            status = status_of(child)
            cells = [
                Html(f'<span class="status-{e(status)}">{e(status)}</span>'),
                e(child.stop_reason or "-"),
                Html(f'<span class="goal">{e(_goal(child, redact))}</span>'),
                e(child.step),
                e(cost(own)),
            ]
        else:
            missing = "(not in the store)" if child is None else f"(unreadable: {child})"
            cells = [e("-"), e("-"), e(missing), e("-"), e("-")]
        indent = Html(f'<span style="padding-left:{(depth - 1) * 1.5}em">└ </span>')
        row = [Html(f'<td class="depth">{depth}</td>'), Html(f"<td>{indent}{link}</td>")]
        lines.append(join([*row, *(Html(f"<td>{cell}</td>") for cell in cells)]))
    head = "".join(
        f"<th>{e(name)}</th>" for name in ("depth", "task", "status", "stop reason", "goal", "steps", "cost")
    )
    body = "".join(f"<tr>{line}</tr>" for line in lines)
    parts.append(Html(f'<table id="children"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'))
    if len(below) >= MAX_BELOW:
        parts.append(Html(f'<p class="note">Only the first {MAX_BELOW} runs below this one are listed.</p>'))
    values = {
        "runs": runs,
        "input tokens": input_tokens,
        "output tokens": output_tokens,
        "cost": cost(spent),
    }
    spend = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in values.items())
    parts.append(Html("<p>Spent by this run and every run below it:</p>"))
    parts.append(Html(f'<table id="tree-spend">{spend}</table>'))
    return join(parts)


def run_page(
    state: LoopState,
    events: list[Event],
    redact: Redact,
    mermaid: str | None,
    *,
    live: bool,
    csrf: str | None = None,
    below: Below | None = None,
) -> Html:
    """One run: its head, its place in a delegation tree (`below`: the runs below it), timeline
    (updated live while it runs), diagram, transcript, usage, provenance.

    With `csrf` (the inspector resumes runs), a cancelled run has a form that continues it."""
    status = status_of(state)
    timeline = rows(events, state.started_at)
    last = events[-1].seq if events else -1
    lines = "".join(
        f'<tr data-seq="{e(r["seq"])}"><td>{e(r["seq"])}</td><td>{e(r["t"])}</td><td>{e(r["step"])}</td>'
        f'<td class="kind">{e(r["kind"])}</td><td>{e(r["summary"])}</td></tr>'
        for r in timeline
    )
    waiting = (
        Html(
            '<p class="note">'
            f'This run waits for a human: <a id="decide" href="/approvals#{e(state.task_id)}">decide</a>.</p>'
        )
        if status == "waiting"
        else _continue_form(state.task_id, csrf)
        if state.stop_reason is StopReason.CANCELLED and csrf is not None
        else Html("")
    )
    detail = f" ({redact(state.stop_detail)})" if state.stop_detail else ""
    provenance = None if state.provenance is None else redact_strings(_provenance(state), redact)
    body = [
        Html(f'<h1>Run <span id="task-id">{e(state.task_id)}</span></h1>'),
        Html(
            f'<p>Status <b id="status" class="status-{e(status)}">{e(status)}</b>'
            f' · stop reason <b id="stop-reason">{e(state.stop_reason or "-")}</b>{e(detail)}'
            f" · step {e(state.step)} · {e(state.tool_calls)} tool calls</p>"
        ),
        Html(f'<div class="card"><b>Goal</b><pre id="goal">{e(redact(state.goal))}</pre></div>'),
        waiting,
        tree_section(state, below or [], redact),
        Html("<h2>Timeline</h2>"),
        Html(
            f'<table id="timeline" data-task="{e(state.task_id)}" data-after="{e(last)}" '
            f'data-live="{e(live or status == "running")}">'
            f"<thead><tr><th>seq</th><th>time</th><th>step</th><th>event</th><th>what</th></tr></thead>"
            f"<tbody>{Html(lines)}</tbody></table>"
        ),
        Html('<p id="live"></p>'),
        Html("<h2>State diagram</h2>"),
        diagram_html(state.task_id, mermaid),
        Html("<h2>Transcript</h2>"),
        Html(f'<div id="transcript">{transcript(state, redact)}</div>'),
        Html("<h2>Usage</h2>"),
        _usage(state.usage),
        Html("<h2>Provenance</h2>"),
        Html(
            "<details><summary>the model, hashes of the system prompt, tools and policy, the budget</summary>"
            f'<pre id="provenance">{e(as_json(provenance))}</pre></details>'
        ),
        Html('<script src="/static/live.js"></script>'),
    ]
    return join(body)


def _continue_form(task_id: str, csrf: str) -> Html:
    """The button that resumes a cancelled run (no decision: it goes on at its next model call)."""
    return Html(
        f'<form method="post" action="{e(run_link(task_id))}/decide" class="note">{csrf_field(csrf)}'
        "This run was cancelled. Continuing it asks the model again, its budget checked first: "
        '<button type="submit" id="continue">Continue the run</button></form>'
    )


def _provenance(state: LoopState) -> dict[str, Any]:
    assert state.provenance is not None
    shown: dict[str, Any] = state.to_dict().get("provenance") or {}
    return {"trace_id": state.trace_id, "metadata": state.metadata, **shown}
