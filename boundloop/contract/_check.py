"""The rules a loop contract must keep: the schemas first, then the loop's own rules.

Each problem names its rule and the field, so a reviewer reads `unhandled-signal: signals:
refusal has no signal handler` instead of a stack trace. The rules are data (`RULES`): the compile
report lists them as the checks a contract passed.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from importlib import resources
from typing import Any, Final, cast, final

import jsonschema
import jsonschema.protocols
import referencing
from anthropic.types import MessageParam

from .._base.schemas import unresolved_ref
from .._lazy import claim
from ..signals import DEFAULT_HANDLERS, KNOWN_STOP_REASONS
from ..state import BUDGET_COUNTS
from ..tools import TOOL_NAME
from ..transcript import transcript_errors
from ._mcp import is_server_tool, mcp_prefixes, mcp_problems

UNHANDLED: Final = "unhandled_stop"
"""The signal handler name that says: this stop_reason ends the run with `UnhandledStop`."""
BUILTIN_HANDLERS: Final[Mapping[str, str]] = {
    handler.__name__: (handler.__doc__ or "").strip().splitlines()[0] for handler in DEFAULT_HANDLERS.values()
}
"""The built-in signal handlers by name, with what each does."""


_PROSE: Final = re.compile(
    r"(?:done|stop|finish|complete|end|final|exit|success|answer)\w*_?"
    r"(?:text|phrase|marker|keyword|word|string|contains|regex|pattern|token|match)"
    r"|(?:text|content|output|reply|answer)_?(?:contains|matches|regex|pattern|marker|includes)",
    re.IGNORECASE,
)
"""Field names that decide the loop's end from what the model wrote."""
_PROSE_FIX: Final = (
    "this would end the loop on the model's text; route on the typed stop_reason in `signals` "
    "(and `policy.required_evidence`) instead"
)
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
# The contract schema bundles the policy schema (`$defs/policy`): every `$ref` is local, and the
# empty registry means a reference that is not would fail rather than fetch anything.
_NO_RETRIEVAL: Final[referencing.Registry[Any]] = referencing.Registry[Any]()
_CONTRACT: Final[jsonschema.protocols.Validator] = cast(
    "jsonschema.protocols.Validator", jsonschema.Draft202012Validator(CONTRACT_SCHEMA, registry=_NO_RETRIEVAL)
)
_POLICY: Final[jsonschema.protocols.Validator] = cast(
    "jsonschema.protocols.Validator", jsonschema.Draft202012Validator(POLICY_SCHEMA, registry=_NO_RETRIEVAL)
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
                yield Problem(rule="control-by-prose", where=path, message=_PROSE_FIX)
            elif key not in _OPAQUE:
                yield from prose_problems(value, f"{path}/")
    elif isinstance(raw, list):
        for index, item in enumerate(cast(list[object], raw)):
            yield from prose_problems(item, f"{where}{index}/")


def loop_problems(
    contract: Mapping[str, Any],
    policy: Mapping[str, Any],
    policy_at: str,
    broken: frozenset[str] = frozenset(),
) -> list[Problem]:
    """The loop's rules, on the fields of a contract (and its resolved policy) that match the schema.

    Args:
        contract: the contract.
        policy: its policy, resolved (inline or from its file).
        policy_at: the field prefix of the policy's problems.
        broken: the top-level fields (and `policy`) that are missing or broke the schema; the
            rules reading them are skipped, since the schema's problem says what is wrong there.
    """

    def sound(*fields: str) -> bool:
        return broken.isdisjoint(fields)

    problems: list[Problem] = []
    if sound("name", "model", "custom_handlers", "signals"):
        problems += _name_problems(contract)
    if sound("budget", "max_tokens", "max_tool_output_chars", "tools", "policy"):
        problems += _number_problems(contract, policy, policy_at)
    if sound("tools"):
        problems += _tool_problems(contract.get("tools", []))
    if sound("signals", "custom_handlers"):
        problems += _signal_problems(contract.get("signals", {}), contract.get("custom_handlers", []))
    if sound("mcp_servers", "tools"):
        found = mcp_problems(contract.get("mcp_servers", []), contract.get("tools", []))
        problems += [Problem(rule=rule, where=where, message=message) for rule, where, message in found]
    if sound("tools", "policy", "mcp_servers"):
        declared = {tool["name"] for tool in contract.get("tools", [])}
        if policy.get("escalation_tool"):
            declared.add(policy["escalation_tool"])  # the loop adds it itself
        servers = bool(contract.get("mcp_servers"))
        problems += _policy_problems(policy, declared, policy_at, mcp_prefixes(contract), servers=servers)
    if sound("history"):
        problems += _history_problems(contract.get("history", []))
    return problems


HANDLER_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
"""A signal handler name a contract can hold (matched whole)."""
_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.:-]{0,127}")
_MODEL: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,127}")
_SIGNAL: Final = re.compile(r"[a-z][a-z0-9_]{0,63}")


def _name_problems(contract: Mapping[str, Any]) -> Iterator[Problem]:
    """Names are matched whole (a JSON Schema pattern's `$` lets a trailing newline through)."""
    fields: list[tuple[str, str, re.Pattern[str], str]] = [
        ("name", contract["name"], _NAME, "a letter or _, then up to 127 of [A-Za-z0-9_.:-]"),
        ("model", contract["model"], _MODEL, "a model name: up to 128 of [A-Za-z0-9._:@/-]"),
    ]
    fields += [
        (f"custom_handlers/{index}", name, HANDLER_NAME, "a Python identifier of at most 64 ASCII characters")
        for index, name in enumerate(contract.get("custom_handlers", []))
    ]
    for stop_reason, handler in contract.get("signals", {}).items():
        fields.append((f"signals/{stop_reason}", stop_reason, _SIGNAL, "a stop_reason: [a-z][a-z0-9_]*"))
        fields.append(
            (f"signals/{stop_reason}", handler, HANDLER_NAME, "a handler name: a Python identifier")
        )
    for where, value, pattern, what in fields:
        if not pattern.fullmatch(value):
            yield Problem(rule="schema", where=where, message=f"{value!r} is not {what}")


_WHOLE: Final = BUDGET_COUNTS | {"max_tokens", "max_tool_output_chars", "max_continuations"}
"""Fields that count something: whole numbers only."""


def _number_problems(
    contract: Mapping[str, Any], policy: Mapping[str, Any], policy_at: str
) -> Iterator[Problem]:
    """JSON Schema counts 1.0 as an integer and Python reads 1e309 as infinity: neither is a limit."""
    values: list[tuple[str, object]] = [(f"budget/{key}", value) for key, value in contract["budget"].items()]
    values += [(key, contract[key]) for key in ("max_tokens", "max_tool_output_chars") if key in contract]
    values += (
        [(f"{policy_at}max_continuations", policy["max_continuations"])]
        if "max_continuations" in policy
        else []
    )
    values += [
        (f"tools/{i}/timeout_s", t["timeout_s"]) for i, t in enumerate(contract["tools"]) if "timeout_s" in t
    ]
    for where, value in values:
        whole = where.rsplit("/", 1)[-1] in _WHOLE
        if whole and isinstance(value, float):
            yield Problem(
                rule="number",
                where=where,
                message=f"{value!r} is not a whole number: write {int(value)}"
                if math.isfinite(value)
                else f"{value!r} is not a whole number",
            )
        elif isinstance(value, float) and not math.isfinite(value):
            yield Problem(rule="number", where=where, message=f"{value!r} is not a finite limit")


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
                problem = _schema_fault(tool[field], needs_object=field == "input_schema")
                if problem is not None:
                    yield Problem(rule="tool-schema", where=f"tools/{index}/{field}", message=problem)


def _schema_fault(schema: dict[str, Any], *, needs_object: bool) -> str | None:
    if needs_object and schema.get("type") != "object":
        return "a tool's input schema must have type 'object'"
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"not a valid JSON Schema: {exc.message}"
    return unresolved_ref(schema)


_OWN_HANDLER: Final[Mapping[str, str]] = {
    reason: handler.__name__ for reason, handler in DEFAULT_HANDLERS.items()
}
"""Each API stop_reason's own built-in signal handler: the only built-in that may answer it."""


def _signal_problems(signals: Mapping[str, str], custom: list[str]) -> Iterator[Problem]:
    for index, name in enumerate(custom):
        if name in BUILTIN_HANDLERS or name == UNHANDLED:
            yield Problem(
                rule="unknown-handler",
                where=f"custom_handlers/{index}",
                message=f"{name!r} is a built-in signal handler's name: a reviewer would read it as the "
                "built-in",
            )
        elif _PROSE.search(name):
            yield Problem(rule="control-by-prose", where=f"custom_handlers/{index}", message=_PROSE_FIX)
    for stop_reason, handler in signals.items():
        yield from _route_problems(stop_reason, handler, custom)
    for stop_reason in sorted(KNOWN_STOP_REASONS - set(signals)):
        yield Problem(
            rule="unhandled-signal",
            where="signals",
            message=f"the API's stop_reason {stop_reason!r} has no signal handler: name one, or "
            f"{UNHANDLED!r} to make the run raise UnhandledStop",
        )


def _route_problems(stop_reason: str, handler: str, custom: list[str]) -> Iterator[Problem]:
    where = f"signals/{stop_reason}"
    if handler in custom or handler == UNHANDLED:
        return
    if handler not in BUILTIN_HANDLERS:
        yield Problem(
            rule="unknown-handler",
            where=where,
            message=f"handler {handler!r} is not built in ({', '.join(sorted(BUILTIN_HANDLERS))}), "
            f"{UNHANDLED!r}, or listed in custom_handlers",
        )
    elif stop_reason not in _OWN_HANDLER:
        yield Problem(
            rule="signal-handler",
            where=where,
            message=f"{stop_reason!r} is not a stop_reason the API defines: only a custom signal handler "
            f"or {UNHANDLED!r} may answer it",
        )
    elif handler != _OWN_HANDLER[stop_reason]:
        yield Problem(
            rule="signal-handler",
            where=where,
            message=f"{handler} answers {', '.join(r for r, h in _OWN_HANDLER.items() if h == handler)}, "
            f"not {stop_reason}: use {_OWN_HANDLER[stop_reason]}, a custom signal handler or {UNHANDLED!r}",
        )


def _policy_problems(
    policy: Mapping[str, Any], tools: set[str], where: str, prefixes: tuple[str, ...], *, servers: bool
) -> Iterator[Problem]:
    """The policy's rules; a name under an MCP server's prefix is taken as one of its tools (the
    hint about prefixes only where the contract has MCP servers)."""
    forbidden = set(policy.get("forbidden", ()))
    overlap = sorted(set(policy.get("allowed", ())) & forbidden)
    if overlap:
        yield Problem(
            rule="allowed-and-forbidden",
            where=f"{where}forbidden",
            message=f"also allowed: {', '.join(overlap)}",
        )
    yield from _conflicts(policy, forbidden, where)
    for field in ("allowed", "forbidden", "requires_approval", "required_evidence", "escalation_tool"):
        value = policy.get(field)
        names: list[str] = [] if value is None else [value] if isinstance(value, str) else list(value)
        bad = [name for name in names if not TOOL_NAME.fullmatch(name)]
        if bad:
            yield Problem(
                rule="api-name", where=f"{where}{field}", message=f"rejected by the Messages API: {bad}"
            )
        if field in ("allowed", "requires_approval", "required_evidence"):
            unknown = sorted(name for name in set(names) - tools if not is_server_tool(name, prefixes))
            if unknown:
                yield Problem(
                    rule="unknown-tool",
                    where=f"{where}{field}",
                    message=f"names tools the contract does not declare: {', '.join(unknown)}"
                    + (" (name an MCP server's tool with the server's prefix)" if servers else ""),
                )


def _conflicts(policy: Mapping[str, Any], forbidden: set[str], where: str) -> Iterator[Problem]:
    for field, what in (
        ("required_evidence", "required as evidence"),
        ("requires_approval", "gated by approval"),
    ):
        both = sorted(set(policy.get(field, ())) & forbidden)
        if both:
            yield Problem(
                rule="policy-conflict",
                where=f"{where}{field}",
                message=f"forbidden, yet {what}: {', '.join(both)}",
            )
    if policy.get("allowed") is not None:
        unreachable = sorted(set(policy.get("required_evidence", ())) - set(policy["allowed"]))
        if unreachable:
            yield Problem(
                rule="policy-conflict",
                where=f"{where}required_evidence",
                message=f"not allowed, so no run can gather it or complete: {', '.join(unreachable)}",
            )


def _history_problems(history: list[dict[str, Any]]) -> Iterator[Problem]:
    misplaced = False
    for index, message in enumerate(history):
        content: object = message["content"]
        blocks = cast(list[dict[str, Any]], content) if isinstance(content, list) else []
        for position, block in enumerate(blocks):
            if block.get("type") == "tool_result" and message["role"] != "user":
                misplaced = True
                yield Problem(
                    rule="tool-result-role",
                    where=f"history/{index}/content/{position}",
                    message=f"a tool_result in the {message['role']} role: tool results go in a user message",
                )
    if misplaced:
        return
    # The same transcript rules `run(goal, messages=history)` applies.
    for problem in transcript_errors(cast(list[MessageParam], history)):
        yield Problem(rule="history", where="history", message=problem)


claim("boundloop.contract", Problem)  # reported at its public home
