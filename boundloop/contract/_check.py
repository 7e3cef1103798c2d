"""The rules a loop contract must keep: the schemas first, then the loop's own rules.

Each problem names its rule and the field, so a reviewer reads `unhandled-signal: signals:
refusal has no handler` instead of a stack trace. The rules are data (`RULES`): the compile
report lists them as the checks a contract passed.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from importlib import resources
from typing import Any, Final, cast, final

import jsonschema
import jsonschema.protocols
import referencing

from ..handlers._propose import KNOWN_STOP_REASONS
from ..handlers.stops import DEFAULT_HANDLERS
from ..handlers.tools import TOOL_NAME

UNHANDLED: Final = "unhandled_stop"
"""The handler name that says: this stop_reason ends the run with `UnhandledStop`."""
BUILTIN_HANDLERS: Final[Mapping[str, str]] = {
    handler.__name__: (handler.__doc__ or "").strip().splitlines()[0] for handler in DEFAULT_HANDLERS.values()
}
"""The built-in signal handlers by name, with what each does."""

RULES: Final[Mapping[str, str]] = {
    "schema": "the contract and its policy match their JSON Schemas (an unknown field is named)",
    "budget-required": "a budget with max_steps: there is no unbounded loop",
    "control-by-prose": "no field ends the loop on the model's text; control is the typed stop_reason",
    "tool-result-role": "a tool_result is only ever in a user message, with the tool_use_id it answers",
    "unknown-handler": "every signal handler is built in, `unhandled_stop`, or declared in custom_handlers",
    "unhandled-signal": "every API stop_reason has an explicit handler (or `unhandled_stop`)",
    "tool-schema": "every tool has a valid JSON Schema of type object for its input (and output)",
    "allowed-and-forbidden": "no tool is both allowed and forbidden",
    "api-name": "every tool name is one the Messages API accepts: 1-64 of [a-zA-Z0-9_-]",
    "unknown-tool": "the policy's allowed, approval and evidence lists name declared tools",
    "duplicate-tool": "each tool is declared once",
    "file": "the files the contract names (policy, system prompt) exist and parse",
}
"""Rule id -> what it guarantees."""

_PROSE: Final = re.compile(
    r"(?:done|stop|finish|complete|end|final|exit|success|answer)\w*_?"
    r"(?:text|phrase|marker|keyword|word|string|contains|regex|pattern|token|match)"
    r"|(?:text|content|output|reply|answer)_?(?:contains|matches|regex|pattern|marker|includes)",
    re.IGNORECASE,
)
"""Field names that decide the loop's end from what the model wrote."""
_OPAQUE: Final = frozenset({"input_schema", "output_schema", "history"})
"""Fields whose keys are the user's data (schemas, messages), not contract fields."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """One rule a contract breaks, and where."""

    rule: str
    where: str
    """The field, as a JSON path (`tools/2/name`), or `(contract)`."""
    message: str

    def __str__(self) -> str:
        return f"{self.rule}: {self.where}: {self.message}"


def _schema(name: str) -> dict[str, Any]:
    text = resources.files("boundloop.contract").joinpath(name).read_text(encoding="utf-8")
    return cast(dict[str, Any], json.loads(text))


# Read at import: checking a contract inside a running event loop must not block on a file.
CONTRACT_SCHEMA: Final = _schema("loop-contract.schema.json")
POLICY_SCHEMA: Final = _schema("loop-policy.schema.json")
# The contract's `policy` refers to the policy schema by its $id.
_POLICY_RESOURCE: Final[referencing.Resource[Any]] = referencing.Resource.from_contents(POLICY_SCHEMA)
_REGISTRY: Final[referencing.Registry[Any]] = referencing.Registry[Any]().with_resource(
    POLICY_SCHEMA["$id"], _POLICY_RESOURCE
)
_CONTRACT: Final[jsonschema.protocols.Validator] = cast(
    "jsonschema.protocols.Validator", jsonschema.Draft202012Validator(CONTRACT_SCHEMA, registry=_REGISTRY)
)
_POLICY: Final[jsonschema.protocols.Validator] = cast(
    "jsonschema.protocols.Validator", jsonschema.Draft202012Validator(POLICY_SCHEMA)
)


def schema_problems(raw: object, *, policy: bool = False, prefix: str = "") -> list[Problem]:
    """The schema's complaints about a contract (or, with `policy=True`, a policy file).

    Fields the `control-by-prose` rule names are not reported again as unknown fields.
    """
    validator = _POLICY if policy else _CONTRACT
    errors: Iterable[jsonschema.ValidationError] = validator.iter_errors(cast(Any, raw))
    problems: list[Problem] = []
    for error in sorted(errors, key=lambda e: [str(part) for part in e.absolute_path]):
        where = prefix + "/".join(str(part) for part in error.absolute_path)
        if error.validator == "additionalProperties" and all(
            _PROSE.search(name) for name in _unexpected(error)
        ):
            continue
        rule = "schema"
        if list(error.absolute_path)[:1] == ["budget"] or (
            error.validator == "required" and "'budget'" in error.message
        ):
            rule = "budget-required"
        elif error.validator == "required" and "'input_schema'" in error.message:
            rule = "tool-schema"
        problems.append(Problem(rule=rule, where=where or "(contract)", message=error.message))
    return problems


def _unexpected(error: jsonschema.ValidationError) -> list[str]:
    instance: object = error.instance
    allowed: object = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
    if not isinstance(instance, dict) or not isinstance(allowed, dict):
        return []
    return [str(key) for key in cast(dict[str, object], instance) if key not in allowed]


def prose_problems(raw: object, where: str = "") -> Iterator[Problem]:
    """Fields, at any depth outside schemas and messages, that end the loop on text."""
    if isinstance(raw, dict):
        for key, value in cast(dict[str, object], raw).items():
            path = f"{where}{key}"
            if _PROSE.search(key):
                yield Problem(
                    rule="control-by-prose",
                    where=path,
                    message="this field would end the loop on the model's text; route on the typed "
                    "stop_reason in `signals` (and `policy.required_evidence`) instead",
                )
            elif key not in _OPAQUE:
                yield from prose_problems(value, f"{path}/")
    elif isinstance(raw, list):
        for index, item in enumerate(cast(list[object], raw)):
            yield from prose_problems(item, f"{where}{index}/")


def loop_problems(contract: Mapping[str, Any], policy: Mapping[str, Any], policy_at: str) -> list[Problem]:
    """The loop's rules, on a contract that matches its schema (and its resolved policy)."""
    problems = list(_tool_problems(contract.get("tools", [])))
    problems += _signal_problems(contract.get("signals", {}), contract.get("custom_handlers", []))
    problems += _policy_problems(policy, {tool["name"] for tool in contract.get("tools", [])}, policy_at)
    problems += _history_problems(contract.get("history", []))
    return problems


def _tool_problems(tools: list[dict[str, Any]]) -> Iterator[Problem]:
    seen: set[str] = set()
    for index, tool in enumerate(tools):
        name: str = tool["name"]
        if not TOOL_NAME.fullmatch(name):
            yield Problem(
                rule="api-name",
                where=f"tools/{index}/name",
                message=f"{name!r} is rejected by the Messages API: use 1-64 characters of [a-zA-Z0-9_-]",
            )
        if name in seen:
            yield Problem(
                rule="duplicate-tool", where=f"tools/{index}/name", message=f"{name!r} is declared twice"
            )
        seen.add(name)
        for field in ("input_schema", "output_schema"):
            if field in tool:
                problem = _schema_fault(tool[field])
                if problem is not None:
                    yield Problem(rule="tool-schema", where=f"tools/{index}/{field}", message=problem)


def _schema_fault(schema: dict[str, Any]) -> str | None:
    if schema.get("type") != "object":
        return "a tool's schema must have type 'object'"
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"not a valid JSON Schema: {exc.message}"
    return None


def _signal_problems(signals: Mapping[str, str], custom: list[str]) -> Iterator[Problem]:
    known = {*BUILTIN_HANDLERS, UNHANDLED, *custom}
    for stop_reason, handler in signals.items():
        if handler not in known:
            yield Problem(
                rule="unknown-handler",
                where=f"signals/{stop_reason}",
                message=f"handler {handler!r} is not built in ({', '.join(sorted(BUILTIN_HANDLERS))}), "
                f"{UNHANDLED!r}, or listed in custom_handlers",
            )
    for stop_reason in sorted(KNOWN_STOP_REASONS - set(signals)):
        yield Problem(
            rule="unhandled-signal",
            where="signals",
            message=f"the API's stop_reason {stop_reason!r} has no handler: name one, or "
            f"{UNHANDLED!r} to make the run raise UnhandledStop",
        )


def _policy_problems(policy: Mapping[str, Any], tools: set[str], where: str) -> Iterator[Problem]:
    overlap = sorted(set(policy.get("allowed", ())) & set(policy.get("forbidden", ())))
    if overlap:
        yield Problem(
            rule="allowed-and-forbidden",
            where=f"{where}forbidden",
            message=f"also allowed: {', '.join(overlap)}",
        )
    for field in ("allowed", "forbidden", "requires_approval", "required_evidence", "escalation_tool"):
        value = policy.get(field)
        names: list[str] = [] if value is None else [value] if isinstance(value, str) else list(value)
        bad = [name for name in names if not TOOL_NAME.fullmatch(name)]
        if bad:
            yield Problem(
                rule="api-name", where=f"{where}{field}", message=f"rejected by the Messages API: {bad}"
            )
        if field in ("allowed", "requires_approval", "required_evidence"):
            unknown = sorted(set(names) - tools)
            if unknown:
                yield Problem(
                    rule="unknown-tool",
                    where=f"{where}{field}",
                    message=f"names tools the contract does not declare: {', '.join(unknown)}",
                )


def _history_problems(history: list[dict[str, Any]]) -> Iterator[Problem]:
    offered: set[str] = set()
    for index, message in enumerate(history):
        content: object = message["content"]
        blocks = cast(list[dict[str, Any]], content) if isinstance(content, list) else []
        for position, block in enumerate(blocks):
            where = f"history/{index}/content/{position}"
            if block.get("type") == "tool_use":
                offered.add(str(block.get("id")))
            if block.get("type") != "tool_result":
                continue
            if message["role"] != "user":
                yield Problem(
                    rule="tool-result-role",
                    where=where,
                    message=f"a tool_result in the {message['role']} role: tool results go in a user message",
                )
            elif block.get("tool_use_id") not in offered:
                yield Problem(
                    rule="tool-result-role",
                    where=where,
                    message="a tool_result without the tool_use_id of a tool_use before it",
                )
