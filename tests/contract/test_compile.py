"""`boundloop compile`: the generated module lints, type-checks, imports and runs; the report reviews."""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, cast

import pytest

from boundloop import AgentLoop, ContractError, LoopSpec, Observers, ScriptedClient, UnhandledStop
from boundloop.cli import demo
from boundloop.contract import RULES, Contract, compile_module, compile_report, load_contract
from boundloop.statemachine.diagram import render_mermaid

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "contracts" / "refund_investigation.json"
LONG_TOOL = "t" * 30 + "-" + "x" * 33
"""64 characters, the API's longest tool name; not a Python identifier."""
LONG_DESCRIPTION = (
    'Says "hi" \\ and a builtin\u2019s name \u2014, a URL, ends on a quote "'
    + " word" * 30
    + " https://x.io/"
    + "a" * 120
)


def edge_contract() -> dict[str, Any]:
    """A contract with every awkward case: custom and unhandled signals, odd names, open schemas, history."""
    return {
        "name": "edge",
        "description": "Awkward | names",
        "model": "claude-sonnet-4-6",
        "system": {"text": "Be \u201ccareful\u201d.\n```\nfenced\n```"},
        "tools": [
            {
                "name": LONG_TOOL,
                "description": LONG_DESCRIPTION,
                "input_schema": {
                    "type": "object",
                    "properties": {
                        "ctx": {"type": "string"},
                        "note": {"type": ["string", "null"]},
                        "count": {"type": "integer"},
                        "tags": {"type": "array"},
                    },
                    "required": ["ctx"],
                },
                "side_effect": True,
                "timeout_s": 5,
            },
            {
                "name": "open",
                "description": "Takes awkward properties.\n\n  - an indented item\n\tand a tab",
                "input_schema": {
                    "type": "object",
                    "properties": {"content-type": {"type": "string"}, "class": {}},
                    "additionalProperties": False,
                },
                "requires_approval": True,
            },
            {"name": "2fa", "description": "A leading digit.", "input_schema": {"type": "object"}},
            {
                "name": "build_loop",
                "description": "Clashes with the module's own name.",
                "input_schema": {
                    "type": "object",
                    "properties": {
                        "flag": {"type": "boolean"},
                        "n": {"type": "number"},
                        "o": {"type": "object"},
                    },
                    "additionalProperties": False,
                },
            },
        ],
        "signals": {
            "tool_use": "on_tool_use",
            "end_turn": "judge",
            "stop_sequence": "judge",
            "pause_turn": "on_pause_turn",
            "compaction": "on_compaction",
            "max_tokens": "on_max_tokens",
            "refusal": "unhandled_stop",
            "model_context_window_exceeded": "build_loop",
        },
        "custom_handlers": ["judge", "build_loop"],
        "budget": {"max_steps": 3, "on_exhausted": "final_answer"},
        "policy": {"requires_approval": ["build_loop"], "escalation_tool": "ask_human"},
        "metrics": {"enabled": False},
        "history": [
            {"role": "user", "content": "Earlier question."},
            {"role": "assistant", "content": "Noted."},
        ],
    }


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The example and the edge contract compiled into one directory, away from the contracts' files."""
    directory = tmp_path_factory.mktemp("compiled")
    sources = {"refund_loop": load_contract(EXAMPLE), "edge_loop": load_contract(edge_contract())}
    paths: dict[str, Path] = {}
    for name, contract in sources.items():
        paths[name] = directory / f"{name}.py"
        paths[name].write_text(compile_module(contract, source=f"contracts/{name}.json"), encoding="utf-8")
    return paths


def load(path: Path) -> ModuleType:
    """Import a generated module from its file, fresh each time."""
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def build(module: ModuleType, client: ScriptedClient, **wiring: Any) -> AgentLoop:
    """The module's `build_loop`, typed."""
    return cast(Callable[..., AgentLoop], module.build_loop)(client, **wiring)


def run(*command: str, cwd: Path) -> None:
    """Run a checker from the venv in `cwd`, finding boundloop in the checkout; fail with its output."""
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", *command], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, f"{' '.join(command)}:\n{done.stdout}\n{done.stderr}"


def test_generated_modules_pass_ruff_mypy_and_pyright_strict(generated: dict[str, Path]) -> None:
    """Both generated modules pass ruff format --check, ruff check, mypy --strict and pyright strict."""
    directory = next(iter(generated.values())).parent
    files = [path.name for path in generated.values()]
    config = str(ROOT / "pyproject.toml")
    run("ruff", "format", "--check", "--config", config, *files, cwd=directory)
    run("ruff", "check", "--no-cache", "--config", config, *files, cwd=directory)
    run("mypy", "--strict", "--config-file", config, "--cache-dir", ".mypy", *files, cwd=directory)
    pyright = {"typeCheckingMode": "strict", "pythonVersion": "3.11", "extraPaths": [str(ROOT)]}
    (directory / "pyrightconfig.json").write_text(json.dumps(pyright), encoding="utf-8")
    run("pyright", "--pythonpath", sys.executable, "-p", str(directory), *files, cwd=directory)


def test_contract_constant_is_the_contract_self_contained(generated: dict[str, Path]) -> None:
    """CONTRACT is `to_dict()` of the contract, policy and system prompt inline, and loads back equal."""
    contract = load_contract(EXAMPLE)
    module = load(generated["refund_loop"])
    assert module.CONTRACT == contract.to_dict()
    assert isinstance(module.CONTRACT["policy"], dict)
    assert "text" in module.CONTRACT["system"]
    assert load_contract(module.CONTRACT) == contract
    assert not hasattr(module, "HISTORY")
    assert module.SIGNAL_HANDLERS == {}


async def test_stub_error_goes_back_to_the_model(generated: dict[str, Path]) -> None:
    """An unfilled stub's NotImplementedError is an is_error tool result the model reads; the run ends."""
    call = {"type": "tool_use", "id": "toolu_1", "name": "read_order", "input": {"order_id": "O-104"}}
    script = [
        {"stop_reason": "tool_use", "content": [call]},
        {"stop_reason": "end_turn", "content": [{"type": "text", "text": "I could not read the order."}]},
    ]
    loop = build(load(generated["refund_loop"]), ScriptedClient(script), observers=Observers(metrics=None))
    result = await loop.run(demo.GOAL)
    assert result.stop_reason == "evidence_missing"  # the order was never read
    (observation,) = result.state.observations
    assert observation.outcome == "error"
    assert observation.content == "NotImplementedError: read_order: fill in this handler (see the contract)"
    answer = result.messages[2]
    assert answer["role"] == "user"
    assert answer["content"] == [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": observation.content, "is_error": True}
    ]


async def test_filled_handlers_run_the_demo_end_to_end(generated: dict[str, Path]) -> None:
    """With the demo's handlers in HANDLERS, the demo script completes with the demo's answer."""
    module = load(generated["refund_loop"])
    handlers = cast(dict[str, Callable[..., object]], module.HANDLERS)
    handlers.update({tool.name: tool.handler for tool in demo.TOOLS})  # what demo_loop().tools holds
    result = await build(module, ScriptedClient(demo.SCRIPT), observers=Observers(metrics=None)).run(
        demo.GOAL
    )
    assert result.stop_reason == "completed"
    assert result.answer == demo.ANSWER
    evidence = {obs.tool for obs in result.state.observations if obs.outcome == "ok"}
    assert evidence >= {"read_order", "read_delivery_status"}


def test_stub_signatures_follow_the_schemas(generated: dict[str, Path]) -> None:
    """Required fields first, optional ones default to None, odd property names fall back to **arguments."""
    module = load(generated["refund_loop"])
    draft = inspect.signature(module.draft_refund_recommendation)
    assert list(draft.parameters) == ["order_id", "recommendation", "amount", "rationale", "ctx"]
    assert draft.parameters["ctx"].kind is inspect.Parameter.KEYWORD_ONLY
    edge = load(generated["edge_loop"])
    handlers = cast(dict[str, Callable[..., object]], edge.HANDLERS)
    assert list(handlers) == [LONG_TOOL, "open", "2fa", "build_loop"]
    long = inspect.signature(handlers[LONG_TOOL]).parameters
    assert list(long) == ["ctx", "note", "count", "tags", "ctx_", "extra"]  # the schema is open: **extra
    assert [long[name].default for name in ("note", "count", "tags")] == [None, None, None]
    assert long["ctx"].default is inspect.Parameter.empty
    (arguments,) = inspect.signature(handlers["open"]).parameters.values()
    assert (arguments.name, arguments.kind) == ("arguments", inspect.Parameter.VAR_KEYWORD)
    assert handlers["2fa"].__name__ == "tool_2fa"
    assert handlers["build_loop"] is not edge.build_loop
    assert " ".join(str(inspect.getdoc(handlers[LONG_TOOL])).split()) == " ".join(LONG_DESCRIPTION.split())


async def test_custom_and_unhandled_signals_compile(generated: dict[str, Path]) -> None:
    """Custom handler stubs are in SIGNAL_HANDLERS; a stop_reason routed to unhandled_stop raises."""
    edge = load(generated["edge_loop"])
    signal_handlers = cast(dict[str, Callable[..., object]], edge.SIGNAL_HANDLERS)
    assert list(signal_handlers) == ["judge", "build_loop"]
    assert signal_handlers["build_loop"] is not edge.build_loop
    with pytest.raises(NotImplementedError, match="judge: fill in this handler"):
        signal_handlers["judge"](None, None)
    assert edge.HISTORY == edge_contract()["history"]
    refusal = {"stop_reason": "refusal", "content": [{"type": "text", "text": "No."}]}
    loop = build(edge, ScriptedClient([refusal]))
    assert set(loop.tools) == {LONG_TOOL, "open", "2fa", "build_loop", "ask_human"}
    with pytest.raises(UnhandledStop):
        await loop.run("Go.", messages=edge.HISTORY)


def report_of(contract: Contract) -> str:
    """The report of a contract, compiled from a fixed source name."""
    return compile_report(contract, source="contracts/x.json")


def test_report_shows_the_runtime_diagram_signals_tools_and_checks() -> None:
    """The report holds the runtime's own mermaid diagram, a row per signal and per tool, and every rule."""
    contract = load_contract(EXAMPLE)
    report = report_of(contract)
    assert report.startswith("# Loop contract `refund_investigation`\n")
    assert f"```mermaid\n{render_mermaid()}```\n" in report
    for stop_reason, handler in contract.spec.signals.items():
        assert f"| `{stop_reason}` | `{handler}` |" in report
    assert "| `end_turn` | `on_end_turn` | A claim of completion" in report
    for tool in contract.spec.tools:
        assert f"| `{tool.name}` |" in report
    assert "| `draft_refund_recommendation` | side effect |" in report
    assert "| `max_steps` | 8 |" in report
    assert "| `max_total_tokens` | — |" in report
    assert "| forbidden | `change_payment_method`, `issue_refund`, `update_policy` |" in report
    for rule, text in RULES.items():
        assert f"- ✓ `{rule}`: {text}" in report
    assert "- metrics: on" in report
    assert contract.spec.system is not None
    assert contract.spec.system in report


def test_report_of_custom_and_unhandled_signals() -> None:
    """Custom handlers read as your code, unhandled_stop as UnhandledStop; cells stay one line."""
    report = report_of(load_contract(edge_contract()))
    assert "| `end_turn` | `judge` | custom (your code) |" in report
    assert "| `refusal` | `unhandled_stop` | raises UnhandledStop |" in report
    assert "| `open` | needs approval | `content-type`: string<br>`class`: any |" in report
    assert "`note`: string or null<br>" in report
    assert "| `build_loop` | needs approval (policy) |" in report
    assert "then one last call without tools" in report
    assert "| `on_forbidden` | `stop` (default) |" in report
    assert "````text\n" in report
    assert "- metrics: off" in report
    assert "Awkward \\| names" in report


def test_report_shows_what_an_invented_tool_name_does() -> None:
    """The policy table has an `on_unknown_tool` row: the default `report`, or the contract's `stop`."""
    assert "| `on_unknown_tool` | `report` (default) |" in report_of(load_contract(EXAMPLE))
    raw = edge_contract()
    raw["policy"]["on_unknown_tool"] = "stop"
    report = report_of(load_contract(raw))
    assert "| `on_unknown_tool` | `stop` |" in report
    assert (
        report.index("`on_forbidden`") < report.index("`on_unknown_tool`") < report.index("`on_tool_error`")
    )


def test_an_unchecked_contract_is_refused() -> None:
    """A contract built in code that breaks a rule is refused: the report never claims a failed check."""
    spec = LoopSpec.of(**{**dict(load_contract(EXAMPLE).spec), "signals": {"tool_use": "on_tool_use"}})
    broken = Contract(spec=spec)
    with pytest.raises(ContractError, match="unhandled-signal"):
        compile_module(broken, source="code")
    with pytest.raises(ContractError, match="unhandled-signal"):
        report_of(broken)


def test_compile_is_deterministic() -> None:
    """The same contract gives the same module and the same report, byte for byte."""
    for source in (EXAMPLE, edge_contract()):
        first, second = load_contract(source), load_contract(source)
        assert compile_module(first, source="c.json") == compile_module(second, source="c.json")
        assert report_of(first) == report_of(second)
