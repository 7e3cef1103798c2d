"""The review report of a contract: what `boundloop compile --report` writes."""

from __future__ import annotations

import html
import inspect
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final, cast

from ..policy import Policy
from ..settings import LoopSpec, budget_data, policy_data
from ..state import Budget
from ..statemachine.diagram import render_mermaid
from ._check import BUILTIN_HANDLERS, UNHANDLED
from ._compile import json_type
from ._contract import Contract, load_contract
from ._rules import RULES

WIDTH: Final = 110
"""The line length the generated module keeps (the project's ruff `line-length`)."""
TODO: Final = "fill in this handler"
_POLICY_SETTINGS: Final = (
    "on_forbidden",
    "on_unknown_tool",
    "on_missing_evidence",
    "on_max_tokens",
    "max_continuations",
    "on_tool_error",
)


def compile_report(contract: Contract, *, source: str) -> str:
    """The markdown review report of a checked contract: what a reviewer signs off.

    Args:
        contract: a checked contract (`load_contract`): the report lists the checks it passed.
        source: where the contract came from.

    Returns:
        The report: the state diagram (the table the runtime executes), the signal routes, the
        budget, the tools, the policy, the metrics and the checks passed. The same contract gives
        the same text.

    Raises:
        ContractError: the contract breaks a rule: the report never claims a check that failed.
    """
    load_contract(contract.to_dict())  # a contract built in code was never checked
    spec = contract.spec
    title = f"# Loop contract `{spec.name}`"
    lines = [title, ""] + ([_cell(spec.description), ""] if spec.description else [])
    lines.append(f"Compiled from `{source}` by `boundloop compile`. Model: `{spec.model}`")
    lines[-1] += f", max_tokens {spec.max_tokens}."
    lines += ["", "## State machine", ""]
    lines += ["The transition table `AgentLoop` executes, drawn from the same data:", ""]
    lines += ["```mermaid", render_mermaid().rstrip("\n"), "```", "", "## Signals", ""]
    lines += _table(("stop_reason", "handler", "what it does"), _signal_rows(spec))
    lines += ["", "## Budget", ""]
    budget = budget_data(spec.budget)
    lines += [_bound(budget), "", *_table(("field", "value"), _budget_rows(budget))]
    lines += ["", "## Tools", ""]
    lines += _table(("tool", "flags", "input", "description"), _tool_rows(spec))
    if spec.mcp_servers:
        lines += ["", "## MCP servers", "", "Their tools are listed when the server connects.", ""]
        lines += _table(("server", "starts or reaches", "prefix", "timeout_s"), _server_rows(spec))
    lines += ["", "## Policy", "", *_table(("setting", "value"), _policy_rows(policy_data(spec.policy)))]
    lines += ["", "## System prompt", ""]
    lines += ["—"] if spec.system is None else _fenced("text", spec.system)
    lines += ["", "## Metrics", "", f"- metrics: {'on' if spec.metrics else 'off'}"]
    if "max_tool_output_chars" in budget:
        lines.append(f"- tool output cut at {spec.budget.max_tool_output_chars} characters")
    if spec.history:
        lines.append(f"- every run starts from a history of {len(spec.history)} message(s)")
    lines += ["", "## Checks passed", ""]
    lines += [f"- ✓ `{rule}`: {text}" for rule, text in RULES.items()]
    return "\n".join(lines) + "\n"


def _bound(budget: Mapping[str, Any]) -> str:
    last = ", then one last call without tools for the best answer"
    last *= budget.get("on_exhausted") == "final_answer"
    calls = f"{budget['max_steps']} model calls a run, pause_turn and continuations included"
    return f"`max_steps` bounds the loop: {calls}{last}."


def _fenced(language: str, text: str) -> list[str]:
    """A fenced block longer than any run of backticks in `text`."""
    fence = "`" * max([3, *(len(run) + 1 for run in re.findall("`+", text))])
    return [fence + language, text, fence]


def _signal_rows(spec: LoopSpec) -> Iterable[tuple[str, ...]]:
    for stop_reason, handler in spec.signals.items():
        if handler == UNHANDLED:
            does = "raises UnhandledStop"
        elif handler in spec.custom_handlers:
            does = "custom (your code)"
        else:
            does = BUILTIN_HANDLERS[handler]
        yield f"`{stop_reason}`", f"`{handler}`", does


def _budget_rows(budget: Mapping[str, Any]) -> Iterable[tuple[str, ...]]:
    for name, parameter in inspect.signature(Budget).parameters.items():
        if name in budget:
            yield f"`{name}`", _value(budget[name])
        elif parameter.default is None:
            yield f"`{name}`", "—"
        else:
            yield f"`{name}`", f"— (default {_value(parameter.default)})"


def _tool_rows(spec: LoopSpec) -> Iterable[tuple[str, ...]]:
    approval = spec.policy.requires_approval
    for tool in spec.tools:
        flags = ["side effect"] * tool.side_effect
        flags += ["needs approval"] * tool.requires_approval
        flags += ["needs approval (policy)"] * (tool.name in approval and not tool.requires_approval)
        flags += [] if tool.timeout_s is None else [f"timeout {_value(tool.timeout_s)} s"]
        flags += [] if tool.output_schema is None else ["output checked"]
        yield f"`{tool.name}`", ", ".join(flags) or "—", _fields(tool.input_schema), _cell(tool.description)


def _fields(schema: Mapping[str, Any]) -> str:
    properties: Mapping[str, Any] = schema.get("properties", {})
    required = set(schema.get("required", ()))
    fields: list[str] = []
    for name, spec in properties.items():
        kind = json_type(spec)
        kinds = cast(list[object], kind) if isinstance(kind, list) else [kind or "any"]
        fields.append(f"`{_cell(name)}`: {' or '.join(map(str, kinds))}{', required' * (name in required)}")
    return "<br>".join(fields) or "—"


def _policy_rows(policy: Mapping[str, Any]) -> Iterable[tuple[str, ...]]:
    defaults = {name: p.default for name, p in inspect.signature(Policy).parameters.items()}
    for field in ("allowed", "forbidden", "requires_approval", "required_evidence", "escalation_tool"):
        value = policy.get(field)
        label = field.replace("_", " ")
        if value is None:
            yield label, "— (any declared tool)" if field == "allowed" else "—"
        else:
            names = [value] if isinstance(value, str) else list(value)
            yield label, ", ".join(f"`{name}`" for name in names) or "none"
    for field in _POLICY_SETTINGS:
        value = policy.get(field)
        default = defaults[field]
        yield f"`{field}`", _value(default) + " (default)" if value in (None, default) else _value(value)


def _value(value: object) -> str:
    return f"`{value}`" if isinstance(value, str) else str(value)


def _server_rows(spec: LoopSpec) -> Iterator[tuple[str, ...]]:
    for server in spec.mcp_servers:
        target = server.url or " ".join([server.command or "", *server.args])
        yield (
            _cell(server.name),
            _cell(target),
            "—" if server.prefix is None else _cell(server.prefix),
            "—" if server.timeout_s is None else f"{server.timeout_s:g}",
        )


def _cell(text: str) -> str:
    """Contract text for the report: one line, markup inert (pipes, backticks, HTML escaped)."""
    return html.escape(" ".join(text.split())).replace("|", "\\|").replace("`", "\\`")


def _table(header: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> list[str]:
    return [
        f"| {' | '.join(header)} |",
        f"|{'|'.join('---' for _ in header)}|",
        *(f"| {' | '.join(row)} |" for row in rows),
    ]
