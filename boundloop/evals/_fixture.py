"""Eval fixtures: read JSON cases, validate them against the shipped schema, map tool names.

A `Case` is a fixture read and checked once: its model turns are real `Message` objects,
its tool names are the ones the Messages API accepts (the fixture's own names are kept for
the report), and its budget and policy have been built, so a bad fixture fails here with
the field named, never mid-run.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Final, cast, final

import jsonschema
import jsonschema.protocols
from anthropic.types import Message

from ..errors import ConfigurationError, FixtureError
from ..events import RENAMED_KINDS, EventKind
from ..records import StopReason
from ..settings import ToolSpec
from ..state import Budget, LoopState
from ..testing import parse_message
from ..tools import TOOL_NAME
from ._mocks import mocked_server

DEFAULT_MODEL: Final = "claude-sonnet-4-6"
DEFAULT_BUDGET: Final[Mapping[str, Any]] = {"max_steps": 10}
_NOT_API: Final = re.compile(r"[^a-zA-Z0-9_-]")


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What a human decides at a `needs_human` stop: approvals by tool_use id, or a reply."""

    approvals: Mapping[str, bool | str]
    reply: str | None


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Expected:
    """What the run must do; tool names are API names."""

    stop_reason: StopReason
    max_tool_calls: int | None = None
    max_steps: int | None = None
    forbidden_tools: tuple[str, ...] = ()
    requires_trace_events: tuple[EventKind, ...] = ()
    tool_sequence: tuple[str, ...] | None = None
    answer_contains: tuple[str, ...] = ()
    replay: bool = True


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One eval case, read from a fixture and checked."""

    case_id: str
    goal: str
    expected: Expected
    source: Path | None = None
    """The fixture file (None for a case built from a dict)."""
    description: str = ""
    system: str | None = None
    model_name: str = DEFAULT_MODEL
    turns: tuple[Message, ...] = ()
    mocked: Mapping[str, tuple[Mapping[str, Any], ...]] = dataclasses.field(
        default_factory=dict[str, tuple[Mapping[str, Any], ...]]
    )
    """Each tool's results in call order, by API name."""
    tools: tuple[ToolSpec, ...] = ()
    budget: Budget = dataclasses.field(default_factory=lambda: Budget(**DEFAULT_BUDGET))
    policy: Mapping[str, Any] = dataclasses.field(default_factory=dict[str, Any])
    """`Policy` keyword arguments, tool names mapped."""
    resume: tuple[Decision, ...] = ()
    state: LoopState | None = None
    """A saved run to replay instead of a script."""
    names: Mapping[str, str] = dataclasses.field(default_factory=dict[str, str])
    """API name -> the fixture's name, for every name the fixture mapped."""
    live: bool = False
    """The fixture has no `model` turns and no `state`: the case runs on a live model."""
    cut: StopReason | None = None
    """`cancelled` or `timeout`: the run is cut where the script or a tool's mocked results end."""

    def __str__(self) -> str:
        return self.case_id

    def shown(self, api_name: str) -> str:
        """A tool's name as the fixture writes it."""
        return self.names.get(api_name, api_name)


# Read at import: checking a fixture inside a running event loop must not block on a file.
_SCHEMA: Final[Mapping[str, Any]] = json.loads(
    resources.files("boundloop.evals").joinpath("fixture.schema.json").read_text(encoding="utf-8")
)
_VALIDATOR: Final[jsonschema.protocols.Validator] = cast(
    "jsonschema.protocols.Validator", jsonschema.Draft202012Validator(_SCHEMA)
)


def schema() -> Mapping[str, Any]:
    """The JSON Schema of the fixture format (`boundloop/evals/fixture.schema.json`)."""
    return _SCHEMA


def schema_problems(raw: object) -> list[str]:
    """What is wrong with `raw` as a fixture, per the schema: one `field: message` line each."""
    problems: list[str] = []
    if isinstance(raw, dict):
        fields = cast(dict[str, object], raw)
        if "model" in fields and "state" in fields:
            problems.append("state: a case replays a saved state or runs a model script, not both")
        problems += [
            f"{field}: a `state` case replays the recorded results and decisions; {field} is not used"
            for field in ("mocked_tools", "resume", "cut")
            if "state" in fields and field in fields
        ]
    errors: Iterable[jsonschema.ValidationError] = _VALIDATOR.iter_errors(cast(Any, raw))
    for error in sorted(errors, key=lambda e: [str(part) for part in e.absolute_path]):
        if not error.absolute_path and error.validator in _SAID_ABOVE:
            continue
        problems.append(f"{_where(error.absolute_path)}: {_message(error)}")
    return problems


_SAID_ABOVE: Final = frozenset({"dependentSchemas", "not"})
"""The schema's model-or-state rule, whose own message names no field: said plainly above."""


def _where(path: Iterable[object]) -> str:
    return "/".join(str(part) for part in path) or "(case)"


def _message(error: jsonschema.ValidationError) -> str:
    if error.validator == "additionalProperties":
        return f"{error.message} (see docs/evals.md for the fields)"
    return error.message


def api_name(name: str) -> str:
    """The name the Messages API sees for a fixture's tool name (dots and the like as `__`)."""
    return name if TOOL_NAME.fullmatch(name) else _NOT_API.sub("__", name)


def read_case(raw: object, *, source: Path | None = None) -> Case:
    """Check one fixture (a parsed JSON object) and build its `Case` (not yet its loop).

    Args:
        raw: the fixture.
        source: the file it came from; a relative `state` path is read from its folder.

    Raises:
        FixtureError: the fixture does not match the schema, two tool names map to one API
            name, a model turn is not a valid response, or the budget or policy is invalid.
    """
    problems = schema_problems(raw)
    if problems:
        raise FixtureError(problems)
    fixture = cast(dict[str, Any], raw)
    names = _name_map(fixture, problems)
    if problems:
        raise FixtureError(problems)

    def mapped(values: Iterable[str]) -> tuple[str, ...]:
        return tuple(api_name(value) for value in values)

    expected_raw: dict[str, Any] = fixture["expected"]
    contains = expected_raw.get("answer_contains", ())
    sequence = expected_raw.get("tool_sequence")
    expected = Expected(
        stop_reason=StopReason(expected_raw["stop_reason"]),
        max_tool_calls=expected_raw.get("max_tool_calls"),
        max_steps=expected_raw.get("max_steps"),
        forbidden_tools=mapped(expected_raw.get("forbidden_tools", ())),
        requires_trace_events=tuple(
            RENAMED_KINDS.get(kind, kind) for kind in expected_raw.get("requires_trace_events", ())
        ),
        tool_sequence=None if sequence is None else mapped(sequence),
        answer_contains=(contains,) if isinstance(contains, str) else tuple(contains),
        replay=expected_raw.get("replay", True),
    )
    model_name: str = fixture.get("model_name", DEFAULT_MODEL)
    case = Case(
        case_id=fixture["case_id"],
        goal=fixture["goal"],
        expected=expected,
        source=source,
        description=fixture.get("description", ""),
        system=fixture.get("system"),
        model_name=model_name,
        turns=tuple(_turns(fixture.get("model", ()), model_name, problems)),
        mocked={api_name(name): tuple(results) for name, results in fixture.get("mocked_tools", {}).items()},
        tools=_tools(fixture, {api_name(name): name for name in names}, problems),
        budget=_budget(fixture.get("budget", DEFAULT_BUDGET), problems),
        policy=_policy(fixture.get("policy", {})),
        resume=tuple(
            Decision(approvals=dict(item.get("approvals", {})), reply=item.get("reply"))
            for item in fixture.get("resume", ())
        ),
        state=_state(fixture.get("state"), source, problems),
        names={api_name(name): name for name in names if api_name(name) != name},
        live="model" not in fixture and "state" not in fixture,
        cut=None if "cut" not in fixture else StopReason(fixture["cut"]),
    )
    if problems:
        raise FixtureError(problems)
    return case


def _name_map(fixture: Mapping[str, Any], problems: list[str]) -> set[str]:
    """Every tool name the fixture writes; collisions and overlong API names are problems.

    A model turn may name a tool as the API saw it (`a__b` for the fixture's `a.b`), as a
    response pasted from production does: that is the same tool, not a collision.
    """
    names = set(_tool_names(fixture))
    spelled = {api_name(name) for name in names if not TOOL_NAME.fullmatch(name)}
    as_api_saw = spelled & (set(_model_names(fixture)) - set(_declared_names(fixture)))
    taken: dict[str, str] = {}
    for name in sorted(names):
        if name in as_api_saw:
            continue
        api = api_name(name)
        if len(api) > 64:
            problems.append(f"tool name {name!r} is longer than 64 characters as {api!r}")
        elif api in taken:
            problems.append(f"tool names {taken[api]!r} and {name!r} both map to {api!r} for the API")
        taken[api] = name
    return names


def _tool_names(fixture: Mapping[str, Any]) -> Iterator[str]:
    yield from _declared_names(fixture)
    yield from _model_names(fixture)


def _declared_names(fixture: Mapping[str, Any]) -> Iterator[str]:
    yield from fixture.get("mocked_tools", {})
    yield from (tool["name"] for tool in fixture.get("tools", ()))
    policy: dict[str, Any] = fixture.get("policy", {})
    for field in ("allowed", "forbidden", "requires_approval", "required_evidence"):
        yield from policy.get(field, ())
    if "escalation_tool" in policy:
        yield policy["escalation_tool"]
    expected: dict[str, Any] = fixture["expected"]
    yield from expected.get("forbidden_tools", ())
    yield from expected.get("tool_sequence", ())


def _model_names(fixture: Mapping[str, Any]) -> Iterator[str]:
    for turn in fixture.get("model", ()):
        yield from (call["name"] for call in turn.get("tool_calls", ()))
        for block in turn.get("content", ()):
            name = _tool_use_name(block)
            if name is not None:
                yield name


def _tool_use_name(block: object) -> str | None:
    """The name of a full-form turn's `tool_use` block (None for any other block)."""
    if not isinstance(block, dict):
        return None
    fields = cast(dict[str, object], block)
    name = fields.get("name")
    return name if fields.get("type") == "tool_use" and isinstance(name, str) else None


def _turns(turns: Sequence[Mapping[str, Any]], model_name: str, problems: list[str]) -> Iterator[Message]:
    for index, turn in enumerate(turns):
        body = _full(turn, index) if "content" not in turn else _mapped_content(turn)
        try:
            yield parse_message(body, model=model_name)
        except ConfigurationError as exc:
            problems.append(f"model/{index}: {exc}")


def _full(turn: Mapping[str, Any], index: int) -> dict[str, Any]:
    """A shorthand turn as a Messages API response dict."""
    content: list[dict[str, Any]] = []
    if "text" in turn:
        content.append({"type": "text", "text": turn["text"]})
    calls: list[dict[str, Any]] = turn.get("tool_calls", [])
    for position, call in enumerate(calls):
        content.append(
            {
                "type": "tool_use",
                "id": call.get("id", f"toolu_{index}_{position}"),
                "name": api_name(call["name"]),
                "input": call.get("input", {}),
            }
        )
    return {
        "content": content,
        "stop_reason": turn.get("stop_reason", "tool_use" if calls else "end_turn"),
        "usage": {"input_tokens": 0, "output_tokens": 0, **turn.get("usage", {})},
    }


def _mapped_content(turn: Mapping[str, Any]) -> dict[str, Any]:
    content: list[object] = []
    for block in cast(list[object], turn["content"]):
        name = _tool_use_name(block)
        content.append(block if name is None else {**cast(dict[str, object], block), "name": api_name(name)})
    return {**turn, "content": content}


def _tools(fixture: Mapping[str, Any], shown: Mapping[str, str], problems: list[str]) -> tuple[ToolSpec, ...]:
    declared: dict[str, dict[str, Any]] = {}
    for index, tool in enumerate(fixture.get("tools", ())):
        name = api_name(tool["name"])
        if name in declared:
            problems.append(f"tools/{index}: tool {tool['name']!r} is declared twice")
        declared[name] = tool
    # Declaration order, as the model will see the tools: `tools`, then mocks, then the policy.
    order = dict.fromkeys([*declared, *(api_name(name) for name in _registered_names(fixture))])
    specs: list[ToolSpec] = []
    for name in order:
        tool = declared.get(name, {})
        server = mocked_server(fixture.get("mcp_servers", ()), name) or {}
        of = f" of MCP server {server['name']!r}" if server else ""
        specs.append(
            ToolSpec(
                name=name,
                description=tool.get("description", f"(mocked) {shown.get(name, name)}{of}"),
                input_schema=tool.get("input_schema", {"type": "object"}),
                output_schema=tool.get("output_schema"),
                side_effect=tool.get("side_effect", False),
                requires_approval=tool.get("requires_approval", False),
                timeout_s=tool.get("timeout_s", server.get("timeout_s")),
            )
        )
    return tuple(specs)


def _registered_names(fixture: Mapping[str, Any]) -> Iterator[str]:
    """Names that declare a tool: `mocked_tools` and the policy's allowed, approval and evidence
    lists. Forbidden tools are refused by name before the registry is read, so they are not
    offered to the model; the loop adds the escalation tool itself. A name only the model or
    `expected` writes is not a tool of the case."""
    yield from fixture.get("mocked_tools", {})
    policy: dict[str, Any] = fixture.get("policy", {})
    for field in ("allowed", "requires_approval", "required_evidence"):
        yield from policy.get(field, ())


def _budget(raw: Mapping[str, Any], problems: list[str]) -> Budget:
    try:
        return Budget(**raw)
    except (ConfigurationError, TypeError) as exc:
        problems.append(f"budget: {exc}")
        return Budget(**DEFAULT_BUDGET)


def _policy(raw: Mapping[str, Any]) -> dict[str, Any]:
    policy = dict(raw)
    for field in ("allowed", "forbidden", "requires_approval", "required_evidence"):
        if field in policy:
            policy[field] = frozenset(api_name(name) for name in policy[field])
    if "escalation_tool" in policy:
        policy["escalation_tool"] = api_name(policy["escalation_tool"])
    return policy


def _state(raw: object, source: Path | None, problems: list[str]) -> LoopState | None:
    if raw is None:
        return None
    try:
        if isinstance(raw, str):
            path = Path(raw) if source is None else source.parent / raw
            return LoopState.from_json(path.read_text(encoding="utf-8"))
        return LoopState.from_json(json.dumps(raw))
    except (OSError, ValueError) as exc:
        problems.append(f"state: not a saved LoopState ({exc})")
        return None
