"""LoopSpec: every setting of a loop that is data, written once and validated once.

A `LoopSpec` is what a loop contract declares (docs/contracts.md): the model, the prompt, the
tool manifest (no functions), the signal handlers by name, `Budget`, `Policy`'s data and the
rest; `AgentLoop` takes its defaults from here. The wiring (`_core.Wiring`) is passed beside it.

`Budget` and `Policy` stay frozen dataclasses: `Budget(...)` and `Policy(...)` raise
`ConfigurationError` themselves, importing `boundloop.state` loads no pydantic, and code relies
on `dataclasses.replace` of them. The spec validates them by building them, and their schema
is read from their fields (`field_schema`), so each is still written once.

The contract's JSON Schema (boundloop/contract/loop-contract.schema.json) is generated from
`LoopSpec` by `scripts/contract_schema.py`'s `contract_schema()`; `scripts/contract-schema` writes
it, a test keeps the committed file equal to it. The contract document spells four settings
its own way: `system` is `{"text": ...}` (or `{"file": ...}`), `metrics` is `{"enabled": ...}`, and
`Budget.count_tokens` and `Budget.max_tool_output_chars` sit at its top level.
`LoopSpec.from_document` and `LoopSpec.document` map them, and `contract_schema` maps their
schema: those are the only places that know. A loaded `Contract` holds its `LoopSpec`.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Final, Literal, final

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from ._base.cache import CacheMode, CacheSettings, check_cache
from ._base.field_schema import field_schema
from ._base.mcp_spec import MCPServerSpec, unique_servers
from ._base.model_settings import ModelSettings, check_settings
from ._base.route import FallbackModels
from ._base.server_tools import server_tool
from .compaction import Compaction, ContextEdits, ContextManagement, context_settings
from .errors import ConfigurationError
from .policy import Policy, ToolErrors
from .redaction import Redaction
from .state import Budget

__all__ = [
    "CONTRACT_REQUIRED",
    "BudgetSpec",
    "HistoryMessage",
    "LoopSpec",
    "PolicySpec",
    "ServerToolSpec",
    "ToolErrors",
    "ToolSpec",
    "budget_data",
    "default",
    "policy_data",
]

_HANDLER = Annotated[str, Field(pattern="^[A-Za-z_][A-Za-z0-9_]*$", max_length=64)]
"""A signal handler's name: `contract.HANDLER_NAME`."""


def _unique(names: tuple[str, ...]) -> tuple[str, ...]:
    if len(set(names)) != len(names):
        raise ValueError(f"names must be unique, got {list(names)}")
    return names


def _budget(value: object) -> Budget:
    if isinstance(value, Budget):
        return value
    if value is None:
        raise ConfigurationError(
            "a Budget is required: there is no unbounded loop (e.g. budget=Budget(max_steps=8))"
        )
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"budget must be a Budget, got {type(value).__name__}")
    return Budget(**typing.cast(Mapping[str, Any], value))


def _policy(value: object) -> Policy:
    if isinstance(value, Policy):
        return value  # with its hooks, if any: they are named in the provenance, never in the JSON
    if value is None:
        return Policy()
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"policy must be a Policy, got {type(value).__name__}")
    return Policy(**typing.cast(Mapping[str, Any], value))


_CONTRACT_TOP: Final = ("max_tool_output_chars", "count_tokens")
"""`Budget` settings a contract writes at its top level."""
CONTRACT_REQUIRED: Final = ("name", "model", "tools", "signals", "budget", "policy")
"""A contract states these even where the spec has a default."""


def budget_data(budget: Budget) -> dict[str, Any]:
    """The budget as JSON: its limits that are set (`max_tool_output_chars` and `count_tokens`
    only when not their default)."""
    defaults = {field.name: field.default for field in dataclasses.fields(Budget)}
    return {
        key: value
        for key, value in dataclasses.asdict(budget).items()
        if value is not None and (key not in _CONTRACT_TOP or value != defaults[key])
    }


def policy_data(policy: Policy) -> dict[str, Any]:
    """The policy's data as JSON (not its hooks); an empty set of tools is left out."""
    document: dict[str, Any] = {}
    for field in ("allowed", "forbidden", "requires_approval", "required_evidence"):
        names: frozenset[str] | None = getattr(policy, field)
        if names is not None and (names or field == "allowed"):
            document[field] = sorted(names)
    if policy.escalation_tool is not None:
        document["escalation_tool"] = policy.escalation_tool
    if policy.require_approval_for_destructive:
        document["require_approval_for_destructive"] = True
    if policy.on_unknown_tool != "report":
        document["on_unknown_tool"] = policy.on_unknown_tool
    for field in (
        "on_forbidden",
        "on_missing_evidence",
        "on_max_tokens",
        "max_continuations",
        "on_tool_error",
    ):
        document[field] = getattr(policy, field)
    return document


def _model_name(value: object) -> object:
    if not isinstance(value, str) or not value:
        raise ConfigurationError("model must be a non-empty model name, e.g. 'claude-sonnet-4-6'")
    return value


def _count(field: str) -> pydantic.BeforeValidator:
    """A count: an int >= 1 (not a bool, not a float that happens to be whole)."""

    def check(value: object) -> object:
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigurationError(f"{field} must be a positive int, got {value!r}")
        return value

    return pydantic.BeforeValidator(check)


def _output_schema(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """A JSON schema the loop can validate answers with and the API's structured outputs take."""
    if value is not None:
        from ._base.output import OutputCheck

        OutputCheck(value)  # raises ConfigurationError naming what is wrong
    return value


def _server_tool(value: object) -> object:
    if not isinstance(value, Mapping):
        raise ConfigurationError(f"a server tool is a definition (a dict), got {value!r}")
    return server_tool(typing.cast(Mapping[str, object], value))


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


ServerToolSpec = Annotated[
    dict[str, Any],
    pydantic.BeforeValidator(_server_tool),
    pydantic.WithJsonSchema(
        {
            "type": "object",
            "required": ["type", "name"],
            "properties": {
                "type": {"type": "string", "minLength": 1},
                "name": {"type": "string", "minLength": 1},
            },
        }
    ),
]
"""A server tool definition of the SDK (`{"type": "web_search_20250305", ...}`), checked."""


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


_REDACTION: Final = Redaction()
_CONTEXT: Final = ContextManagement()
_EDITS: Final = tuple(_CONTEXT.edits)
"""Where the defaults of `redact_checkpoints`, `compaction` and `context_editing` are written:
the value objects `AgentLoop` takes them in."""


@final
class LoopSpec(BaseModel):
    """Every setting of a loop that is data: the loop contract, typed (docs/contracts.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    name: str = Field(
        default="agent", min_length=1, description="The loop's name: the `loop` label of every metric."
    )
    description: str = ""
    model: Annotated[str, pydantic.BeforeValidator(_model_name)] = Field(min_length=1)
    system: str | None = Field(
        default=None, description="The system prompt: inline text, or a file relative to the contract."
    )
    max_tokens: Annotated[int, _count("max_tokens")] = Field(
        default=4096, ge=1, description="`max_tokens` of every request."
    )
    tools: tuple[ToolSpec, ...] = ()
    server_tools: tuple[ServerToolSpec, ...] = Field(
        default=(),
        description="Server tool definitions of the Messages API (web search, web fetch, code "
        "execution, tool search), sent after the tools: the API runs them.",
    )
    mcp_servers: Annotated[tuple[MCPServerSpec, ...], pydantic.AfterValidator(unique_servers)] = Field(
        default=(),
        description="MCP servers whose tools the loop offers once connected (docs/mcp.md): each "
        "a command (stdio) or a url (streamable HTTP).",
    )
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
    budget: BudgetSpec = Field(description="The run's hard limits: there is no unbounded loop.")
    policy: PolicySpec = Field(
        default_factory=Policy,
        description="The policy inline, or the path of a loop-policy.json file relative to the contract.",
    )
    metrics: bool = True
    history: tuple[HistoryMessage, ...] = Field(
        default=(), description="Messages API messages every run starts from, before its goal."
    )
    redact_checkpoints: bool = Field(
        default=_REDACTION.checkpoints,
        strict=True,
        description="Checkpoints store every string redacted: the transcript, observations and "
        "pending approvals too (a resumed run continues from them).",
    )
    settings: ModelSettings = Field(
        default_factory=ModelSettings,
        description="Request settings of the Messages API sent with every model call "
        "(thinking, stop_sequences, tool_choice, ...): docs/claude-api.md.",
    )
    cache: CacheMode | CacheSettings = Field(
        default="auto",
        description="Prompt caching: 'auto' places cache breakpoints so that each request reads "
        "the one before from the cache; 'off' sends none; or CacheSettings (docs/cost.md).",
    )

    @pydantic.model_validator(mode="after")
    def _settings_rules(self) -> LoopSpec:
        check_settings(
            self.settings.data(), max_tokens=self.max_tokens, tools=[tool.name for tool in self.tools]
        )
        context_settings(
            self.settings.data(), compaction=self.compaction, context_editing=self.context_editing
        )
        check_cache(self.cache, self.settings.data())
        return self

    output_schema: Annotated[dict[str, Any] | None, pydantic.AfterValidator(_output_schema)] = Field(
        default=None,
        description="Structured output: the JSON schema the final answer must match "
        "(sent as output_config.format; an answer that does not match stops invalid_output).",
    )

    fallback_model: FallbackModels = Field(
        default=None,
        description="The model route: a refused request (stop_reason refusal) is retried on this model, "
        "or on each of these models in order, once each, with the refusal's fallback_credit_token when "
        "the API gives one, before the run stops refused.",
    )
    version: str | None = Field(
        default=None,
        min_length=1,
        description="The loop's version (prompt, tools, policy and model route as released): recorded "
        "in each run's provenance, on its run_started event and on its spans.",
    )
    compaction: Compaction | None = Field(
        default=_CONTEXT.compaction, description="Server-side compaction (docs/cost.md)."
    )
    context_editing: ContextEdits = Field(
        default=_EDITS, description="The API's clearing edits (docs/cost.md)."
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
    def from_document(cls, document: Mapping[str, Any]) -> LoopSpec:
        """The spec a contract document declares, self-contained (its policy inline, its system
        prompt as `{"text": ...}`): `LoopSpec.from_document(spec.document()) == spec`.

        Raises:
            ConfigurationError: the first setting the loop cannot run with, named.
        """
        own = ("$schema", "system", "metrics", *_CONTRACT_TOP)
        settings = {key: value for key, value in document.items() if key not in own}
        system = document.get("system")
        if system is not None:
            settings["system"] = system["text"]
        if "metrics" in document:
            settings["metrics"] = document["metrics"].get("enabled", True)
        top = {key: document[key] for key in _CONTRACT_TOP if key in document}
        if top:
            settings["budget"] = {**document.get("budget", {}), **top}
        return cls.of(**settings)

    def document(self) -> dict[str, Any]:
        """The contract document of this spec: the settings not at their default (and those every
        contract states), the policy and the system prompt inline."""
        data = self.model_dump(mode="json", exclude_defaults=True)
        stated = self.model_dump(mode="json", include=set(CONTRACT_REQUIRED))
        document = {
            name: data[name] if name in data else stated[name]
            for name in type(self).model_fields
            if name in data or name in CONTRACT_REQUIRED
        }
        budget: dict[str, Any] = document["budget"]
        document.update({key: budget.pop(key) for key in _CONTRACT_TOP if key in budget})
        if "system" in document:
            document["system"] = {"text": document["system"]}
        document["metrics"] = {"enabled": self.metrics}
        return document


def _configuration_error(exc: pydantic.ValidationError) -> ConfigurationError:
    """The `ConfigurationError` a setting raised itself (`Budget`, `Policy`), else one naming
    the first wrong field."""
    error = exc.errors()[0]
    cause = error.get("ctx", {}).get("error")
    if isinstance(cause, ConfigurationError):
        return cause
    where = ".".join(str(part) for part in error["loc"])
    return ConfigurationError(f"{where}: {error['msg']}, got {error['input']!r}")


def default(field: str) -> Any:
    """The default of `LoopSpec.<field>`, where `AgentLoop`'s keyword defaults are read from."""
    return LoopSpec.model_fields[field].get_default(call_default_factory=True)
