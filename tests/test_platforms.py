"""A loop on each platform client the SDK ships: known from its client, valid there, priced, run.

The runs go through the real `AsyncAnthropicBedrock`, `AsyncAnthropicBedrockMantle`,
`AsyncAnthropicVertex`, `AsyncAnthropicFoundry`, `AsyncAnthropicAWS` and
`AsyncAnthropicGoogleCloud` with fake credentials, over HTTP to `tests/platform_api.py`'s
loopback server answering each platform's paths (SigV4 verified, Bedrock's event-stream frames,
Vertex's rawPredict paths, the access tokens and keys).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import pytest
from anthropic.types.beta import BetaRequestMCPServerURLDefinitionParam
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry

from boundloop import (
    AgentLoop,
    Budget,
    LoopMetrics,
    ModelSettings,
    Observers,
    Price,
    ScriptedClient,
    StopReason,
    replay,
    tool,
)
from boundloop.errors import ConfigurationError
from boundloop.events import RunStarted
from boundloop.otel import TraceSettings
from boundloop.platforms import FEATURES, platform_of
from boundloop.prices import resolve_price
from tests.helpers import assert_valid_transcript, text, tool_use
from tests.platform_api import (
    MODELS,
    TESTED,
    THROTTLED,
    UNAVAILABLE,
    VERTEX_REGION,
    PlatformAPI,
    PlatformServer,
    Tested,
    platform_server,
)

PLATFORMS: list[Tested] = list(TESTED)
PROVIDER_NAMES: dict[Tested, str] = {
    "bedrock": "aws.bedrock",
    "bedrock_mantle": "aws.bedrock",
    "vertex": "gcp.vertex_ai",
    "foundry": "anthropic",
    "aws": "anthropic",
    "google_cloud": "anthropic",
}
"""`gen_ai.provider.name` as the OpenTelemetry GenAI conventions spell it (Anthropic serves the
Claude of Foundry and of Claude Platform on AWS and on Google Cloud)."""
COUNTING: list[Tested] = [platform for platform in PLATFORMS if FEATURES[platform].count_tokens]


@pytest.fixture(scope="module")
def server() -> Iterator[PlatformServer]:
    """One loopback server for the module; each test serves its own `PlatformAPI` on it."""
    with platform_server() as running:
        yield running


@pytest.fixture
async def live(server: PlatformServer) -> AsyncIterator[PlatformServer]:
    """The module's server for a test that sends requests: its clients closed afterwards."""
    yield server
    await server.close_clients()


@tool
def order_status(order_id: str) -> str:
    """Look up an order's status."""
    return f"{order_id}: shipped"


def script() -> list[dict[str, Any]]:
    """Two tool turns, then the answer."""
    return [
        tool_use(("order_status", {"order_id": "O-1"}), input_tokens=1200, output_tokens=40),
        tool_use(("order_status", {"order_id": "O-2"}), input_tokens=1300, output_tokens=40),
        text("Both orders shipped.", input_tokens=1400, output_tokens=20),
    ]


def platform_price(api: PlatformAPI) -> Price:
    """The price a run on `api`'s client pays: Vertex's calls a regional endpoint."""
    price = resolve_price(
        api.model, platform=api.platform, region=VERTEX_REGION if api.platform == "vertex" else None
    )
    assert price is not None
    return price


def loop_on(server: PlatformServer, api: PlatformAPI, **options: Any) -> AgentLoop:
    settings: dict[str, Any] = {
        "budget": Budget(max_steps=5),
        "observers": Observers(metrics=None),
        "system": "Answer about orders.",
    }
    return AgentLoop(server.serve(api), model=api.model, tools=[order_status], **(settings | options))


def completed(result: Any, api: PlatformAPI) -> None:
    """The run completed, and the platform refused none of its requests."""
    assert api.refused == []
    assert result.stop_reason is StopReason.COMPLETED, result.state.errors


# -- the platform, known from the client ----------------------------------------------------


def test_each_sdk_platform_client_names_its_platform(server: PlatformServer) -> None:
    """Every platform client the installed SDK ships (sync or async) is known by its class."""
    shipped = {name for name in dir(anthropic) if name.startswith("AsyncAnthropic")}
    assert {features.client for features in FEATURES.values()} == shipped
    assert {FEATURES[platform].client for platform in PLATFORMS} == shipped - {"AsyncAnthropic"}
    assert platform_of(anthropic.AsyncAnthropic(api_key="sk-ant-fake")) == "anthropic"
    for platform in PLATFORMS:
        client = PlatformAPI(platform, []).client(server.url)
        assert type(client).__name__ == FEATURES[platform].client
        assert platform_of(client) == platform
    assert platform_of(anthropic.AnthropicFoundry(api_key="k", resource="r")) == "foundry"
    assert platform_of(ScriptedClient([], platform="vertex")) == "vertex"


# -- valid for the platform ---------------------------------------------------------------------


def test_count_tokens_on_bedrock_is_refused_at_construction_naming_platform_and_feature(
    server: PlatformServer,
) -> None:
    """The SDK refuses token counting on Bedrock before sending: the loop refuses it when built."""
    with pytest.raises(
        ConfigurationError, match=r"Amazon Bedrock \(InvokeModel\) \(bedrock\) has no token counting"
    ):
        loop_on(server, PlatformAPI("bedrock", []), budget=Budget(max_steps=2, count_tokens=True))


@pytest.mark.parametrize("platform", COUNTING)
async def test_count_tokens_runs_where_the_platform_counts(live: PlatformServer, platform: Tested) -> None:
    """`Budget(count_tokens=True)` on a platform that counts: each request counted first, on the
    platform's own count path (Vertex's `count-tokens:rawPredict`, the Messages API's elsewhere)."""
    api = PlatformAPI(platform, script())
    budget = Budget(max_steps=5, max_cost_usd=1, count_tokens=True)
    result = await loop_on(live, api, budget=budget).run("Where are O-1 and O-2?")
    completed(result, api)
    assert result.state.errors == []
    assert [len(body["messages"]) for body in api.counted] == [1, 3, 5]


def test_a_top_level_cache_control_where_there_is_no_automatic_caching_is_refused(
    server: PlatformServer,
) -> None:
    """`ModelSettings(cache_control=...)` is automatic caching: refused on Bedrock's InvokeModel,
    taken by the platforms that have it."""
    settings = ModelSettings(cache_control={"type": "ephemeral"})
    with pytest.raises(ConfigurationError, match=r"\(bedrock\) has no automatic prompt caching"):
        loop_on(server, PlatformAPI("bedrock", []), settings=settings)
    for platform in PLATFORMS:
        if platform != "bedrock":
            loop_on(server, PlatformAPI(platform, []), settings=settings)


def test_each_fact_of_the_feature_table_names_its_source() -> None:
    """Every row says where each of its facts is documented, and which ones nothing confirms."""
    facts = {"automatic_cache", "count_tokens", "refused", "provider_name", "prices"}
    for platform, features in FEATURES.items():
        assert set(features.sources) == facts, platform
        assert all(features.sources.values()), platform
        assert features.unverified <= facts, platform
    assert FEATURES["google_cloud"].unverified == {"automatic_cache", "count_tokens", "refused", "prices"}


def test_the_mcp_connector_is_refused_where_the_platform_does_not_offer_it(server: PlatformServer) -> None:
    mcp: BetaRequestMCPServerURLDefinitionParam = {
        "type": "url",
        "url": "https://mcp.example.com/sse",
        "name": "example",
    }
    for platform in ("bedrock", "bedrock_mantle", "vertex"):
        with pytest.raises(ConfigurationError, match=rf"\({platform}\) does not offer the MCP connector"):
            loop_on(server, PlatformAPI(platform, []), settings=ModelSettings(mcp_servers=[mcp]))


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_cache_auto_sends_what_the_platform_takes(live: PlatformServer, platform: Tested) -> None:
    """`cache="auto"`: the top-level `cache_control` where there is automatic caching; on Bedrock
    and Vertex the same breakpoint on the last block of the request instead, and no top-level one."""
    api = PlatformAPI(platform, script())
    result = await loop_on(live, api).run("Where are O-1 and O-2?")
    completed(result, api)
    for request in api.requests:
        last = request["messages"][-1]["content"][-1]
        if FEATURES[platform].automatic_cache:
            assert request["cache_control"] == {"type": "ephemeral"}
            assert "cache_control" not in last
        else:
            assert "cache_control" not in request
            assert last["cache_control"] == {"type": "ephemeral"}
        assert request["system"][0]["cache_control"] == {"type": "ephemeral"}  # the fixed prefix
    assert all(
        "cache_control" not in block
        for m in result.state.messages
        if isinstance(m["content"], list)
        for block in m["content"]
        if isinstance(block, dict)
    )


# -- run on the real clients --------------------------------------------------------------------


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("streamed", [False, True], ids=["create", "stream"])
async def test_a_multi_turn_tool_run_completes_on_each_platform(
    live: PlatformServer, platform: Tested, streamed: bool
) -> None:
    """Two tool turns and the answer through the platform's client over HTTP, non-streaming and
    streaming (Bedrock's event-stream frames decoded by the SDK); the platform in provenance,
    `RunStarted`, the spans' `gen_ai.provider.name` and the model metrics' `platform` label; priced."""
    api = PlatformAPI(platform, script())
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    registry = CollectorRegistry()
    loop = loop_on(
        live,
        api,
        observers=Observers(metrics=LoopMetrics(registry), tracing=TraceSettings(provider=provider)),
        name="orders",
    )
    if streamed:
        async with loop.stream("Where are O-1 and O-2?") as run:
            async for _ in run:
                pass
        result = run.result
        assert result is not None
    else:
        result = await loop.run("Where are O-1 and O-2?")
    completed(result, api)
    assert result.answer == "Both orders shipped."
    assert api.served == 3
    assert len(api.requests) == 3
    assert all(bool(request.get("stream")) == streamed for request in api.requests if "stream" in request)
    assert [m["content"][0]["content"] for m in api.requests[-1]["messages"][2::2]] == [
        "O-1: shipped",
        "O-2: shipped",
    ]
    assert_valid_transcript(result.state.messages)
    assert result.state.provenance is not None
    assert result.state.provenance.platform == platform
    started = [event for event in result.events if isinstance(event, RunStarted)]
    assert [event.platform for event in started] == [platform]
    names = {
        span.attributes["gen_ai.provider.name"]
        for span in exporter.get_finished_spans()
        if span.attributes and "gen_ai.provider.name" in span.attributes
    }
    assert names == {PROVIDER_NAMES[platform]}
    requests = registry.get_sample_value(
        "boundloop_model_requests_total", {"loop": "orders", "platform": platform, "stop_reason": "tool_use"}
    )
    assert requests == 2
    price = platform_price(api)
    assert result.state.usage.cost_usd == pytest.approx(
        (3900 * price.input_per_mtok + 100 * price.output_per_mtok) / 1e6
    )


@pytest.mark.asyncio_only  # the SDK's back-off is a real wait: once is enough
@pytest.mark.parametrize(
    ("platform", "busy"),
    [
        *[pytest.param(platform, THROTTLED, id=f"{platform}-429") for platform in PLATFORMS],
        pytest.param("bedrock", UNAVAILABLE, id="bedrock-503"),
    ],
)
async def test_a_throttled_request_is_retried_by_the_sdk(
    live: PlatformServer, platform: Tested, busy: str
) -> None:
    """The platform's own 429 (Bedrock's ThrottlingException, Vertex's RESOURCE_EXHAUSTED, Azure's
    rate limit, the Claude API's rate_limit_error) or Bedrock's 503 is retried by the SDK's
    client: the run sees one response."""
    api = PlatformAPI(platform, [script()[0], busy, *script()[1:]])
    result = await loop_on(live, api).run("Where are O-1 and O-2?")
    completed(result, api)
    assert api.throttled == 1
    assert len(api.requests) == 4
    assert api.served == 3
    assert api.requests[1] == api.requests[2]  # the same request again


@pytest.mark.parametrize("platform", PLATFORMS)
async def test_max_cost_usd_stops_a_platform_run(live: PlatformServer, platform: Tested) -> None:
    """A platform model id is priced, so a cost budget builds and stops the run once spent."""
    api = PlatformAPI(platform, script())
    price = platform_price(api)
    first = (1200 * price.input_per_mtok + 40 * price.output_per_mtok) / 1e6
    result = await loop_on(live, api, budget=Budget(max_steps=5, max_cost_usd=first * 1.5)).run("Where?")
    assert api.refused == []
    assert result.stop_reason is StopReason.COST_BUDGET
    assert api.served < 3
    assert result.state.usage.cost_usd is not None
    assert result.state.usage.cost_usd >= first


async def test_a_request_signed_with_another_secret_is_refused(live: PlatformServer) -> None:
    """The server's checks can fail: a Bedrock request signed with a wrong secret gets a 400."""
    api = PlatformAPI("bedrock", script())
    client = live.serve(api).with_options(aws_secret_key="not/the/secret/" + "0" * 25)
    live.clients.append(client)
    with pytest.raises(anthropic.BadRequestError):
        await client.messages.create(
            model=api.model, max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert api.refused == ["Refused: the SigV4 signature does not verify"]
    assert api.requests == []


# -- prices ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "platform", "premium"),
    [
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", "bedrock", 1.1),
        ("us.anthropic.claude-sonnet-4-5-20250929-v1:0", "bedrock", 1.1),
        ("eu.anthropic.claude-sonnet-4-5-20250929-v1:0", "bedrock_mantle", 1.1),
        ("global.anthropic.claude-sonnet-4-5-20250929-v1:0", "bedrock", 1.0),
        ("claude-sonnet-4-5@20250929", "vertex", 1.0),
        ("claude-sonnet-4-5", "foundry", 1.0),
        ("claude-sonnet-4-5", "aws", 1.0),
        ("anthropic.claude-sonnet-4-5-20250929-v1:0", "anthropic", 1.1),
    ],
)
def test_platform_model_ids_are_priced_with_their_regional_premium(
    model: str, platform: Any, premium: float
) -> None:
    """Bedrock's in-region ids (and the geo cross-region profiles) cost 10 % more than the
    global profile, as genai-prices' Bedrock entries say; Vertex's `@` ids and Foundry's names
    are priced; an id in Bedrock's form is priced from Bedrock's entries on any client."""
    first_party = resolve_price("claude-sonnet-4-5")
    price = resolve_price(model, platform=platform)
    assert first_party is not None
    assert price is not None
    assert price.input_per_mtok == pytest.approx(first_party.input_per_mtok * premium)
    assert price.output_per_mtok == pytest.approx(first_party.output_per_mtok * premium)


@pytest.mark.parametrize(
    ("model", "premium"),
    [
        ("claude-sonnet-4-5@20250929", 1.1),
        ("claude-haiku-4-5@20251001", 1.1),
        ("claude-sonnet-4@20250514", 1.0),
    ],
)
def test_a_regional_vertex_endpoint_costs_the_regional_premium(model: str, premium: float) -> None:
    """Vertex's ids do not say the endpoint, its client does: a regional one (`us-east5`) pays what
    Bedrock's entries charge a regional endpoint over the global one; `global` pays the list price."""
    global_price = resolve_price(model, platform="vertex", region="global")
    assert global_price is not None
    for region, factor in (("us-east5", premium), ("global", 1.0)):
        client = anthropic.AsyncAnthropicVertex(region=region, project_id="p", access_token="t")
        loop = AgentLoop(client, model=model, budget=Budget(max_steps=1), observers=Observers(metrics=None))
        price = loop.config.price
        assert price is not None
        assert price.input_per_mtok == pytest.approx(global_price.input_per_mtok * factor)
        assert price.output_per_mtok == pytest.approx(global_price.output_per_mtok * factor)


@pytest.mark.parametrize(
    ("model", "premium"),
    [
        ("anthropic.claude-haiku-4-5", 1.1),
        ("us.anthropic.claude-haiku-4-5", 1.1),
        ("global.anthropic.claude-haiku-4-5", 1.0),
    ],
)
def test_an_undated_bedrock_messages_api_id_is_priced(model: str, premium: float) -> None:
    """Bedrock's Messages API names models without a date: priced from the dated Bedrock entry of
    the same name (regional ids at the regional premium, `global.` at the list price)."""
    first_party = resolve_price("claude-haiku-4-5")
    price = resolve_price(model, platform="bedrock_mantle")
    assert first_party is not None
    assert price is not None
    assert price.input_per_mtok == pytest.approx(first_party.input_per_mtok * premium)
    assert resolve_price("anthropic.claude-haiku-4-5-nonsense", platform="bedrock_mantle") is None


def test_max_cost_usd_builds_on_a_platform_model_id() -> None:
    """Before: `ConfigurationError: max_cost_usd needs a price` for Bedrock's ids."""
    for model in (
        "anthropic.claude-sonnet-4-5-20250929-v1:0",
        "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
    ):
        client = ScriptedClient([], platform="bedrock")
        AgentLoop(
            client, model=model, budget=Budget(max_steps=2, max_cost_usd=1), observers=Observers(metrics=None)
        )
    assert MODELS["bedrock"].startswith("global.")


async def test_a_platform_run_replays_as_it_ran_there(live: PlatformServer) -> None:
    """A recorded Bedrock run replays without a loop: the recorded configuration runs as on
    Bedrock (priced at its price, block breakpoints), and the replay is identical."""
    api = PlatformAPI("bedrock", script())
    result = await loop_on(live, api, budget=Budget(max_steps=5, max_cost_usd=1)).run(
        "Where are O-1 and O-2?"
    )
    completed(result, api)
    report = await replay(result.state)
    assert report.identical, report
    assert report.provenance_changes == []
    assert report.result is not None
    started = [event for event in report.result.events if isinstance(event, RunStarted)]
    assert [event.platform for event in started] == ["bedrock"]
    assert report.result.state.usage.cost_usd == pytest.approx(result.state.usage.cost_usd)
