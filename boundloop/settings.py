"""LoopSpec: every setting of a loop that is data, written once and validated once.

A `LoopSpec` is what a loop contract declares (docs/contracts.md): the model, the system
prompt, the tool manifest (the declarations, not the functions), the stop-signal handlers by
name, the `Budget`, the `Policy`'s data and the loop's other settings. The code-only wiring
(the client, the tool functions, the store, metrics, tracing, hooks) is passed beside it.

`Budget` and `Policy` stay frozen dataclasses: `Budget(...)` and `Policy(...)` raise
`ConfigurationError` themselves, importing `boundloop.state` loads no pydantic, and code relies
on `dataclasses.replace` of them. The spec validates them by building them, and their schema
is read from their fields (`field_schema`), so each is still written once.

The contract's JSON Schema (boundloop/contract/loop-contract.schema.json) is generated from
`LoopSpec` by `contract_schema()`; `scripts/contract_schema.py` writes it, a test keeps the
committed file equal to it. The contract document spells three settings its own way:
`system` is `{"text": ...}` (or `{"file": ...}`), `metrics` is `{"enabled": ...}`, and
`on_tool_error` sits in the policy. `from_contract` and `to_contract` map them, and
`contract_schema` maps their schema: those are the only places that know.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, final, get_args, get_origin

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from .errors import ConfigurationError
from .policy import Policy
from .state import Budget

if TYPE_CHECKING:
    from .contract import Contract

ToolErrors: TypeAlias = Literal["report", "raise", "stop"]
"""What a failing tool does: report it to the model, raise it from `run()`, or stop the run."""

_TOOL_NAME: dict[str, Any] = {"type": "string", "minLength": 1}
_HANDLER = Annotated[str, Field(pattern="^[A-Za-z_][A-Za-z0-9_]*$", max_length=64)]
"""A signal handler's name: `contract.HANDLER_NAME`."""


def _unique(names: tuple[str, ...]) -> tuple[str, ...]:
    if len(set(names)) != len(names):
        raise ValueError(f"names must be unique, got {list(names)}")
    return names


_HOOKS = ("success", "approve")
"""`Policy`'s fields that are code, not data."""


def field_schema(
    cls: type[Budget] | type[Policy], tool_name: Mapping[str, Any] = _TOOL_NAME
) -> dict[str, Any]:
    """The JSON Schema of a settings dataclass, from its fields' types: a count is an integer
    >= 1, a time or an amount a number > 0 (>= 0 with `metadata={"zero": True}`), a choice an
    enum, a set of tools an array of unique `tool_name`s. `Policy`'s hooks are left out."""
    hints = typing.get_type_hints(cls)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in dataclasses.fields(cls):
        if field.name in _HOOKS:
            continue
        if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
            required.append(field.name)
        kind = hints[field.name]
        if isinstance(kind, types.UnionType):  # `X | None`: None is the default, never written
            kind = next(option for option in get_args(kind) if option is not type(None))
        zero = bool(field.metadata.get("zero"))
        if get_origin(kind) is Literal:
            properties[field.name] = {"enum": list(get_args(kind))}
        elif kind is int:
            properties[field.name] = {"type": "integer", "minimum": 0 if zero else 1}
        elif kind is float:
            bound = {"minimum": 0} if zero else {"exclusiveMinimum": 0}
            properties[field.name] = {"type": "number", **bound}
        elif get_origin(kind) is frozenset:
            names = {"type": "array", "items": dict(tool_name), "uniqueItems": True}
            properties[field.name] = names
        else:  # a tool's name
            properties[field.name] = dict(tool_name)
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False}
    if required:
        schema["required"] = required
    schema["properties"] = properties
    return schema


def _budget(value: object) -> Budget:
    if isinstance(value, Budget):
        return value
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"budget must be a Budget, got {type(value).__name__}")
    return Budget(**typing.cast(Mapping[str, Any], value))


def _policy(value: object) -> Policy:
    if isinstance(value, Policy):
        return value
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"policy must be a Policy, got {type(value).__name__}")
    return Policy(**typing.cast(Mapping[str, Any], value))


def budget_data(budget: Budget) -> dict[str, Any]:
    """The budget as JSON: its limits that are set."""
    return {key: value for key, value in dataclasses.asdict(budget).items() if value is not None}


def policy_data(policy: Policy) -> dict[str, Any]:
    """The policy's data as JSON (not its hooks); an empty set of tools is left out."""
    document: dict[str, Any] = {}
    for field in ("allowed", "forbidden", "requires_approval", "required_evidence"):
        names: frozenset[str] | None = getattr(policy, field)
        if names is not None and (names or field == "allowed"):
            document[field] = sorted(names)
    if policy.escalation_tool is not None:
        document["escalation_tool"] = policy.escalation_tool
    for field in ("on_forbidden", "on_missing_evidence", "on_max_tokens", "max_continuations"):
        document[field] = getattr(policy, field)
    return document


BudgetSpec = Annotated[
    Budget,
    pydantic.PlainValidator(_budget),
    pydantic.PlainSerializer(budget_data),
    pydantic.WithJsonSchema(field_schema(Budget)),
]
PolicySpec = Annotated[
    Policy,
    pydantic.PlainValidator(_policy),
    pydantic.PlainSerializer(policy_data),
    pydantic.WithJsonSchema(field_schema(Policy)),
]


@final
class ToolSpec(BaseModel):
    """A tool as declared: what the model and the policy see of it, not its function."""

    model_config = ConfigDict(frozen=True, extra="forbid", title="tool")

    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None = None
    side_effect: bool = False
    requires_approval: bool = False
    timeout_s: float | None = Field(default=None, gt=0)


@final
class HistoryMessage(BaseModel):
    """A Messages API message every run starts from."""

    model_config = ConfigDict(frozen=True, extra="forbid", title="message")

    role: Literal["user", "assistant"]
    content: str | list[dict[str, Any]]


@final
class LoopSpec(BaseModel):
    """Every setting of a loop that is data: the loop contract, typed (docs/contracts.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    name: str = Field(
        default="agent", min_length=1, description="The loop's name: the `loop` label of every metric."
    )
    description: str = ""
    model: str = Field(min_length=1)
    system: str | None = Field(
        default=None, description="The system prompt: inline text, or a file relative to the contract."
    )
    max_tokens: int = Field(default=4096, ge=1)
    tools: tuple[ToolSpec, ...] = ()
    signals: dict[Annotated[str, Field(pattern="^[a-z][a-z0-9_]*$")], _HANDLER] = Field(
        default_factory=dict[str, str],
        description="API stop_reason -> handler name "
        "(built-in, `unhandled_stop`, or one of custom_handlers).",
    )
    custom_handlers: Annotated[tuple[_HANDLER, ...], pydantic.AfterValidator(_unique)] = Field(
        default=(),
        json_schema_extra={"uniqueItems": True},
        description="Names of signal handlers the code supplies "
        "(AgentLoop.from_contract(signal_handlers=...)).",
    )
    budget: BudgetSpec
    policy: PolicySpec = Field(
        default_factory=Policy,
        description="The policy inline, or the path of a loop-policy.json file relative to the contract.",
    )
    on_tool_error: ToolErrors = "report"
    metrics: bool = True
    max_tool_output_chars: int = Field(default=100_000, ge=1)
    history: tuple[HistoryMessage, ...] = Field(
        default=(), description="Messages API messages every run starts from, before its goal."
    )

    @classmethod
    def of(cls, **settings: Any) -> LoopSpec:
        """Validate settings once.

        Raises:
            ConfigurationError: the first setting the loop cannot run with, named.
        """
        try:
            return cls.model_validate(settings)
        except pydantic.ValidationError as exc:
            raise _configuration_error(exc) from None

    @classmethod
    def from_contract(cls, contract: Contract) -> LoopSpec:
        """The spec a loaded contract declares (its files already read)."""
        policy = dict(contract.policy)
        on_tool_error = policy.pop("on_tool_error", "report")
        settings: dict[str, Any] = {
            "name": contract.name,
            "description": contract.description,
            "model": contract.model,
            "system": contract.system,
            "tools": [dataclasses.asdict(tool) for tool in contract.tools],
            "signals": dict(contract.signals),
            "custom_handlers": contract.custom_handlers,
            "budget": dict(contract.budget),
            "policy": policy,
            "on_tool_error": on_tool_error,
            "metrics": contract.metrics,
            "history": [dict(message) for message in contract.history],
        }
        if contract.max_tokens is not None:
            settings["max_tokens"] = contract.max_tokens
        if contract.max_tool_output_chars is not None:
            settings["max_tool_output_chars"] = contract.max_tool_output_chars
        return cls.of(**settings)

    def to_contract(self) -> Contract:
        """The contract of this spec: `LoopSpec.from_contract(spec.to_contract()) == spec`."""
        from .contract import Contract, ContractTool  # the contract's module loads the SDK's types

        return Contract(
            name=self.name,
            description=self.description,
            model=self.model,
            system=self.system,
            max_tokens=self.max_tokens,
            tools=tuple(ContractTool(**tool.model_dump()) for tool in self.tools),
            signals=dict(self.signals),
            custom_handlers=self.custom_handlers,
            budget=budget_data(self.budget),
            policy={**policy_data(self.policy), "on_tool_error": self.on_tool_error},
            metrics=self.metrics,
            max_tool_output_chars=self.max_tool_output_chars,
            history=tuple(typing.cast(Any, message.model_dump()) for message in self.history),
        )


def _configuration_error(exc: pydantic.ValidationError) -> ConfigurationError:
    """The `ConfigurationError` a setting raised itself (`Budget`, `Policy`), else one naming
    the first wrong field."""
    error = exc.errors()[0]
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, ConfigurationError):
        return cause
    where = ".".join(str(part) for part in error["loc"])
    return ConfigurationError(f"{where}: {error['msg']}, got {error['input']!r}")


SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
_CONTRACT_REQUIRED = ["name", "model", "tools", "signals", "budget", "policy"]
"""A contract states these even where the spec has a default."""


def contract_schema() -> dict[str, Any]:
    """The loop contract's JSON Schema, generated from `LoopSpec`: the committed
    loop-contract.schema.json (`scripts/contract_schema.py` writes it)."""
    generated = _plain(LoopSpec.model_json_schema(ref_template="#/$defs/{model}"))
    models = generated["$defs"]
    properties: dict[str, Any] = generated["properties"]
    for model in models.values():
        del model["description"]  # a model's docstring is for Python readers
    tool = models["ToolSpec"]
    tool["properties"]["name"] = {"$ref": "#/$defs/tool_name"}
    properties["tools"]["items"] = {"$ref": "#/$defs/tool"}
    message = models["HistoryMessage"]
    message["properties"]["content"] = {"oneOf": message["properties"]["content"].pop("anyOf")}
    properties["history"]["items"] = message
    # The contract document's own spellings of three settings (see the module's docstring).
    properties["system"] = {
        "description": properties["system"]["description"],
        "type": "object",
        "additionalProperties": False,
        "minProperties": 1,
        "maxProperties": 1,
        "properties": {"text": {"type": "string"}, "file": {"type": "string", "minLength": 1}},
    }
    policy = policy_schema()
    policy["properties"]["on_tool_error"] = properties.pop("on_tool_error")
    properties["policy"] = {
        "description": properties["policy"]["description"],
        "oneOf": [{"type": "string", "minLength": 1}, {"$ref": "#/$defs/policy"}],
    }
    properties["metrics"] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"enabled": properties["metrics"]},
    }
    del policy["$schema"], policy["$id"], policy["$defs"]
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": "https://boundloop.dev/schemas/loop-contract.json",
        "title": "boundloop loop contract",
        "description": "A loop declared as data: model, system prompt, tools, the stop_reason -> "
        "handler map, budget, policy and metrics. See docs/contracts.md.",
        "type": "object",
        "additionalProperties": False,
        "required": _CONTRACT_REQUIRED,
        "properties": {"$schema": {"type": "string"}, **properties},
        "$defs": {"tool_name": _TOOL_NAME, "tool": tool, "policy": policy},
    }


def policy_schema() -> dict[str, Any]:
    """The loop policy's JSON Schema, from `Policy`'s data fields and `on_tool_error`: the
    committed loop-policy.schema.json, and the contract schema's `$defs/policy`."""
    fields = field_schema(Policy, {"$ref": "#/$defs/tool_name"})
    on_tool_error = _plain(LoopSpec.model_json_schema())["properties"]["on_tool_error"]
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": "https://boundloop.dev/schemas/loop-policy.json",
        "title": "boundloop loop policy",
        "description": "What the model may do, what needs a human, what counts as done, and what a "
        "failing tool does. See docs/contracts.md.",
        "type": "object",
        "additionalProperties": False,
        "properties": {"$schema": {"type": "string"}, **fields["properties"], "on_tool_error": on_tool_error},
        "$defs": {"tool_name": _TOOL_NAME},
    }


def _plain(node: object) -> Any:
    """pydantic's schema as the contract's: no titles or defaults, an
    optional field as its type (a contract leaves it out rather than null), an enum alone."""
    if isinstance(node, list):
        return [_plain(item) for item in node]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if not isinstance(node, dict):
        return node
    items = typing.cast(dict[str, Any], node)
    options = items.get("anyOf")
    if isinstance(options, list):
        kept: list[Any] = [option for option in options if option != {"type": "null"}]  # pyright: ignore[reportUnknownVariableType]
        if len(kept) == 1:
            rest = {key: value for key, value in items.items() if key != "anyOf"}
            return _plain({**rest, **kept[0]})
    plain = {
        key: _plain(value)
        for key, value in items.items()
        if key not in ("title", "default") and not (key == "additionalProperties" and value is True)
    }
    patterns = plain.pop("patternProperties", None)
    if isinstance(patterns, dict):  # a constrained key: every key matches its pattern
        [(pattern, value)] = typing.cast(dict[str, Any], patterns).items()
        plain["propertyNames"] = {"pattern": pattern}
        plain["additionalProperties"] = value
    if "enum" in plain or "const" in plain:
        plain.pop("type", None)
    return plain


def schema_files() -> dict[str, str]:
    """The committed schema files' text, generated: file name (in boundloop/contract/) -> JSON."""
    return {
        "loop-contract.schema.json": json.dumps(contract_schema(), indent=2) + "\n",
        "loop-policy.schema.json": json.dumps(policy_schema(), indent=2) + "\n",
    }


def write_schema_files() -> None:
    """Write the schema files (scripts/contract-schema runs this after a change to the spec)."""
    folder = Path(__file__).parent / "contract"
    for name, text in schema_files().items():
        (folder / name).write_text(text, encoding="utf-8")
