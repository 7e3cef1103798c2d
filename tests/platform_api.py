"""The platforms' HTTP APIs for Claude, served on loopback to the anthropic SDK's platform clients.

`PlatformServer` is a real HTTP server (uvicorn and starlette, in a thread of its own, on a free
port of 127.0.0.1). It answers as the platform of the `PlatformAPI` it currently serves, on that
platform's paths, the way the platform answers. `PlatformAPI.client(server.url)` is the real SDK
client of the platform with fake credentials and its base URL on the server: the SDK builds,
signs and frames every request as in production, then sends it over a socket; the server checks
what the platform checks (structurally) before it answers.

- Amazon Bedrock (`AsyncAnthropicBedrock`): `/model/{id}/invoke` and
  `/invoke-with-response-stream` (AWS event-stream binary frames); SigV4 for `bedrock`.
- Bedrock's Messages API (`AsyncAnthropicBedrockMantle`): `/anthropic/v1/messages` and
  `/count_tokens`; SigV4 for `bedrock-mantle`.
- Google Vertex AI (`AsyncAnthropicVertex`): `/v1/projects/{p}/locations/{r}/publishers/anthropic/
  models/{id}:rawPredict` (`:streamRawPredict`, `count-tokens:rawPredict`); the access token.
- Microsoft Foundry (`AsyncAnthropicFoundry`): `/anthropic/v1/messages`; the resource's key
  (`x-api-key`, `api-key`).
- Claude Platform on AWS (`AsyncAnthropicAWS`): `/v1/messages` and `/count_tokens`; SigV4 for
  `aws-external-anthropic` and the `anthropic-workspace-id` header.
- Claude Platform on Google Cloud (`AsyncAnthropicGoogleCloud`): `/v1/projects/{p}/locations/{l}/
  workspaces/{w}/invoke/v1/messages` and `/count_tokens`; the access token.

Every SigV4 signature is computed again with botocore from the fake secret and compared.
Bedrock and Vertex take `anthropic_version` in the body and the model in the path; the others
take the Claude API's body (`model` in it) and its `anthropic-version` header.

Each script item is a response body (a `tests.helpers.text`/`tool_use` dict, served as the
platform sends a Message, its id in the platform's form) or `THROTTLED`: the platform's own
"too many requests" (status, headers and error body as the platform sends them), which the SDK
retries. `requests` holds the JSON body of every Messages request as the server received it; a
request the platform would refuse is answered 400 (not retried) and its reason kept in `refused`.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import socket
import threading
import zlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final, Literal

import anthropic
import httpx2
import uvicorn
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from boundloop._base.scripted_stream import raw_events
from boundloop.testing import parse_message
from tests.sdk_scripted import sse

JSON = dict[str, Any]
Tested = Literal["bedrock", "bedrock_mantle", "vertex", "foundry", "aws", "google_cloud"]
TESTED: Final[tuple[Tested, ...]] = ("bedrock", "bedrock_mantle", "vertex", "foundry", "aws", "google_cloud")
"""Every platform client the installed SDK ships besides `AsyncAnthropic`."""

THROTTLED: Final = "throttled"
"""A script item: the platform's 429 for too many requests (the SDK retries it)."""
UNAVAILABLE: Final = "unavailable"
"""A script item: the platform's 503 (Bedrock's ServiceUnavailableException; the SDK retries it)."""

AWS_KEY: Final = "AKIAFAKEFAKEFAKE0000"
AWS_SECRET: Final = "fake/secret/key/for/tests/only/000000000"
AWS_REGION: Final = "us-east-1"
AWS_WORKSPACE: Final = "wrkspc_fake0000000000000000"
VERTEX_PROJECT: Final = "fake-project"
VERTEX_REGION: Final = "us-east5"
GOOGLE_TOKEN: Final = "ya29.fake-access-token"
GOOGLE_LOCATION: Final = "global"
GOOGLE_WORKSPACE: Final = "wrkspc_fakegoogle000000000"
FOUNDRY_KEY: Final = "fake-foundry-key"

MODELS: Final[dict[Tested, str]] = {
    "bedrock": "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "bedrock_mantle": "anthropic.claude-opus-4-7",
    "vertex": "claude-sonnet-4-5@20250929",
    "foundry": "claude-sonnet-4-5",
    "aws": "claude-sonnet-4-5",
    "google_cloud": "claude-sonnet-4-5",
}
"""A model id in each platform's form."""
_VERTEX_MODELS: Final = (
    f"/v1/projects/{VERTEX_PROJECT}/locations/{VERTEX_REGION}/publishers/anthropic/models/"
)
_GOOGLE_INVOKE: Final = (
    f"/v1/projects/{VERTEX_PROJECT}/locations/{GOOGLE_LOCATION}/workspaces/{GOOGLE_WORKSPACE}/invoke"
)
_AWS_CREDENTIALS: Final = {"aws_access_key": AWS_KEY, "aws_secret_key": AWS_SECRET, "aws_region": AWS_REGION}
_GOOGLE_TOKEN: Final = {"authorization": f"Bearer {GOOGLE_TOKEN}"}

ErrorAnswer = tuple[int, JSON, dict[str, str]]
"""An error answer: its status, JSON body and headers."""


def _amazon_error(kind: str, status: int, message: str) -> ErrorAnswer:
    """An error as Amazon Bedrock sends it: its kind in `x-amzn-errortype`."""
    headers = {
        "x-amzn-errortype": f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/",
        "x-amzn-requestid": "0f4b7c2e-fake-4d6a-9a53-throttled000",
    }
    return status, {"message": message}, headers


_AMAZON_THROTTLED: Final = _amazon_error(
    "ThrottlingException", 429, "Too many requests, please wait before trying again."
)
_AMAZON_UNAVAILABLE: Final = _amazon_error(
    "ServiceUnavailableException", 503, "Bedrock is unable to process your request."
)
_VERTEX_THROTTLED: Final[ErrorAnswer] = (
    429,
    {
        "error": {
            "code": 429,
            "message": "Resource exhausted. Please try again later.",
            "status": "RESOURCE_EXHAUSTED",
        }
    },
    {},
)
_FOUNDRY_THROTTLED: Final[ErrorAnswer] = (
    429,
    {"error": {"code": "429", "message": "Rate limit is exceeded. Try again in 1 seconds."}},
    {"retry-after": "1", "apim-request-id": "fake-apim-request"},
)
_CLAUDE_THROTTLED: Final[ErrorAnswer] = (
    429,
    {
        "type": "error",
        "error": {
            "type": "rate_limit_error",
            "message": "Number of request tokens has exceeded your rate limit.",
        },
        "request_id": "req_fake_throttled",
    },
    {"request-id": "req_fake_throttled"},
)
"""The Claude API's own rate-limit error (Claude Platform on AWS and on Google Cloud send it)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class Shape:
    """What one platform's API does its own way: `PlatformAPI` does the rest alike for all."""

    client: Callable[..., Any]
    """The anthropic SDK's async client for the platform."""
    credentials: Mapping[str, Any]
    """The client's fake credentials, as its keyword arguments."""
    base: str
    """The client's base URL, after the server's."""
    ids: str
    """A Message id's prefix."""
    throttled: ErrorAnswer
    """The platform's "too many requests"."""
    unavailable: ErrorAnswer | None = None
    """Its "unavailable", where it has one of its own (otherwise `throttled` again)."""
    sigv4: str | None = None
    """The service its SigV4 signatures are scoped to (None: not signed)."""
    headers: Mapping[str, str] = dataclasses.field(default_factory=dict[str, str])
    """The headers a request must carry, with their values (its credentials where not signed)."""
    invoke: tuple[str, str] | None = None
    """Where the model is named in the path (Bedrock's InvokeModel, Vertex AI): the raw paths of
    a Message and of a stream, `{model}` for the model id, and `anthropic_version` in the body;
    None: the Claude API's body at `messages`."""
    stream_in_body: bool = True
    """The body says `stream` as the Claude API's does (Bedrock's InvokeModel: only the path)."""
    messages: str = ""
    """The path of a Messages request that takes the Claude API's body."""
    count_tokens: str | None = None
    """The path of the token count (None: none; Bedrock's InvokeModel client has none)."""


SHAPES: Final[dict[Tested, Shape]] = {
    "bedrock": Shape(
        client=anthropic.AsyncAnthropicBedrock,
        credentials=_AWS_CREDENTIALS,
        base="",
        ids="msg_bdrk_",
        throttled=_AMAZON_THROTTLED,
        unavailable=_AMAZON_UNAVAILABLE,
        sigv4="bedrock",
        invoke=("/model/{model}/invoke", "/model/{model}/invoke-with-response-stream"),
        stream_in_body=False,
    ),
    "bedrock_mantle": Shape(
        client=anthropic.AsyncAnthropicBedrockMantle,
        credentials=_AWS_CREDENTIALS,
        base="/anthropic",
        ids="msg_bdrk_",
        throttled=_AMAZON_THROTTLED,
        unavailable=_AMAZON_UNAVAILABLE,
        sigv4="bedrock-mantle",
        messages="/anthropic/v1/messages",
        count_tokens="/anthropic/v1/messages/count_tokens",
    ),
    "vertex": Shape(
        client=anthropic.AsyncAnthropicVertex,
        credentials={"region": VERTEX_REGION, "project_id": VERTEX_PROJECT, "access_token": GOOGLE_TOKEN},
        base="/v1",
        ids="msg_vrtx_",
        throttled=_VERTEX_THROTTLED,
        headers=_GOOGLE_TOKEN,
        invoke=(f"{_VERTEX_MODELS}{{model}}:rawPredict", f"{_VERTEX_MODELS}{{model}}:streamRawPredict"),
        count_tokens=f"{_VERTEX_MODELS}count-tokens:rawPredict",
    ),
    "foundry": Shape(
        client=anthropic.AsyncAnthropicFoundry,
        credentials={"api_key": FOUNDRY_KEY},
        base="/anthropic/",
        ids="msg_",
        throttled=_FOUNDRY_THROTTLED,
        headers={"x-api-key": FOUNDRY_KEY, "api-key": FOUNDRY_KEY},
        messages="/anthropic/v1/messages",
        count_tokens="/anthropic/v1/messages/count_tokens",
    ),
    "aws": Shape(
        client=anthropic.AsyncAnthropicAWS,
        credentials={**_AWS_CREDENTIALS, "workspace_id": AWS_WORKSPACE},
        base="",
        ids="msg_",
        throttled=_CLAUDE_THROTTLED,
        sigv4="aws-external-anthropic",
        headers={"anthropic-workspace-id": AWS_WORKSPACE},
        messages="/v1/messages",
        count_tokens="/v1/messages/count_tokens",
    ),
    "google_cloud": Shape(
        client=anthropic.AsyncAnthropicGoogleCloud,
        credentials={
            "project": VERTEX_PROJECT,
            "location": GOOGLE_LOCATION,
            "workspace_id": GOOGLE_WORKSPACE,
            "token_provider": lambda: GOOGLE_TOKEN,
        },
        base=_GOOGLE_INVOKE,
        ids="msg_",
        throttled=_CLAUDE_THROTTLED,
        headers=_GOOGLE_TOKEN,
        messages=f"{_GOOGLE_INVOKE}/v1/messages",
        count_tokens=f"{_GOOGLE_INVOKE}/v1/messages/count_tokens",
    ),
}
"""Each platform's API, by what differs: the one table `PlatformAPI` serves from."""
_NO_AUTOMATIC_CACHING: Final[frozenset[Tested]] = frozenset({"bedrock"})
"""The platforms that answer a top-level `cache_control` (automatic caching) with a 400 (the
legacy InvokeModel integration, as the prompt-caching page says): written here apart from
`boundloop.platforms.FEATURES`, so a wrong row there fails a run here."""
_NO_MCP_CONNECTOR: Final[frozenset[Tested]] = frozenset({"bedrock", "bedrock_mantle", "vertex"})
"""The platforms that answer the MCP connector's `mcp_servers` with a 400."""


def event_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message: total and headers length, the prelude's CRC32, the headers
    (each a name, type 7 "string" and a value), the payload and the message's CRC32."""
    encoded = b"".join(
        len(name).to_bytes(1, "big")
        + name.encode()
        + b"\x07"
        + len(value).to_bytes(2, "big")
        + value.encode()
        for name, value in headers.items()
    )
    prelude = (12 + len(encoded) + len(payload) + 4).to_bytes(4, "big") + len(encoded).to_bytes(4, "big")
    message = prelude + zlib.crc32(prelude).to_bytes(4, "big") + encoded + payload
    return message + zlib.crc32(message).to_bytes(4, "big")


def bedrock_chunk(event: JSON) -> bytes:
    """A Messages stream event as Bedrock's `invoke-with-response-stream` sends it."""
    payload = json.dumps({"bytes": base64.b64encode(json.dumps(event).encode()).decode()}).encode()
    headers = {":event-type": "chunk", ":content-type": "application/json", ":message-type": "event"}
    return event_frame(headers, payload)


class Refused(Exception):
    """The request is one the platform would refuse: the server answers 400."""


def _require(condition: bool, reason: str) -> None:
    if not condition:
        raise Refused(reason)


class PlatformAPI:
    """One platform's API as the server answers it: a script of responses, the requests seen."""

    def __init__(
        self,
        platform: Tested,
        script: Iterable[JSON | str],
        *,
        model: str | None = None,
        max_retries: int = 2,
    ) -> None:
        self.platform: Tested = platform
        self.shape = SHAPES[platform]
        self.model = MODELS[platform] if model is None else model
        self.script = list(script)
        self.max_retries = max_retries
        self.requests: list[JSON] = []
        self.counted: list[JSON] = []
        """The bodies of the token-count requests."""
        self.refused: list[str] = []
        self.throttled = 0
        self.served = 0

    def client(self, url: str) -> Any:
        """The platform's SDK client with fake credentials, its base URL on the server at `url`."""
        return self.shape.client(
            **self.shape.credentials, base_url=f"{url}{self.shape.base}", max_retries=self.max_retries
        )

    async def answer(self, request: Request) -> Response:
        """The platform's answer to `request`: a Message, a stream, a token count or an error."""
        content = await request.body()
        try:
            body: JSON = json.loads(content)
            self._check_auth(request, content)
            if request.url.path == self.shape.count_tokens:
                self._check_body(body, model_in_body=True)
                self.counted.append(body)
                return JSONResponse({"input_tokens": 1000 + 100 * len(body["messages"])})
            stream = self._check_messages(request, body)
        except (Refused, ValueError, KeyError) as exc:
            self.refused.append(f"{type(exc).__name__}: {exc}")
            return JSONResponse(
                {"type": "error", "error": {"type": "invalid_request_error", "message": str(exc)}},
                status_code=400,
                headers={"x-should-retry": "false"},
            )
        self.requests.append(body)
        if not self.script:
            return JSONResponse({"message": "the test's script ran out"}, status_code=500)
        item = self.script.pop(0)
        if item in (THROTTLED, UNAVAILABLE):
            self.throttled += 1
            status, error, headers = (
                self.shape.unavailable
                if item == UNAVAILABLE and self.shape.unavailable
                else self.shape.throttled
            )
            return JSONResponse(error, status_code=status, headers=headers)
        assert isinstance(item, dict)
        self.served += 1
        message = {"id": f"{self.shape.ids}{self.served:024d}", "model": self.model, **item}
        if stream:
            return self._stream(message)
        parsed = parse_message(message, model=self.model).model_dump(mode="json")
        if self.platform == "bedrock":
            return JSONResponse(parsed, headers=self._bedrock_headers(message))
        return JSONResponse(parsed, headers={"request-id": f"req_{self.served:024d}"})

    def _check_auth(self, request: Request, content: bytes) -> None:
        """The credentials the platform takes, where it takes them."""
        if self.shape.sigv4 is not None:
            _check_sigv4(request, content, self.shape.sigv4)
        for name, value in self.shape.headers.items():
            _require(request.headers.get(name) == value, f"no {name}: {value}")

    def _check_body(self, body: JSON, *, model_in_body: bool) -> None:
        """Bedrock and Vertex take the version in the body (and a Message's model in the path);
        the others take the Claude API's body."""
        if self.shape.invoke is not None:
            _require(
                isinstance(body.get("anthropic_version"), str), "anthropic_version missing from the body"
            )
        if model_in_body:
            _require(body.get("model") == self.model, f"the body's model is {body.get('model')!r}")
        else:
            _require("model" not in body, "the model in the body: the path names it")
        _require(isinstance(body.get("messages"), list), "no messages")
        if self.platform in _NO_AUTOMATIC_CACHING:
            _require("cache_control" not in body, "a top-level cache_control: no automatic caching here")
        if self.platform in _NO_MCP_CONNECTOR:
            _require("mcp_servers" not in body, "mcp_servers: no MCP connector here")

    def _check_messages(self, request: Request, body: JSON) -> bool:
        """A Messages request on the platform's path, in its form; whether it asks for a stream."""
        _require(request.method == "POST", "not a POST")
        if self.shape.invoke is None:
            path = request.url.path
            _require(path == self.shape.messages, f"not the platform's Messages path: {path}")
            _require(bool(request.headers.get("anthropic-version")), "no anthropic-version header")
            self._check_body(body, model_in_body=True)
            return bool(body.get("stream"))
        raw_path: str = request.scope["raw_path"].decode()
        once, streamed = (path.format(model=self.model) for path in self.shape.invoke)
        _require(raw_path in {once, streamed}, f"not the platform's path of a model: {raw_path}")
        self._check_body(body, model_in_body=False)
        stream = raw_path == streamed
        if self.shape.stream_in_body:
            _require(bool(body.get("stream")) == stream, "stream in the body and the path disagree")
        else:
            _require("stream" not in body, "stream in the body: the path says it")
        return stream

    @staticmethod
    def _bedrock_headers(message: JSON) -> dict[str, str]:
        usage = message.get("usage", {})
        return {
            "x-amzn-requestid": "0f4b7c2e-fake-4d6a-9a53-invoke0000000",
            "x-amzn-bedrock-input-token-count": str(usage.get("input_tokens", 0)),
            "x-amzn-bedrock-output-token-count": str(usage.get("output_tokens", 0)),
            "x-amzn-bedrock-invocation-latency": "412",
        }

    def _stream(self, message: JSON) -> Response:
        events = list(raw_events(parse_message(message, model=self.model)))
        if self.platform != "bedrock":
            return StreamingResponse(_chunks([sse(e) for e in events]), media_type="text/event-stream")
        last = events[-1]
        assert last["type"] == "message_stop"
        usage = message.get("usage", {})
        events[-1] = {
            **last,
            "amazon-bedrock-invocationMetrics": {
                "inputTokenCount": usage.get("input_tokens", 0),
                "outputTokenCount": usage.get("output_tokens", 0),
                "invocationLatency": 412,
                "firstByteLatency": 208,
            },
        }
        return StreamingResponse(
            _chunks([bedrock_chunk(event) for event in events]),
            media_type="application/vnd.amazon.eventstream",
            headers={
                "x-amzn-requestid": "0f4b7c2e-fake-4d6a-9a53-stream000000",
                "x-amzn-bedrock-content-type": "application/json",
            },
        )


async def _chunks(chunks: list[bytes]) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


class PlatformServer:
    """A loopback HTTP server answering as the platform of the `PlatformAPI` it serves."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.api: PlatformAPI | None = None
        self.clients: list[Any] = []

    def serve(self, api: PlatformAPI) -> Any:
        """Answer as `api`'s platform from now on; the platform's client, pointed here."""
        self.api = api
        client = api.client(self.url)
        self.clients.append(client)
        return client

    async def close_clients(self) -> None:
        """Close the connections of the clients `serve` made (on the event loop that opened them)."""
        while self.clients:
            await self.clients.pop().close()

    async def _endpoint(self, request: Request) -> Response:
        if self.api is None:
            return JSONResponse({"message": "no platform served"}, status_code=500)
        return await self.api.answer(request)


@contextmanager
def platform_server() -> Iterator[PlatformServer]:
    """A `PlatformServer` under uvicorn in a thread of its own (so tests on any anyio backend reach
    it), on a free port of 127.0.0.1. The socket listens before the server starts, so a request
    made at once waits in its backlog."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    server = PlatformServer(f"http://127.0.0.1:{sock.getsockname()[1]}")
    app = Starlette(routes=[Route("/{path:path}", server._endpoint, methods=["POST"])])
    uvicorn_server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=uvicorn_server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        uvicorn_server.should_exit = True
        thread.join(10)
        sock.close()


def warm_bedrock_streams() -> None:
    """Stream once through the sync Bedrock client, outside any event loop: the SDK's decoder of
    Bedrock's event stream reads botocore's service model from disk on its first stream (a
    blocking read, once per process), which blockbuster refuses on the event loop."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        stop = bedrock_chunk({"type": "message_stop"})
        return httpx2.Response(
            200, headers={"content-type": "application/vnd.amazon.eventstream"}, content=stop
        )

    client = anthropic.AnthropicBedrock(
        aws_access_key=AWS_KEY,
        aws_secret_key=AWS_SECRET,
        aws_region=AWS_REGION,
        http_client=httpx2.Client(transport=httpx2.MockTransport(answer)),
    )
    with client.messages.create(
        model=MODELS["bedrock"], max_tokens=1, messages=[{"role": "user", "content": "hi"}], stream=True
    ) as stream:
        for _ in stream:
            pass


warm_bedrock_streams()


def _check_sigv4(request: Request, content: bytes, service: str) -> None:
    """The request's SigV4 signature is the one AWS computes from the fake secret: the signed
    headers (the host among them), the payload, and the scope (`us-east-1`, `service`)."""
    authorization = request.headers.get("authorization", "")
    _require(authorization.startswith(f"AWS4-HMAC-SHA256 Credential={AWS_KEY}/"), "no SigV4 Authorization")
    _require(f"/{AWS_REGION}/{service}/aws4_request" in authorization, f"not signed for {service}")
    signed = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
    _require("host" in signed and "x-amz-date" in signed, "host or x-amz-date not signed")
    query = request.scope["query_string"].decode()
    url = f"http://{request.headers['host']}{request.scope['raw_path'].decode()}" + (
        f"?{query}" if query else ""
    )
    aws = AWSRequest(
        method=request.method, url=url, data=content, headers={name: request.headers[name] for name in signed}
    )
    aws.context["timestamp"] = request.headers["x-amz-date"]
    auth = SigV4Auth(Credentials(AWS_KEY, AWS_SECRET), service, AWS_REGION)
    signature = auth.signature(auth.string_to_sign(aws, auth.canonical_request(aws)), aws)
    _require(authorization.endswith(f"Signature={signature}"), "the SigV4 signature does not verify")
