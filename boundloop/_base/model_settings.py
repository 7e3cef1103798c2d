"""ModelSettings: every request setting of the Messages API that is not the loop's own.

The loop builds `model`, `messages`, `system`, `tools`, `max_tokens` (clamped to the budget)
itself and never streams; everything else `messages.create` and `beta.messages.create` take is
a field here, typed with the SDK's own param types, or listed in `EXCLUDED` with the reason
(tests/test_model_settings.py derives the list from the installed SDK's signatures). A field
left None is not sent.

`check_settings` holds the combinations the API documents as invalid; the loop checks them
once, at construction (and a run's override as the run starts), and raises
`ConfigurationError` naming the rule.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Annotated, Any, Final, Literal, cast, final

import pydantic
from anthropic.types import (
    CacheControlEphemeralParam,
    MetadataParam,
    OutputConfigParam,
    ThinkingConfigParam,
    ToolChoiceParam,
)
from anthropic.types.anthropic_beta_param import AnthropicBetaParam
from anthropic.types.beta import (
    BetaBillingPolicyParam,
    BetaContextManagementConfigParam,
    BetaFallbackParam,
    BetaRequestMCPServerURLDefinitionParam,
)
from anthropic.types.message_create_params_container_param import MessageCreateParamsContainerParam
from pydantic import BaseModel, ConfigDict, Field

from .._lazy import claim
from ..errors import ConfigurationError

LOOP_OWN: Final = frozenset({"self", "model", "messages", "system", "tools", "max_tokens", "stream"})
"""The parameters of `messages.create` the loop sets itself."""

EXCLUDED: Final[Mapping[str, str]] = {
    "thread": "the loop sends the whole transcript with every request; a server-held thread "
    "would make the API hold a second copy of the conversation",
    "compaction": "makes the request a compaction request (its answer is only a summary), "
    "not a setting of every turn",
    "fallback_credit_token": "per request: the token of the refusal just answered, sent by the "
    "loop when it retries a refusal on `fallback_model`",
    "diagnostics": "per request: names the previous response's id",
    "timeout": "the HTTP client's setting, not the model's: AsyncAnthropic(timeout=...) or "
    "client.with_options(timeout=...); the run's own clock is Budget.timeout_s",
}
"""Parameters of `messages.create` / `beta.messages.create` that are not settings, and why."""

BETA_ONLY: Final = frozenset({"context_management", "mcp_servers", "fallbacks", "billing_policy", "betas"})
"""Settings only `beta.messages.create` takes: any of them sends the request through it."""

FORCED_TOOL_CHOICES: Final = frozenset({"any", "tool"})
MIN_THINKING_BUDGET: Final = 1024
"""The smallest `thinking.budget_tokens` the API accepts."""


def _materialized(value: object) -> object:
    """The value with every lazily validated iterable (pydantic's for the SDK's `Iterable[...]`
    params) read into a list, which also validates its items now."""
    if isinstance(value, Mapping):
        items = cast(Mapping[str, object], value)
        return {key: _materialized(item) for key, item in items.items()}
    if isinstance(value, str | bytes):
        return value
    if isinstance(value, Iterator | list | tuple):
        try:
            return [_materialized(item) for item in cast(Iterable[object], value)]
        except pydantic.ValidationError as exc:
            raise ValueError(str(exc)) from None
    return value


_Plain = pydantic.AfterValidator(_materialized)
_AsIs = pydantic.PlainSerializer(lambda value: value)  # already plain JSON
"""The SDK's params are TypedDicts and lists: validated, they are plain JSON already."""


with warnings.catch_warnings():
    # `BetaFallbackParam` allows extra keys: pydantic says `extra="forbid"` does not reach it.
    warnings.filterwarnings("ignore", message=".*allows extra items.*")

    @final
    class ModelSettings(BaseModel):
        """Request settings of the Messages API, sent with every model call of a run.

        Every field is the SDK's own param type; None (the default) is not sent. Settings
        only the beta API takes (`context_management`, `mcp_servers`, `fallbacks`,
        `billing_policy`, `betas`) send the request through `client.beta.messages.create`.
        The SDK has no `temperature`, `top_p` or `top_k`: for a model that still takes them,
        `extra_body={"temperature": 0.2}`. docs/claude-api.md describes each setting.
        """

        model_config = ConfigDict(frozen=True, extra="forbid", title="model_settings")

        thinking: Annotated[ThinkingConfigParam | None, _Plain, _AsIs] = None
        stop_sequences: Sequence[str] | None = None
        tool_choice: Annotated[ToolChoiceParam | None, _Plain, _AsIs] = None
        metadata: Annotated[MetadataParam | None, _Plain, _AsIs] = None
        service_tier: Literal["auto", "standard_only"] | None = None
        speed: Literal["standard", "fast"] | None = None
        inference_geo: str | None = None
        output_config: Annotated[OutputConfigParam | None, _Plain, _AsIs] = None
        cache_control: Annotated[CacheControlEphemeralParam | None, _Plain, _AsIs] = None
        container: Annotated[MessageCreateParamsContainerParam | None, _Plain, _AsIs] = None
        user_profile_id: str | None = None
        workspace_id: str | None = None
        context_management: Annotated[BetaContextManagementConfigParam | None, _Plain, _AsIs] = None
        mcp_servers: Annotated[Sequence[BetaRequestMCPServerURLDefinitionParam] | None, _Plain, _AsIs] = None
        fallbacks: Annotated[Literal["default"] | Sequence[BetaFallbackParam] | None, _Plain, _AsIs] = None
        """`BetaFallbacksParam`, spelled so that "default" is not read as a list of letters."""
        billing_policy: Annotated[BetaBillingPolicyParam | None, _Plain, _AsIs] = None
        betas: Sequence[AnthropicBetaParam] | None = None
        extra_headers: Mapping[str, str] | None = None
        extra_query: Mapping[str, object] | None = None
        extra_body: Mapping[str, object] | None = Field(
            default=None,
            description="Keys merged into the request's JSON body, e.g. temperature/top_p/top_k.",
        )

        @pydantic.field_validator("stop_sequences", "betas", mode="before")
        @classmethod
        def _not_a_string(cls, value: object) -> object:
            if isinstance(value, str):
                raise ValueError("a list of strings, not one string")
            return value

        def data(self) -> dict[str, Any]:
            """The settings that are set, as JSON."""
            return self.model_dump(mode="json", exclude_none=True)


def settings_sha256(data: Mapping[str, Any]) -> str | None:
    """The hash of settings as canonical JSON (sorted keys); None when none are set."""
    if not data:
        return None
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def merged(base: ModelSettings, override: ModelSettings | None) -> ModelSettings:
    """A run's settings: the fields `override` was given replace the loop's (None removes one)."""
    if override is None:
        return base
    data = base.data()
    for field in override.model_fields_set:
        value = getattr(override, field)
        if value is None:
            data.pop(field, None)
        else:
            data[field] = override.model_dump(mode="json", include={field})[field]
    return ModelSettings.model_validate(data)


def check_settings(settings: Mapping[str, Any], *, max_tokens: int, tools: Iterable[str]) -> None:
    """The combinations of settings the API documents as invalid.

    Raises:
        ConfigurationError: the first rule broken, named.
    """
    thinking: Mapping[str, Any] = settings.get("thinking") or {}
    choice: Mapping[str, Any] = settings.get("tool_choice") or {}
    extra: Mapping[str, Any] = settings.get("extra_body") or {}
    if thinking.get("type") == "enabled":
        _check_thinking(int(thinking["budget_tokens"]), max_tokens, choice, extra)
    for sequence in settings.get("stop_sequences") or ():
        if not sequence.strip():
            _broken(f"stop_sequences must not hold an empty or blank string, got {sequence!r}")
    names = set(tools)
    if choice and not names:
        _broken(f"tool_choice {choice.get('type')!r} needs tools: the loop has none")
    if choice.get("type") == "tool" and choice.get("name") not in names:
        _broken(f"tool_choice names tool {choice.get('name')!r}, which the loop does not have")
    overlap = sorted(set(extra) & (set(ModelSettings.model_fields) | LOOP_OWN))
    if overlap:
        _broken(f"extra_body must not set {overlap}: they are settings or the loop's own")


def _check_thinking(
    budget: int, max_tokens: int, choice: Mapping[str, Any], extra: Mapping[str, Any]
) -> None:
    """The rules of manual extended thinking (`thinking={"type": "enabled", ...}`)."""
    if budget < MIN_THINKING_BUDGET:
        _broken(f"thinking.budget_tokens must be at least {MIN_THINKING_BUDGET}, got {budget}")
    if max_tokens <= budget:
        _broken(
            f"max_tokens must be greater than thinking.budget_tokens: max_tokens={max_tokens}, "
            f"budget_tokens={budget} (thinking tokens count toward max_tokens)"
        )
    if choice.get("type") in FORCED_TOOL_CHOICES:
        _broken(
            f"tool_choice {choice['type']!r} forces tool use, which extended thinking does not "
            "allow: use tool_choice 'auto' or 'none', or turn thinking off"
        )
    for sampling in ("temperature", "top_k"):
        if sampling in extra:
            _broken(f"{sampling} cannot be changed with extended thinking (extra_body[{sampling!r}])")
    top_p = extra.get("top_p")
    if isinstance(top_p, int | float) and not 0.95 <= top_p <= 1:
        _broken(f"top_p must be between 0.95 and 1 with extended thinking, got {top_p}")


def _broken(rule: str) -> None:
    raise ConfigurationError(f"model settings: {rule}")


claim("boundloop", ModelSettings)  # reported at its public home
