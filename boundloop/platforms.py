"""Where Claude runs: the platform a client calls, and what each platform offers.

The anthropic SDK ships one client per platform (`AsyncAnthropic`, `AsyncAnthropicBedrock`,
`AsyncAnthropicBedrockMantle`, `AsyncAnthropicVertex`, `AsyncAnthropicFoundry`,
`AsyncAnthropicAWS`, `AsyncAnthropicGoogleCloud`); `platform_of(client)` names the platform from
the client's class. `FEATURES` is the one table of what differs between them that a loop's
requests depend on, each row with its sources:

- `automatic_cache`: the top-level `cache_control` (automatic prompt caching). Where it is
  missing, `cache="auto"` marks the request's last block instead (the block the automatic
  breakpoint would mark), and a `ModelSettings(cache_control=...)` is refused at construction.
- `count_tokens`: `messages.count_tokens`, which `Budget(count_tokens=True)` calls before each
  request; refused at construction where the platform has none.
- `refused`: request settings the platform does not take (the MCP connector), refused at
  construction.
- `provider_name`: the OpenTelemetry GenAI conventions' `gen_ai.provider.name`.
- `prices`: the genai-prices provider whose entries price the platform's model ids
  (`boundloop.prices.resolve_price`).

A setting a platform lacks is replaced by what it offers or refused when the loop is built,
never sent to come back as a 400 in the middle of a run. A fact not found in the platform's own
documentation is taken as missing: the loop fails closed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Final, Literal, final

__all__ = [
    "FEATURES",
    "Platform",
    "PlatformFeatures",
    "platform_named",
    "platform_of",
    "vertex_region",
]

Platform = Literal["anthropic", "aws", "bedrock", "bedrock_mantle", "foundry", "google_cloud", "vertex"]
"""A platform Claude runs on: the first-party API, Claude Platform on AWS, Amazon Bedrock (its
InvokeModel endpoint, `bedrock-runtime`), Amazon Bedrock's Messages API endpoint
(`bedrock-mantle`), Microsoft Foundry, Claude Platform on Google Cloud, Google Vertex AI."""


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class PlatformFeatures:
    """What one platform offers that a loop's requests depend on."""

    title: str
    """The platform's name, for messages and docs."""
    client: str
    """The anthropic SDK's async client for it."""
    provider_name: str
    """`gen_ai.provider.name`, as the OpenTelemetry GenAI conventions name the provider."""
    prices: str
    """The genai-prices provider id whose entries price the platform's model ids."""
    automatic_cache: bool
    """The top-level `cache_control` (automatic prompt caching) is accepted."""
    count_tokens: bool
    """`messages.count_tokens` is served."""
    refused: Mapping[str, str] = dataclasses.field(default_factory=dict[str, str])
    """Request settings the platform does not take -> the feature they are."""
    sources: tuple[str, ...] = ()
    """Where each fact of the row is documented."""


_CACHING: Final = "https://platform.claude.com/docs/en/build-with-claude/prompt-caching"
_SEMCONV: Final = "https://opentelemetry.io/docs/specs/semconv/registry/attributes/gen-ai/"
_MCP_CONNECTOR: Final = {"mcp_servers": "the MCP connector"}

FEATURES: Final[Mapping[Platform, PlatformFeatures]] = {
    "anthropic": PlatformFeatures(
        title="the Claude API",
        client="AsyncAnthropic",
        provider_name="anthropic",
        prices="anthropic",
        automatic_cache=True,
        count_tokens=True,
        sources=(_CACHING, "https://platform.claude.com/docs/en/build-with-claude/token-counting", _SEMCONV),
    ),
    "aws": PlatformFeatures(
        title="Claude Platform on AWS",
        client="AsyncAnthropicAWS",
        # Anthropic serves it (the SDK's client reports "anthropic" too); billed through AWS.
        provider_name="anthropic",
        prices="anthropic",
        automatic_cache=True,
        count_tokens=True,
        sources=("https://platform.claude.com/docs/en/build-with-claude/claude-platform-on-aws", _CACHING),
    ),
    "google_cloud": PlatformFeatures(
        title="Claude Platform on Google Cloud",
        client="AsyncAnthropicGoogleCloud",
        provider_name="anthropic",
        prices="anthropic",
        automatic_cache=True,
        count_tokens=True,
        # The SDK's README for it: "the full Anthropic API ... served through Google Cloud".
        sources=("anthropic/lib/google_cloud/README.md (the anthropic SDK)", _CACHING),
    ),
    "foundry": PlatformFeatures(
        title="Microsoft Foundry",
        client="AsyncAnthropicFoundry",
        # Claude in Foundry runs on Anthropic's infrastructure, billed through Azure Marketplace.
        provider_name="anthropic",
        prices="azure",
        automatic_cache=True,
        # Not among the features the Foundry guide lists: taken as missing (fail closed).
        count_tokens=False,
        sources=(
            "https://platform.claude.com/docs/en/build-with-claude/claude-in-microsoft-foundry",
            _CACHING,
        ),
    ),
    "bedrock": PlatformFeatures(
        title="Amazon Bedrock (InvokeModel)",
        client="AsyncAnthropicBedrock",
        provider_name="aws.bedrock",
        prices="aws",
        automatic_cache=False,
        # The SDK refuses it before sending: "Token counting is not supported in Bedrock yet".
        count_tokens=False,
        refused=_MCP_CONNECTOR,
        sources=(
            "https://platform.claude.com/docs/en/build-with-claude/claude-on-amazon-bedrock-legacy",
            "https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html",
            "https://docs.aws.amazon.com/bedrock/latest/userguide/count-tokens.html",
            _SEMCONV,
        ),
    ),
    "bedrock_mantle": PlatformFeatures(
        title="Amazon Bedrock (Messages API, bedrock-mantle)",
        client="AsyncAnthropicBedrockMantle",
        provider_name="aws.bedrock",
        prices="aws",
        automatic_cache=False,
        # AWS: count Claude's tokens with Anthropic's count_tokens on the bedrock-mantle endpoint.
        count_tokens=True,
        refused=_MCP_CONNECTOR,
        sources=(
            "https://docs.aws.amazon.com/bedrock/latest/userguide/inference-messages-api.html",
            "https://docs.aws.amazon.com/bedrock/latest/userguide/count-tokens.html",
            "https://docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html",
            _SEMCONV,
        ),
    ),
    "vertex": PlatformFeatures(
        title="Google Vertex AI",
        client="AsyncAnthropicVertex",
        provider_name="gcp.vertex_ai",
        prices="google",
        automatic_cache=False,
        # Vertex serves count-tokens:rawPredict for Claude.
        count_tokens=True,
        refused=_MCP_CONNECTOR,
        sources=(
            "https://docs.cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/prompt-caching",
            "https://docs.cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/count-tokens",
            _SEMCONV,
        ),
    ),
}
"""Each platform's features, by platform."""

_CLIENTS: Final[tuple[tuple[str, Platform], ...]] = (
    # Subclasses of AsyncAnthropic first: they are AsyncAnthropic instances too.
    ("AnthropicFoundry", "foundry"),
    ("AnthropicAWS", "aws"),
    ("AnthropicGoogleCloud", "google_cloud"),
    ("AnthropicBedrockMantle", "bedrock_mantle"),
    ("AnthropicBedrock", "bedrock"),
    ("AnthropicVertex", "vertex"),
)
"""The SDK's client class name (without `Async`) -> its platform, in the order they are tried."""


def platform_of(client: object) -> Platform:
    """The platform `client` calls: by its class, one of the anthropic SDK's platform clients
    (sync or async); anything else (`AsyncAnthropic`, `ScriptedClient`, a wrapper) is
    `"anthropic"`, unless it says otherwise with a `platform` attribute naming one."""
    import anthropic  # a client exists: the SDK is loaded already

    for name, platform in _CLIENTS:
        classes = tuple(getattr(anthropic, prefix + name) for prefix in ("Async", ""))
        if isinstance(client, classes):
            return platform
    return platform_named(getattr(client, "platform", None)) or "anthropic"


def vertex_region(client: object) -> str | None:
    """The region a Vertex AI client calls (`AsyncAnthropicVertex(region=...)`): `"global"` or
    a regional endpoint, whose tokens cost more on the newer models (`boundloop.prices`); None
    for any other client."""
    if platform_of(client) != "vertex":
        return None
    region: object = getattr(client, "region", None)
    return region if isinstance(region, str) else None


def platform_named(name: object) -> Platform | None:
    """The platform `name` names (a recorded `Provenance.platform`), or None."""
    for platform in FEATURES:
        if platform == name:
            return platform
    return None
