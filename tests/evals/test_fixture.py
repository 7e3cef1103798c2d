"""Eval fixtures: the schema, errors that name the field, tool names with dots, loading."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from boundloop import FixtureError, StopReason
from boundloop.evals import api_name, load_cases, parse_case, schema, schema_problems
from boundloop.events import EVENT_KINDS, RENAMED_KINDS

JSON = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]


def minimal(**fields: Any) -> JSON:
    """The smallest valid case, with fields replaced."""
    case: JSON = {
        "case_id": "minimal",
        "goal": "Say hello.",
        "model": [{"text": "hello"}],
        "expected": {"stop_reason": "completed"},
    }
    case.update(fields)
    return case


def problems_of(raw: object) -> list[str]:
    """The problems `parse_case` reports for a fixture (none if it parses)."""
    try:
        parse_case(raw)
    except FixtureError as exc:
        return exc.problems
    return []


def test_the_schema_names_every_stop_reason_and_trace_kind() -> None:
    """The shipped schema cannot drift from StopReason and the event kinds (and their earlier names)."""
    expected = schema()["$defs"]["expected"]["properties"]
    assert set(expected["stop_reason"]["enum"]) == {str(reason) for reason in StopReason}
    assert set(expected["requires_trace_events"]["items"]["enum"]) == {*EVENT_KINDS, *RENAMED_KINDS}


def test_the_issue_example_is_a_live_case_and_a_script_case_once_a_model_script_is_added() -> None:
    """The example fixture of the format, as written, is valid: a live case (no model turns);
    with a `model` script it is a scripted one."""
    example: JSON = {
        "case_id": "shipping_lookup_repeated_failure",
        "goal": "Investigate whether an order arrived late.",
        "mocked_tools": {
            "shipping.read_delivery_status": [
                {"status": "retryable_error", "reason": "upstream_timeout"},
                {"status": "retryable_error", "reason": "upstream_timeout"},
            ]
        },
        "expected": {
            "stop_reason": "needs_human",
            "max_tool_calls": 2,
            "forbidden_tools": ["refunds.issue_refund"],
            "requires_trace_events": ["proposal", "validation", "tool_result", "stop"],
        },
    }
    assert problems_of(example) == []
    assert parse_case(example).live
    case = parse_case({**example, "model": [{"text": "ok"}]})
    assert not case.live
    assert [tool.name for tool in case.tools] == ["shipping__read_delivery_status"]
    assert case.expected.forbidden_tools == ("refunds__issue_refund",)
    assert case.shown("shipping__read_delivery_status") == "shipping.read_delivery_status"


@pytest.mark.parametrize(
    ("fixture", "problem"),
    [
        pytest.param({"goal": "x"}, "(case): 'case_id' is a required property", id="no-case-id"),
        pytest.param(
            minimal(model=[{"tool_calls": [{"input": {}}]}]),
            "model/0/tool_calls/0: 'name' is a required property",
            id="call-without-name",
        ),
        pytest.param(
            minimal(expected={"stop_reason": "done"}),
            "expected/stop_reason: 'done' is not one of",
            id="unknown-stop-reason",
        ),
        pytest.param(
            minimal(mocked_tools={"t": [{"status": "ok"}]}),
            "mocked_tools/t/0: 'output' is a required property",
            id="ok-without-output",
        ),
        pytest.param(
            minimal(mocked_tools={"t": [{"status": "slow"}]}),
            "mocked_tools/t/0/status: 'slow' is not one of",
            id="unknown-status",
        ),
        pytest.param(
            minimal(budget={"max_tool_calls": 3}), "budget: 'max_steps' is a required", id="no-steps"
        ),
        pytest.param(
            minimal(expected={"stop_reason": "completed", "answer_has": "x"}),
            "expected: Additional properties are not allowed ('answer_has' was unexpected)",
            id="misspelt-expectation",
        ),
        pytest.param(
            minimal(state={"task_id": "x"}),
            "state: a case replays a saved state or runs",
            id="state-and-model",
        ),
        pytest.param(
            minimal(mocked_tools={"a.b": [], "a__b": []}),
            "tool names 'a.b' and 'a__b' both map to 'a__b'",
            id="names-collide",
        ),
        pytest.param(
            minimal(mocked_tools={"x" * 60 + ".y.z": []}), "is longer than 64 characters", id="name-too-long"
        ),
        pytest.param(
            minimal(model=[{"content": [{"type": "text"}], "stop_reason": "end_turn"}]),
            "model/0: scripted response is not a valid Message",
            id="invalid-full-turn",
        ),
        pytest.param(
            minimal(tools=[{"name": "t", "input_schema": {"type": "array"}}]),
            "input_schema must have type 'object'",
            id="tool-schema-not-object",
        ),
        pytest.param(
            minimal(policy={"allowed": ["t"], "forbidden": ["t"]}),
            "tools both allowed and forbidden",
            id="policy-contradiction",
        ),
        pytest.param(
            minimal(state="missing.state.json", model=None), "state: not a saved LoopState", id="state"
        ),
    ],
)
def test_a_bad_fixture_is_refused_with_the_field_named(fixture: JSON, problem: str) -> None:
    """Each fault is reported once, pointing at the field, before anything runs."""
    if fixture.get("model", "") is None:
        del fixture["model"]
    found = problems_of(fixture)
    assert any(problem in line for line in found), found


def test_a_fixture_that_is_not_an_object_is_refused() -> None:
    """A list or a string is not a case."""
    assert problems_of("case") == ["(case): 'case' is not of type 'object'"]
    assert schema_problems(minimal()) == []


@pytest.mark.parametrize(
    ("name", "mapped"),
    [("read_order", "read_order"), ("shipping.read", "shipping__read"), ("a b/c", "a__b__c")],
)
def test_tool_names_map_to_names_the_api_accepts(name: str, mapped: str) -> None:
    """Valid names stay; every other character becomes `__`."""
    assert api_name(name) == mapped


def test_shorthand_turns_become_real_messages_with_mapped_names() -> None:
    """Text, calls with generated ids, the default stop reason, usage; dotted names mapped."""
    case = parse_case(
        minimal(
            model=[
                {
                    "text": "looking",
                    "tool_calls": [{"name": "crm.read", "input": {"id": 1}}, {"name": "crm.read"}],
                },
                {
                    "content": [{"type": "tool_use", "id": "toolu_x", "name": "crm.read", "input": {}}],
                    "stop_reason": "tool_use",
                },
                {"text": "done", "usage": {"input_tokens": 12, "output_tokens": 3}},
            ],
            mocked_tools={"crm.read": []},
        )
    )
    first, second, third = case.turns
    assert first.stop_reason == "tool_use"
    assert [block.type for block in first.content] == ["text", "tool_use", "tool_use"]
    calls = [block for block in first.content if block.type == "tool_use"]
    assert [(call.id, call.name, call.input) for call in calls] == [
        ("toolu_0_0", "crm__read", {"id": 1}),
        ("toolu_0_1", "crm__read", {}),
    ]
    assert second.content[0].type == "tool_use"
    assert second.content[0].name == "crm__read"
    assert third.stop_reason == "end_turn"
    assert (third.usage.input_tokens, third.usage.output_tokens) == (12, 3)
    assert case.model_name == "claude-sonnet-4-6"


def test_tools_are_declared_by_tools_mocks_and_policy_only() -> None:
    """A declared tool keeps its schema; a name only the model or `expected` writes is no tool."""
    case = parse_case(
        minimal(
            tools=[
                {
                    "name": "orders.read",
                    "description": "Read one order.",
                    "input_schema": {"type": "object", "required": ["id"]},
                }
            ],
            mocked_tools={"orders.read": [], "crm.note": []},
            policy={"forbidden": ["refunds.issue"], "escalation_tool": "ask_human"},
            expected={"stop_reason": "completed", "tool_sequence": ["inventory.check"]},
            model=[{"tool_calls": [{"name": "made.up"}]}],
        )
    )
    tools = {tool.name: tool for tool in case.tools}
    assert list(tools) == ["orders__read", "crm__note"]  # as declared; forbidden tools are not offered
    assert tools["orders__read"].description == "Read one order."
    assert tools["orders__read"].input_schema["required"] == ["id"]
    assert tools["crm__note"].description == "(mocked) crm.note"
    assert case.policy["forbidden"] == frozenset({"refunds__issue"})
    assert case.policy["escalation_tool"] == "ask_human"


def test_load_cases_reads_files_folders_and_lists_and_skips_saved_states(tmp_path: Path) -> None:
    """Folders recursively, arrays of cases, `*.state.json` left alone; results in path order."""
    (tmp_path / "sub").mkdir()
    (tmp_path / "b.json").write_text(json.dumps(minimal(case_id="b")))
    (tmp_path / "sub" / "a.json").write_text(json.dumps([minimal(case_id="a1"), minimal(case_id="a2")]))
    (tmp_path / "sub" / "run.state.json").write_text("{}")
    assert [case.case_id for case in load_cases(tmp_path)] == ["b", "a1", "a2"]
    single = load_cases(tmp_path / "b.json")
    assert single[0].source == tmp_path / "b.json"


def test_load_cases_lists_every_problem_with_its_file(tmp_path: Path) -> None:
    """Missing paths, bad JSON, invalid cases and reused ids: all reported in one error."""
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "dup1.json").write_text(json.dumps(minimal(case_id="same")))
    (tmp_path / "dup2.json").write_text(json.dumps(minimal(case_id="same")))
    (tmp_path / "wrong.json").write_text(json.dumps([minimal(), {"case_id": "w"}]))
    (tmp_path / "empty").mkdir()
    with pytest.raises(FixtureError) as caught:
        load_cases(
            tmp_path / "bad.json",
            tmp_path / "dup1.json",
            tmp_path / "dup2.json",
            tmp_path / "wrong.json",
            tmp_path / "empty",
            tmp_path / "nowhere.json",
        )
    problems = caught.value.problems
    not_json = f"{tmp_path / 'bad.json'} is not JSON: Expecting property name enclosed in double quotes"
    assert caught.value.unreadable == [f"{not_json}: line 1 column 2 (char 1)"]
    assert caught.value.unreadable[0] in problems
    assert f"{tmp_path / 'dup2.json'}: case_id 'same' is already used by {tmp_path / 'dup1.json'}" in problems
    assert any(p.startswith(f"{tmp_path / 'wrong.json'}[1]: (case): 'goal' is a required") for p in problems)
    assert f"{tmp_path / 'empty'}: no *.json fixtures in this folder" in problems
    assert f"{tmp_path / 'nowhere.json'}: no such file or folder" in problems


def test_every_shipped_case_is_valid() -> None:
    """examples/evals parses, and covers the cases the project promises."""
    ids = {case.case_id for case in load_cases(ROOT / "examples" / "evals")}
    assert "shipping_lookup_repeated_failure" in ids


def test_a_model_turn_may_name_a_dotted_tool_as_the_api_saw_it() -> None:
    """A pasted production response calls `a__b`; the fixture declares `a.b`: one tool, no collision."""
    case = parse_case(
        minimal(
            model=[
                {
                    "content": [{"type": "tool_use", "id": "toolu_1", "name": "a__b", "input": {}}],
                    "stop_reason": "tool_use",
                }
            ],
            mocked_tools={"a.b": [{"status": "ok", "output": "x"}]},
        )
    )
    assert [tool.name for tool in case.tools] == ["a__b"]
    assert case.shown("a__b") == "a.b"
    assert problems_of(minimal(mocked_tools={"a.b": [], "a__b": []}))  # two declarations still collide
