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
never sent to come back as a 400 in the middle of a run. Each fact names its source
(`PlatformFeatures.sources`); one no documentation of the platform confirms is listed in
`PlatformFeatures.unverified`.
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
    sources: Mapping[str, str] = dataclasses.field(default_factory=dict[str, str])
    """Each fact of the row (`automatic_cache`, `count_tokens`, `refused`, `provider_name`,
    `prices`) -> where it is documented, and what the page says."""
    unverified: frozenset[str] = frozenset()
    """The facts of the row no documentation of the platform confirms: taken from its SDK client,
    or from an older revision of a page; each fails closed where it can."""


_DOCS: Final = "https://platform.claude.com/docs/en/build-with-claude/"

# Each source the table cites, named once.
_CACHING: Final = (
    f'{_DOCS}prompt-caching ("Automatic caching is available on every platform except the legacy '
    "Amazon Bedrock (Opus 4.6 and earlier) integration\"; Vertex AI's Claude prompt caching page "
    "defers to it)"
)
_TOKEN_COUNTING: Final = f"{_DOCS}token-counting"
_MCP_DOCS: Final = "https://platform.claude.com/docs/en/agents-and-tools/mcp-connector"
_SEMCONV: Final = (
    "https://opentelemetry.io/docs/specs/semconv/registry/attributes/gen-ai/ (gen_ai.provider.name)"
)
_PRICES: Final = "boundloop.prices: genai-prices' entries for the provider (docs/platforms.md)"
_AWS_PAGE: Final = f"{_DOCS}claude-platform-on-aws"
_GOOGLE_CLOUD_README: Final = "anthropic/lib/google_cloud/README.md"
_GOOGLE_CLOUD_SDK: Final = f"{_GOOGLE_CLOUD_README} of the anthropic SDK"
_FOUNDRY_PAGE: Final = f"{_DOCS}claude-in-microsoft-foundry"
_FOUNDRY_PRICING: Final = (
    "https://platform.claude.com/docs/en/about-claude/pricing#claude-in-microsoft-foundry-pricing"
)
_BEDROCK_PAGE: Final = f"{_DOCS}claude-in-amazon-bedrock"
_BEDROCK_SDK: Final = "anthropic/lib/bedrock/_client.py of the anthropic SDK"
_AWS_COUNT_TOKENS: Final = "https://docs.aws.amazon.com/bedrock/latest/userguide/count-tokens.html"
_VERTEX_DOCS: Final = "https://docs.cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/"

_MCP_CONNECTOR: Final = {"mcp_servers": "the MCP connector"}


def _sources(
    *,
    count_tokens: str,
    refused: str,
    automatic_cache: str = _CACHING,
    provider_name: str = _SEMCONV,
    prices: str = _PRICES,
) -> dict[str, str]:
    """A row's `sources`, one for each fact: the prompt-caching page, the GenAI conventions and
    genai-prices unless the row names another."""
    return {
        "automatic_cache": automatic_cache,
        "count_tokens": count_tokens,
        "refused": refused,
        "provider_name": provider_name,
        "prices": prices,
    }


FEATURES: Final[Mapping[Platform, PlatformFeatures]] = {
    "anthropic": PlatformFeatures(
        title="the Claude API",
        client="AsyncAnthropic",
        provider_name="anthropic",
        prices="anthropic",
        automatic_cache=True,
        count_tokens=True,
        sources=_sources(count_tokens=_TOKEN_COUNTING, refused=_MCP_DOCS),
    ),
    "aws": PlatformFeatures(
        title="Claude Platform on AWS",
        client="AsyncAnthropicAWS",
        # Anthropic serves it (the SDK's client reports "anthropic" too); billed through AWS.
        provider_name="anthropic",
        prices="anthropic",
        automatic_cache=True,
        count_tokens=True,
        sources=_sources(
            count_tokens=f'{_AWS_PAGE} (not among its "Features not supported")',
            refused=f'{_AWS_PAGE} (the MCP connector is not among its "Features not supported")',
            prices=f"{_AWS_PAGE} (billed at the Claude API's per-model rates)",
        ),
    ),
    "google_cloud": PlatformFeatures(
        title="Claude Platform on Google Cloud",
        client="AsyncAnthropicGoogleCloud",
        provider_name="anthropic",
        prices="anthropic",
        automatic_cache=True,
        count_tokens=True,
        sources=_sources(
            automatic_cache=f'{_GOOGLE_CLOUD_SDK} ("the full Anthropic API")',
            count_tokens=f'{_GOOGLE_CLOUD_SDK} ("the full Anthropic API")',
            refused=f'{_GOOGLE_CLOUD_SDK} ("every beta surface")',
            prices=f"{_GOOGLE_CLOUD_README} (first-party model ids, Marketplace billing)",
        ),
        # No page of Anthropic's or Google's documentation about this offering was found.
        unverified=frozenset({"automatic_cache", "count_tokens", "refused", "prices"}),
    ),
    "foundry": PlatformFeatures(
        title="Microsoft Foundry",
        client="AsyncAnthropicFoundry",
        # Anthropic operates the service (on Azure's or Anthropic's infrastructure), billed through Azure.
        provider_name="anthropic",
        prices="azure",
        automatic_cache=True,
        count_tokens=True,
        sources=_sources(
            count_tokens=(
                f'{_FOUNDRY_PAGE} ("supports most Claude features"; token counting is not among its '
                '"Claude features not supported")'
            ),
            refused=f"{_FOUNDRY_PAGE} (the MCP connector is not among those not supported)",
            prices=_FOUNDRY_PRICING,
        ),
    ),
    "bedrock": PlatformFeatures(
        title="Amazon Bedrock (InvokeModel)",
        client="AsyncAnthropicBedrock",
        provider_name="aws.bedrock",
        prices="aws",
        automatic_cache=False,
        # The SDK refuses it before sending: "Token counting is not supported in Bedrock yet"
        # (AWS's own CountTokens action is another API, which the SDK's client does not call).
        count_tokens=False,
        refused=_MCP_CONNECTOR,
        sources=_sources(
            automatic_cache=(
                f'{_CACHING}: on the legacy integration "the API returns a 400 error for a top-level '
                'cache_control field"'
            ),
            count_tokens=f"{_BEDROCK_SDK}; {_AWS_COUNT_TOKENS}",
            refused=f"{_MCP_DOCS} (not on Amazon Bedrock)",
        ),
        # The MCP connector's page says so in an earlier revision; the current one was not found.
        unverified=frozenset({"refused"}),
    ),
    "bedrock_mantle": PlatformFeatures(
        title="Amazon Bedrock (Messages API, bedrock-mantle)",
        client="AsyncAnthropicBedrockMantle",
        provider_name="aws.bedrock",
        prices="aws",
        automatic_cache=True,
        count_tokens=True,
        refused=_MCP_CONNECTOR,
        sources=_sources(
            automatic_cache=f"{_CACHING}; {_BEDROCK_PAGE} (prompt caching supported)",
            count_tokens=f"{_AWS_COUNT_TOKENS} (Anthropic's count_tokens on the bedrock-mantle endpoint)",
            refused=f'{_BEDROCK_PAGE} ("Features not supported": the MCP connector)',
            prices=f"{_PRICES}; {_BEDROCK_PAGE} (regional endpoints: a 10 % premium)",
        ),
    ),
    "vertex": PlatformFeatures(
        title="Google Vertex AI",
        client="AsyncAnthropicVertex",
        provider_name="gcp.vertex_ai",
        prices="google",
        automatic_cache=True,
        count_tokens=True,
        refused=_MCP_CONNECTOR,
        sources=_sources(
            automatic_cache=(
                f'{_CACHING}; {_VERTEX_DOCS}prompt-caching ("behaves as described in the Anthropic '
                'documentation")'
            ),
            count_tokens=f"{_VERTEX_DOCS}count-tokens (count-tokens:rawPredict)",
            refused=f"{_MCP_DOCS} (not on Vertex AI)",
        ),
        # The MCP connector's page says so in an earlier revision; the current one was not found.
        unverified=frozenset({"refused"}),
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
