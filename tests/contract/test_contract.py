"""Loop contracts: the schemas and rules of `check`, `from_contract`, and `to_contract` round trips."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from anthropic.types import Message

from boundloop import (
    AgentLoop,
    Budget,
    ConfigurationError,
    ContractError,
    Observers,
    Policy,
    ScriptedClient,
    StopReason,
    Tool,
    tool,
)
from boundloop.cli import demo
from boundloop.contract import RULES, Contract, check_contract, compile_module, compile_report, load_contract
from boundloop.errors import UnhandledStop
from boundloop.policy import Route, SignalContext, SignalHandler
from boundloop.signals import stop
from tests.helpers import text, tool_use

JSON = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "contracts" / "refund_investigation.json"
SIGNALS = {
    "tool_use": "on_tool_use",
    "end_turn": "on_end_turn",
    "stop_sequence": "on_end_turn",
    "pause_turn": "on_pause_turn",
    "compaction": "on_compaction",
    "max_tokens": "on_max_tokens",
    "refusal": "on_refusal",
    "model_context_window_exceeded": "on_context_exceeded",
}


def contract(**fields: Any) -> JSON:
    """A small sound contract (one lookup tool), with fields replaced."""
    document: JSON = {
        "name": "lookup_loop",
        "model": "claude-sonnet-4-6",
        "tools": [
            {
                "name": "lookup",
                "description": "Look a key up.",
                "input_schema": {
                    "type": "object",
                    "properties": {"key": {"type": "string"}},
                    "required": ["key"],
                },
            }
        ],
        "signals": dict(SIGNALS),
        "budget": {"max_steps": 4},
        "policy": {"required_evidence": ["lookup"]},
    }
    document.update(fields)
    return document


def lookup(key: str) -> str:
    """The lookup tool's handler."""
    return f"value of {key}"


def rules_of(document: JSON, **options: Any) -> list[tuple[str, str]]:
    """(rule, field) of every problem `check_contract` finds."""
    return [(problem.rule, problem.where) for problem in check_contract(document, **options)]


def test_the_shipped_example_passes_every_rule() -> None:
    """examples/contracts: policy and system prompt read from their files, no problem."""
    assert check_contract(EXAMPLE) == []
    loaded = load_contract(EXAMPLE)
    assert loaded.spec.system == demo.SYSTEM
    assert loaded.spec.policy.on_forbidden == "stop"
    assert "$schema" not in loaded.to_dict()["policy"]


@pytest.mark.parametrize(
    "scenario", ["completed", "policy_blocked", "needs_human", "evidence_missing", "max_steps"]
)
def test_the_shipped_contract_reaches_the_five_refund_stop_reasons(scenario: str) -> None:
    """The contract's loop, on the demo's handlers and each scenario's script, ends with that
    stop reason: an issue_refund attempt stops it policy_blocked before its batch runs."""
    loaded = load_contract(EXAMPLE)
    handlers = {tool.name: tool.handler for tool in demo.TOOLS}
    loop = AgentLoop.from_contract(
        loaded,
        handlers=handlers,
        client=ScriptedClient(demo.SCENARIOS[scenario]),
        observers=Observers(metrics=None),
    )
    result = anyio.run(loop.run, demo.GOAL)
    assert result.stop_reason == scenario
    if scenario == "policy_blocked":
        assert result.state.stop_detail == "forbidden tool proposed: issue_refund"
        assert "ask_customer_clarifying_question" not in [
            o.tool for o in result.state.observations if o.attempts
        ]


def without(document: JSON, *path: str) -> JSON:
    """A copy of a document with one field removed."""
    copied = copy.deepcopy(document)
    target = copied
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return copied


def signals(**changes: str | None) -> dict[str, str]:
    """The full signal map with entries changed (None removes one)."""
    result: dict[str, str] = dict(SIGNALS)
    for key, value in changes.items():
        if value is None:
            del result[key]
        else:
            result[key] = value
    return result


@pytest.mark.parametrize(
    ("document", "expected"),
    [
        pytest.param(without(contract(), "budget"), ("budget-required", "(contract)"), id="no-budget"),
        pytest.param(
            contract(budget={"max_tool_calls": 3}), ("budget-required", "budget"), id="no-max-steps"
        ),
        pytest.param(
            contract(budget={"max_steps": 4, "stop_when_text_contains": "DONE"}),
            ("control-by-prose", "budget/stop_when_text_contains"),
            id="prose-in-budget",
        ),
        pytest.param(
            contract(done_marker="FINAL ANSWER:"), ("control-by-prose", "done_marker"), id="prose-at-top"
        ),
        pytest.param(
            contract(
                history=[
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}],
                    },
                ]
            ),
            ("tool-result-role", "history/1/content/0"),
            id="tool-result-as-assistant",
        ),
        pytest.param(
            contract(
                history=[
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t9", "content": ""}]}
                ]
            ),
            ("history", "history"),
            id="tool-result-answering-nothing",
        ),
        pytest.param(
            contract(signals=signals(refusal="on_refused_politely")),
            ("unknown-handler", "signals/refusal"),
            id="unknown-handler",
        ),
        pytest.param(
            contract(signals=signals(refusal=None)), ("unhandled-signal", "signals"), id="unhandled"
        ),
        pytest.param(
            contract(tools=[{"name": "lookup", "description": "Look a key up."}]),
            ("tool-schema", "tools/0"),
            id="tool-without-schema",
        ),
        pytest.param(
            contract(tools=[{"name": "lookup", "description": "x", "input_schema": {"type": "array"}}]),
            ("tool-schema", "tools/0/input_schema"),
            id="schema-not-object",
        ),
        pytest.param(
            contract(policy={"allowed": ["lookup"], "forbidden": ["lookup"]}),
            ("allowed-and-forbidden", "policy/forbidden"),
            id="allowed-and-forbidden",
        ),
        pytest.param(
            contract(
                tools=[{"name": "look.up", "description": "x", "input_schema": {"type": "object"}}], policy={}
            ),
            ("api-name", "tools/0/name"),
            id="api-name",
        ),
        pytest.param(
            contract(policy={"required_evidence": ["read_order"]}),
            ("unknown-tool", "policy/required_evidence"),
            id="evidence-from-no-tool",
        ),
        pytest.param(
            contract(tools=[contract()["tools"][0], contract()["tools"][0]]),
            ("duplicate-tool", "tools/1/name"),
            id="duplicate-tool",
        ),
        pytest.param(
            contract(metrics={"enabled": True, "port": 9464}), ("schema", "metrics"), id="unknown-field"
        ),
        pytest.param(
            contract(signals=signals(refusal="on_end_turn")),
            ("signal-handler", "signals/refusal"),
            id="refusal-read-as-completion",
        ),
        pytest.param(
            contract(signals={**SIGNALS, "refusall": "on_refusal"}),
            ("signal-handler", "signals/refusall"),
            id="unknown-stop-reason-key",
        ),
        pytest.param(
            contract(signals=signals(refusal="on_refusal"), custom_handlers=["on_refusal"]),
            ("unknown-handler", "custom_handlers/0"),
            id="custom-shadows-builtin",
        ),
        pytest.param(
            contract(
                signals=signals(refusal="stop_when_text_matches"), custom_handlers=["stop_when_text_matches"]
            ),
            ("control-by-prose", "custom_handlers/0"),
            id="prose-in-a-handler-name",
        ),
        pytest.param(
            contract(signals=signals(refusal="mine\n"), custom_handlers=["mine\n"]),
            ("schema", "custom_handlers/0"),
            id="trailing-newline-name",
        ),
        pytest.param(contract(name="loop`\n## fake"), ("schema", "name"), id="markup-in-name"),
        pytest.param(contract(budget={"max_steps": 1.0}), ("number", "budget/max_steps"), id="float-count"),
        pytest.param(
            contract(budget={"max_steps": 3, "timeout_s": 1e309}),
            ("number", "budget/timeout_s"),
            id="infinite",
        ),
        pytest.param(
            contract(policy={"forbidden": ["lookup"], "required_evidence": ["lookup"]}),
            ("policy-conflict", "policy/required_evidence"),
            id="forbidden-evidence",
        ),
        pytest.param(
            contract(policy={"allowed": [], "required_evidence": ["lookup"]}),
            ("policy-conflict", "policy/required_evidence"),
            id="evidence-never-allowed",
        ),
        pytest.param(
            contract(
                history=[
                    {"role": "user", "content": "hi"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "lookup", "input": {}}],
                    },
                ]
            ),
            ("history", "history"),
            id="history-leaves-a-call-unanswered",
        ),
        pytest.param(contract(policy="missing-policy.json"), ("file", "policy"), id="missing-policy-file"),
        pytest.param(
            contract(system={"file": "missing.md"}), ("file", "system/file"), id="missing-system-file"
        ),
    ],
)
def test_each_rule_rejects_its_fault_naming_the_field(document: JSON, expected: tuple[str, str]) -> None:
    """A contract that breaks one rule is reported once, by rule and field."""
    found = rules_of(document)
    assert expected in found, found
    assert all(rule in RULES for rule, _ in found)


def test_the_escalation_tool_may_be_allowed_and_output_schemas_may_be_any_type() -> None:
    """A policy may list its escalation tool; a tool may declare it returns a string."""
    tools = [{**contract()["tools"][0], "output_schema": {"type": "string"}}]
    document = contract(
        tools=tools, policy={"allowed": ["lookup", "ask_human"], "escalation_tool": "ask_human"}
    )
    assert check_contract(document) == []


def test_an_unknown_field_is_named() -> None:
    """Strict schemas: the message names the field that is not allowed."""
    [problem] = check_contract(contract(metrics={"enabled": True, "port": 9464}))
    assert "'port' was unexpected" in problem.message
    assert str(problem).startswith("schema: metrics: ")


def test_unhandled_stop_and_declared_custom_handlers_are_explicit_answers() -> None:
    """`unhandled_stop` and a name in custom_handlers satisfy the signal rules."""
    document = contract(signals=signals(refusal="unhandled_stop", pause_turn="wait_then_resume"))
    document["custom_handlers"] = ["wait_then_resume"]
    assert check_contract(document) == []


def test_a_policy_file_replaces_the_inline_policy_and_is_checked(tmp_path: Path) -> None:
    """`--policy FILE`: its problems are named with the file; a sound one is used."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"allowed": ["lookup"], "forbidden": ["lookup"], "on_refusal": "stop"}))
    found = rules_of(contract(), policy=bad)
    assert ("schema", f"{bad}: ") in found  # the unknown `on_refusal` field
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"forbidden": ["delete_everything"], "on_tool_error": "stop"}))
    policy = load_contract(contract(), policy=good).spec.policy
    assert policy.forbidden == {"delete_everything"}
    assert policy.on_tool_error == "stop"


def test_a_file_that_is_not_json_is_one_problem(tmp_path: Path) -> None:
    """A contract file that does not parse is reported, not raised."""
    path = tmp_path / "c.json"
    path.write_text("{oops")
    [problem] = check_contract(path)
    assert problem.rule == "file"
    assert "is not JSON" in problem.message
    with pytest.raises(ContractError, match="is not JSON"):
        load_contract(path)


async def test_from_contract_builds_a_loop_that_runs() -> None:
    """The contract's tools, budget and policy drive a real run on the ScriptedClient."""
    script = [tool_use(("lookup", {"key": "a"})), text("a is known")]
    loop = AgentLoop.from_contract(
        contract(),
        handlers={"lookup": lookup},
        client=ScriptedClient(script),
        observers=Observers(metrics=None),
    )
    result = await loop.run("What is a?")
    assert result.stop_reason is StopReason.COMPLETED
    assert loop.budget.max_steps == 4
    assert loop.policy.required_evidence == {"lookup"}
    assert loop.name == "lookup_loop"


@pytest.mark.parametrize(
    ("handlers", "message"),
    [
        pytest.param({}, "no tool handler for lookup, which the contract declares", id="missing"),
        pytest.param(
            {"lookup": lookup, "extra": lookup},
            "tool handlers for extra, which the contract does not declare",
            id="undeclared",
        ),
    ],
)
def test_a_handler_missing_or_undeclared_is_a_construction_error(handlers: JSON, message: str) -> None:
    """Handlers and declared tools must match one for one."""
    with pytest.raises(ConfigurationError, match=message):
        AgentLoop.from_contract(
            contract(), handlers=handlers, client=ScriptedClient([]), observers=Observers(metrics=None)
        )


def test_a_contract_that_breaks_a_rule_is_not_built() -> None:
    """from_contract refuses what check refuses, with every problem."""
    with pytest.raises(ContractError, match="unhandled-signal: signals: the API's stop_reason 'refusal'"):
        AgentLoop.from_contract(
            contract(signals=signals(refusal=None)), handlers={"lookup": lookup}, client=ScriptedClient([])
        )


async def test_unhandled_stop_makes_that_stop_reason_raise() -> None:
    """A signal the contract sends to `unhandled_stop` raises UnhandledStop, as the contract says."""
    loop = AgentLoop.from_contract(
        contract(signals=signals(refusal="unhandled_stop")),
        handlers={"lookup": lookup},
        client=ScriptedClient([{"stop_reason": "refusal", "content": []}]),
        observers=Observers(metrics=None),
    )
    with pytest.raises(UnhandledStop):
        await loop.run("Tell me.")


def escalate_refusal(message: Message, ctx: SignalContext) -> Route:
    """A custom signal handler: a refusal goes to a human."""
    return stop(StopReason.NEEDS_HUMAN, "the model refused; a human decides")


async def test_custom_signal_handlers_are_named_in_the_contract_and_given_in_code() -> None:
    """custom_handlers are supplied by name; a missing one is a construction error."""
    document = contract(signals=signals(refusal="escalate_refusal"), custom_handlers=["escalate_refusal"])
    with pytest.raises(ConfigurationError, match="no signal handler for escalate_refusal"):
        AgentLoop.from_contract(document, handlers={"lookup": lookup}, client=ScriptedClient([]))
    loop = AgentLoop.from_contract(
        document,
        handlers={"lookup": lookup},
        signal_handlers={"escalate_refusal": escalate_refusal},
        client=ScriptedClient([{"stop_reason": "refusal", "content": []}]),
        observers=Observers(metrics=None),
    )
    result = await loop.run("Tell me.")
    assert result.stop_reason is StopReason.NEEDS_HUMAN
    written = loop.to_contract()
    assert written.spec.signals["refusal"] == "escalate_refusal"
    assert written.spec.custom_handlers == ("escalate_refusal",)


def test_to_contract_round_trips_through_check_and_from_contract() -> None:
    """A loop built in code: its contract passes check and builds the same loop again."""
    loop = demo.demo_loop(client=ScriptedClient([]))
    written = loop.to_contract()
    document = json.loads(json.dumps(written.to_dict()))
    assert check_contract(document) == []
    handlers = {name: registered.handler for name, registered in loop.tools.items()}
    rebuilt = AgentLoop.from_contract(document, handlers=handlers, client=ScriptedClient([]))
    assert rebuilt.to_contract() == written
    assert rebuilt.config.provenance == loop.config.provenance


def test_to_contract_of_a_loop_with_an_escalation_tool_and_no_metrics() -> None:
    """The escalation tool comes from the policy, not the tool list; metrics off is kept."""

    @tool
    def read(key: str) -> str:
        """Read a key."""
        return key

    loop = AgentLoop(
        ScriptedClient([]),
        model="claude-sonnet-4-6",
        tools=[read],
        budget=Budget(max_steps=3),
        policy=Policy(escalation_tool="ask_human", allowed={"read"}),
        observers=Observers(metrics=None),
    )
    written: Contract = loop.to_contract()
    assert [t.name for t in written.spec.tools] == ["read"]
    assert written.spec.metrics is False
    document = written.to_dict()
    assert document["policy"]["escalation_tool"] == "ask_human"
    assert check_contract(document) == []
    rebuilt = AgentLoop.from_contract(document, handlers={"read": read.handler}, client=ScriptedClient([]))
    assert rebuilt.metrics is None
    assert "ask_human" in rebuilt.tools


def test_a_contract_sets_redact_checkpoints_and_count_tokens() -> None:
    """Both are data settings: a contract declares them, the loop reads them, to_contract keeps them."""
    import anthropic

    document = contract(redact_checkpoints=True, count_tokens=True)
    assert check_contract(document) == []
    assert [p.where for p in check_contract(contract(count_tokens="yes"))] == ["count_tokens"]
    client = anthropic.AsyncAnthropic(api_key="sk-ant-test-0000000000")  # it counts; nothing is sent
    loop = AgentLoop.from_contract(
        document, handlers={"lookup": lookup}, client=client, observers=Observers(metrics=None)
    )
    assert (loop.config.spec.redact_checkpoints, loop.config.spec.budget.count_tokens) == (True, True)
    written = loop.to_contract().to_dict()
    assert (written["redact_checkpoints"], written["count_tokens"]) == (True, True)
    assert load_contract(written) == loop.to_contract()
    plain = AgentLoop.from_contract(contract(), handlers={"lookup": lookup}, client=ScriptedClient([]))
    assert (plain.config.spec.redact_checkpoints, plain.config.spec.budget.count_tokens) == (False, False)
    assert not {"redact_checkpoints", "count_tokens"} & set(plain.to_contract().to_dict())


def test_to_contract_refuses_a_nameless_signal_handler() -> None:
    """A lambda cannot be named in a contract."""
    loop = AgentLoop(
        ScriptedClient([]),
        model="claude-sonnet-4-6",
        budget=Budget(max_steps=2),
        policy=Policy(signal_handlers={"refusal": lambda message, ctx: stop(StopReason.REFUSED)}),
        observers=Observers(metrics=None),
    )
    with pytest.raises(ConfigurationError, match="no name a contract can hold"):
        loop.to_contract()


def test_compile_never_shadows_what_a_stub_raises_and_the_report_keeps_markup_inert() -> None:
    """A property named NotImplementedError is not a parameter; contract text cannot forge report markup."""
    tool = {
        "name": "lookup",
        "description": "Look up. <!-- hidden | `code`",
        "input_schema": {"type": "object", "properties": {"NotImplementedError": {"type": "string"}}},
    }
    loaded = load_contract(contract(tools=[tool], description="Evil <!-- start", policy={}))
    module = compile_module(loaded, source="c.json")
    assert "NotImplementedError: str" not in module
    compile(module, "loop.py", "exec")
    report = compile_report(loaded, source="c.json")
    assert "<!--" not in report
    assert "Evil &lt;!-- start" in report


def test_to_contract_keeps_a_declared_escalation_tool_and_refuses_two_handlers_of_one_name() -> None:
    """A tool the code declares under the escalation name stays in the contract; handler names are unique."""
    ask = Tool(
        name="ask",
        description="Ask the on-call engineer.",
        input_schema={"type": "object", "properties": {"reason": {"type": "string"}}},
        handler=lookup,
    )
    loop = AgentLoop(
        ScriptedClient([]),
        model="claude-sonnet-4-6",
        tools=[ask],
        budget=Budget(max_steps=2),
        policy=Policy(escalation_tool="ask"),
        observers=Observers(metrics=None),
    )
    document = loop.to_contract().to_dict()
    assert [t["name"] for t in document["tools"]] == ["ask"]
    rebuilt = AgentLoop.from_contract(document, handlers={"ask": lookup}, client=ScriptedClient([]))
    assert rebuilt.config.provenance == loop.config.provenance

    def make(reason: StopReason) -> SignalHandler:
        def handler(message: Message, ctx: SignalContext) -> Route:
            return stop(reason)

        return handler

    twins = AgentLoop(
        ScriptedClient([]),
        model="claude-sonnet-4-6",
        budget=Budget(max_steps=2),
        policy=Policy(
            signal_handlers={"refusal": make(StopReason.REFUSED), "max_tokens": make(StopReason.TRUNCATED)}
        ),
        observers=Observers(metrics=None),
    )
    with pytest.raises(ConfigurationError, match="both named 'handler'"):
        twins.to_contract()
