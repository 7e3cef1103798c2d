"""The HTML report: one self-contained page, every case's text escaped, failed runs drawn."""

from __future__ import annotations

import html
import re
from html.parser import HTMLParser
from typing import Any
from xml.etree import ElementTree

import pytest

from boundloop import StopReason
from boundloop.evals import CaseResult, EvalReport, parse_case, run_case
from boundloop.evals._html import STOP_EDGES, render_html
from boundloop.statemachine.diagram import trace_path
from boundloop.statemachine.table import TRANSITIONS, TransitionRow

JSON = dict[str, Any]
SVG_NS = "http://www.w3.org/2000/svg"
NS = f"{{{SVG_NS}}}"
HOSTILE = "</td><script>alert('x')</script><img src=x onerror=alert(1)>"
LOOKUP = {"tool_calls": [{"name": "lookup", "input": {}}]}
VOID = {"meta", "br", "hr", "img", "input", "link", "wbr", "col", "area", "base", "source"}


def fixture(case_id: str, model: list[JSON], stop_reason: str, **fields: Any) -> JSON:
    """A case with its model turns and expected stop reason, other fields as given."""
    return {"case_id": case_id, "goal": "Check order O-1.", "model": model, **fields} | {
        "expected": {"stop_reason": stop_reason, **fields.get("expected", {})}
    }


PASSING = fixture(
    "reads_then_answers",
    [LOOKUP, {"text": "done"}],
    "completed",
    description="reads the order, then answers",
    mocked_tools={"lookup": [{"status": "ok", "output": "x"}]},
)
WRONG_STOP = fixture(
    "expects_a_human",
    [LOOKUP, {"text": "done"}],
    "needs_human",
    description="should have escalated",
    mocked_tools={"lookup": [{"status": "ok", "output": "x"}]},
)
HOSTILE_CASE = fixture(
    "hostile_answer",
    [{"text": HOSTILE}],
    "completed",
    description=HOSTILE,
    expected={"answer_contains": [f"{HOSTILE} & more"]},
)
SCRIPT_TOO_SHORT = fixture(
    "script_too_short", [LOOKUP], "completed", mocked_tools={"lookup": [{"status": "ok", "output": "x"}]}
)


async def run(raw: JSON) -> CaseResult:
    """Parse and run one fixture."""
    return await run_case(parse_case(raw))


async def page_of(*raws: JSON) -> tuple[str, list[CaseResult]]:
    """Run the fixtures and render their report."""
    results = [await run(raw) for raw in raws]
    return render_html(EvalReport(results)), results


class Page(HTMLParser):
    """A strict reading of the page: every element closed in order, text and attributes kept."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(page)
        self.close()
        assert self.open == [], f"unclosed elements: {self.open}"

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self.open.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        assert self.open[-1:] == [tag], f"</{tag}> closes {self.open[-1:]}"
        self.open.pop()

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def section(page: str, case_id: str) -> str:
    """The `<details>` section of one case."""
    match = re.search(rf'<details id="case-{re.escape(case_id)}">.*?</details>', page, re.S)
    assert match is not None, f"no section for {case_id}"
    return match.group(0)


def svgs(html: str) -> list[ElementTree.Element]:
    """Every inline `<svg>`, each parsed on its own as XML."""
    return [ElementTree.fromstring(svg) for svg in re.findall(r"<svg\b.*?</svg>", html, re.S)]


def classes(element: ElementTree.Element) -> set[str]:
    """An element's classes."""
    return set((element.get("class") or "").split())


def drawn(row: TransitionRow) -> str:
    """The `data-edge` of the line that draws a table row."""
    return f"{row['source']}-{row['dest']}" + (":halt" if row["trigger"] == "halt" else "")


async def test_the_page_parses_and_loads_nothing_from_elsewhere() -> None:
    """Every element closes in order; no script, and no URL but the SVG namespace."""
    page, _ = await page_of(PASSING, WRONG_STOP, HOSTILE_CASE, SCRIPT_TOO_SHORT)
    parsed = Page(page)
    assert page.startswith("<!DOCTYPE html>")
    tags = {tag for tag, _ in parsed.tags}
    assert "script" not in tags
    assert "<script" not in page.lower()
    assert not tags & {"link", "img", "iframe", "object", "embed", "use", "image"}
    assert page.count(f'xmlns="{SVG_NS}"') == len(svgs(page)) == 4  # two failed runs, two diagrams each
    assert "http://" not in page.replace(SVG_NS, "")
    assert "https://" not in page
    assert "@import" not in page
    assert "@font-face" not in page
    for url in re.findall(r"url\(([^)]*)\)", page):
        assert url.startswith("#"), url
    for _, attrs in parsed.tags:
        assert (attrs.get("href") or "#").startswith("#")
        assert "src" not in attrs


async def test_case_text_is_escaped() -> None:
    """Descriptions, answers and failures holding markup show as text, never as markup."""
    page, [result] = await page_of(HOSTILE_CASE)
    assert result.status == "failed"
    assert HOSTILE in result.first_failure
    assert "<script" not in page
    assert "</td><script>" not in page
    assert "&lt;/td&gt;&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    text = "".join(Page(page).text)
    # As text: the description (row, section), the first failure (row, summary, list), the answer.
    assert text.count(HOSTILE) == 6
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; more" in page


async def test_the_table_has_a_row_per_case_and_the_figures() -> None:
    """Every figure, then a row per case with its status, stop reasons, counts and replay."""
    page, results = await page_of(PASSING, WRONG_STOP, SCRIPT_TOO_SHORT)
    parsed = Page(page)
    text = " ".join(parsed.text)
    for label, value in EvalReport(results).figures.rows():
        assert f'<th scope="row">{label}</th><td>{html.escape(value)}</td>' in page
    rows = [attrs for tag, attrs in parsed.tags if tag == "tr" and "status-row" in (attrs.get("class") or "")]
    assert [row["class"] for row in rows] == ["status-row-passed", "status-row-failed", "status-row-error"]
    assert '<span class="status status-passed">pass</span>' in page
    assert '<span class="status status-failed">fail</span>' in page
    assert '<span class="status status-error">error</span>' in page
    assert 'title="reads the order, then answers"' in page
    assert "should have escalated" in text
    assert "stop_reason: expected needs_human, got completed" in text
    assert "identical" in text
    assert "n/a" in text
    assert f'<td class="num">{results[0].duration_s * 1000:.1f}</td>' in page


async def test_a_failed_run_is_drawn_twice_a_passed_case_not_at_all() -> None:
    """The failed case's section lists its failures next to two diagrams; a passed case has none."""
    page, [passed, failed, error] = await page_of(PASSING, WRONG_STOP, SCRIPT_TOO_SHORT)
    assert 'id="case-reads_then_answers"' not in page
    part = section(page, "expects_a_human")
    assert [svg.findtext(f"{NS}title") for svg in svgs(part)] == ["this run", "expected: needs_human"]
    assert all(f"<li>{failure}</li>" in part for failure in failed.failures)
    # A fixture error before any transition: its problems, and nothing to draw.
    broken = section(page, "script_too_short")
    assert error.status == "error"
    assert svgs(broken) == []
    assert all(f"<li>{failure}</li>" in broken for failure in error.failures)
    assert passed.passed


async def test_this_run_highlights_exactly_the_edges_it_took() -> None:
    """Taken edges are the ones trace_path counted, each guard labelled with its count; the end ringed."""
    page, [result] = await page_of(WRONG_STOP)
    this_run, _ = svgs(section(page, "expects_a_human"))
    path = trace_path(result.trace)
    taken = {p.get("data-edge") for p in this_run.iter(f"{NS}path") if "taken" in classes(p)}
    assert taken == {drawn(TRANSITIONS[index]) for index in path.counts}
    labels = {t.get("data-edge"): t for t in this_run.iter(f"{NS}text") if "label" in classes(t)}
    for index, count in path.counts.items():
        row = TRANSITIONS[index]
        lit = [span.text or "" for span in labels[drawn(row)] if "on" in classes(span)]
        assert f"{' & '.join(row['conditions'])} \u00d7{count}".strip() in lit
    ringed = [
        g.get("data-state") for g in this_run.iter(f"{NS}g") if g.find(f"{NS}rect[@class='ring']") is not None
    ]
    assert ringed == [path.last] == ["stopped"]


async def test_expected_highlights_the_edges_that_end_a_run_with_the_expected_reason() -> None:
    """The second diagram lights the rows of STOP_EDGES for the expected reason, and says which."""
    page, _ = await page_of(WRONG_STOP)
    part = section(page, "expects_a_human")
    _, expected = svgs(part)
    rows = STOP_EDGES[StopReason.NEEDS_HUMAN]
    lit = [p for p in expected.iter(f"{NS}path") if "expected" in classes(p)]
    assert {p.get("data-edge") for p in lit} == {drawn(TRANSITIONS[index]) for index in rows}
    on = {span.text for span in expected.iter(f"{NS}tspan") if "on" in classes(span)}
    assert on == {"must_stop", "breaker_open"}
    assert "a run ends <code>needs_human</code> through: validate [must_stop], observe [breaker_open]" in part


async def test_the_page_is_the_same_for_the_same_report() -> None:
    """Rendering is deterministic, and the title is escaped."""
    results = [await run(PASSING), await run(WRONG_STOP)]
    report = EvalReport(results)
    assert render_html(report) == render_html(report)
    titled = render_html(report, title="nightly <evals>")
    assert "<title>nightly &lt;evals&gt;</title>" in titled
    assert "<h1>nightly &lt;evals&gt;</h1>" in titled
    assert "<title>boundloop evals</title>" in render_html(report)


async def test_every_stop_reason_ends_through_edges_into_stopped() -> None:
    """Each stop reason has rows, all into stopped, and every row into stopped ends some reason."""
    assert set(STOP_EDGES) == set(StopReason)
    into_stopped = {index for index, row in enumerate(TRANSITIONS) if row["dest"] == "stopped"}
    for reason, rows in STOP_EDGES.items():
        assert rows, reason
        assert rows <= into_stopped, reason
    assert set().union(*STOP_EDGES.values()) == into_stopped


ONE_OK = {"lookup": [{"status": "ok", "output": "x"}]}
TWO_CALLS = {"tool_calls": [{"name": "lookup", "input": {"n": 1}}, {"name": "lookup", "input": {"n": 2}}]}
RETRY = {"status": "retryable_error", "reason": "upstream_timeout"}


@pytest.mark.parametrize(
    ("reason", "raw"),
    [
        pytest.param(
            "completed", {"model": [LOOKUP, {"text": "done"}], "mocked_tools": ONE_OK}, id="completed"
        ),
        pytest.param(
            "max_steps",
            {"model": [LOOKUP], "mocked_tools": ONE_OK, "budget": {"max_steps": 1}},
            id="max-steps",
        ),
        pytest.param(
            "max_steps",
            {
                "model": [LOOKUP, {"text": "best so far"}],
                "mocked_tools": ONE_OK,
                "budget": {"max_steps": 1, "on_exhausted": "final_answer"},
            },
            id="max-steps-final-answer",
        ),
        pytest.param(
            "needs_human",
            {"model": [LOOKUP, LOOKUP], "mocked_tools": {"lookup": [RETRY, RETRY]}},
            id="needs-human-breaker",
        ),
        pytest.param(
            "needs_human",
            {"model": [LOOKUP], "policy": {"requires_approval": ["lookup"]}},
            id="needs-human-approval",
        ),
        pytest.param(
            "policy_blocked",
            {
                "model": [{"tool_calls": [{"name": "refund", "input": {}}]}],
                "policy": {"forbidden": ["refund"]},
            },
            id="policy-blocked",
        ),
        pytest.param(
            "evidence_missing",
            {"model": [{"text": "done"}], "policy": {"required_evidence": ["lookup"]}},
            id="evidence-missing",
        ),
        pytest.param("truncated", {"model": [{"text": "cut", "stop_reason": "max_tokens"}]}, id="truncated"),
        pytest.param("refused", {"model": [{"text": "no", "stop_reason": "refusal"}]}, id="refused"),
        pytest.param(
            "max_tool_calls",
            {
                "model": [TWO_CALLS],
                "mocked_tools": {"lookup": []},
                "budget": {"max_steps": 5, "max_tool_calls": 1},
            },
            id="max-tool-calls",
        ),
        pytest.param(
            "failed", {"model": [{"text": "?", "stop_reason": "no_such_reason"}]}, id="failed-unhandled"
        ),
    ],
)
async def test_stop_edges_hold_for_real_runs(reason: str, raw: JSON) -> None:
    """The edge a real run took into stopped is one STOP_EDGES lists for its stop reason."""
    result = await run(
        {"case_id": "stop", "goal": "Check order O-1.", **raw, "expected": {"stop_reason": reason}}
    )
    assert result.stop_reason is StopReason(reason), result.failures
    counts = trace_path(result.trace).counts
    into_stopped = [index for index in counts if TRANSITIONS[index]["dest"] == "stopped"]
    assert len(into_stopped) == 1, into_stopped
    assert into_stopped[0] in STOP_EDGES[StopReason(reason)], TRANSITIONS[into_stopped[0]]
