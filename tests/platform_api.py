"""The platforms' HTTP APIs for Claude, faked on the SDK's own HTTP client, for the SDK's platform clients.

`PlatformAPI(platform, script)` answers the paths each platform serves, the way it answers them,
to the real client of that platform (`client()`), built with fake credentials: the SDK signs
and frames every request as in production before the transport sees it, and the fake checks it.

- Amazon Bedrock (`AsyncAnthropicBedrock`): `POST /model/{model}/invoke` and
  `/invoke-with-response-stream`, signed with AWS SigV4 (the signature is computed again here
  with botocore from the fake secret and compared); a stream is AWS event-stream binary frames
  (`event_frame`: prelude, headers, payload, CRC32s), each a `chunk` whose payload holds the
  Messages event as base64 `bytes`; a throttled request is a 429 `ThrottlingException`.
- Google Vertex AI (`AsyncAnthropicVertex`): `POST /v1/projects/{project}/locations/{region}/
  publishers/anthropic/models/{model}:rawPredict` (`:streamRawPredict`: server-sent events), a
  bearer access token, `anthropic_version` in the body; throttled: 429
  `RESOURCE_EXHAUSTED`.
- Microsoft Foundry (`AsyncAnthropicFoundry`): `POST /anthropic/v1/messages` on
  `{resource}.services.ai.azure.com` with the `api-key` header; throttled: Azure's 429.

Each script item is a response body (a `tests.helpers.text`/`tool_use` dict, served as the
platform sends a Message, its id in the platform's form) or `THROTTLED`. `requests` holds the
JSON body of every request as the platform received it.
"""

from __future__ import annotations

import base64
import json
import zlib
from collections.abc import AsyncIterator, Iterable
from typing import Any, Final, Literal

import anthropic
import httpx2
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from boundloop._base.scripted_stream import raw_events
from boundloop.testing import parse_message
from tests.sdk_scripted import sse

JSON = dict[str, Any]
Tested = Literal["bedrock", "vertex", "foundry"]

THROTTLED: Final = "throttled"
"""A script item: the platform's 429 for too many requests (the SDK retries it)."""

AWS_KEY: Final = "AKIAFAKEFAKEFAKE0000"
AWS_SECRET: Final = "fake/secret/key/for/tests/only/000000000"
AWS_REGION: Final = "us-east-1"
VERTEX_PROJECT: Final = "fake-project"
VERTEX_REGION: Final = "us-east5"
VERTEX_TOKEN: Final = "ya29.fake-access-token"
FOUNDRY_RESOURCE: Final = "fake-resource"
FOUNDRY_KEY: Final = "fake-foundry-key"

MODELS: Final[dict[Tested, str]] = {
    "bedrock": "global.anthropic.claude-sonnet-4-5-20250929-v1:0",
    "vertex": "claude-sonnet-4-5@20250929",
    "foundry": "claude-sonnet-4-5",
}
"""A model id in each platform's form."""
_IDS: Final[dict[Tested, str]] = {"bedrock": "msg_bdrk_", "vertex": "msg_vrtx_", "foundry": "msg_"}


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


class _Chunks(httpx2.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


class PlatformAPI:
    """One platform's API, faked on the transport of the platform's real SDK client."""

    def __init__(self, platform: Tested, script: Iterable[JSON | str], *, max_retries: int = 2) -> None:
        self.platform: Tested = platform
        self.model = MODELS[platform]
        self.script = list(script)
        self.max_retries = max_retries
        self.requests: list[JSON] = []
        self.throttled = 0
        self.served = 0

    def client(self) -> Any:
        """The platform's SDK client with fake credentials, talking to this fake only."""
        http = httpx2.AsyncClient(transport=httpx2.MockTransport(self.handler))
        if self.platform == "bedrock":
            return anthropic.AsyncAnthropicBedrock(
                aws_access_key=AWS_KEY,
                aws_secret_key=AWS_SECRET,
                aws_region=AWS_REGION,
                max_retries=self.max_retries,
                http_client=http,
            )
        if self.platform == "vertex":
            return anthropic.AsyncAnthropicVertex(
                region=VERTEX_REGION,
                project_id=VERTEX_PROJECT,
                access_token=VERTEX_TOKEN,
                max_retries=self.max_retries,
                http_client=http,
            )
        return anthropic.AsyncAnthropicFoundry(
            resource=FOUNDRY_RESOURCE, api_key=FOUNDRY_KEY, max_retries=self.max_retries, http_client=http
        )

    async def handler(self, request: httpx2.Request) -> httpx2.Response:
        body: JSON = json.loads(request.content)
        stream = self._check(request, body)
        self.requests.append(body)
        if not self.script:
            return httpx2.Response(500, json={"message": "the test's script ran out"})
        item = self.script.pop(0)
        if item == THROTTLED:
            self.throttled += 1
            return self._throttled()
        assert isinstance(item, dict)
        self.served += 1
        message = {"id": f"{_IDS[self.platform]}{self.served:024d}", "model": self.model, **item}
        if stream:
            return self._stream(message)
        return httpx2.Response(200, json=parse_message(message, model=self.model).model_dump(mode="json"))

    def _check(self, request: httpx2.Request, body: JSON) -> bool:
        """The request is on the platform's path, framed and signed as the platform takes it;
        whether it asks for a stream."""
        assert request.method == "POST"
        url = request.url
        if self.platform == "bedrock":
            assert url.host == f"bedrock-runtime.{AWS_REGION}.amazonaws.com"
            model = self.model.replace(":", "%3A")
            assert url.raw_path.decode() in {
                f"/model/{model}/invoke",
                f"/model/{model}/invoke-with-response-stream",
                f"/model/{self.model}/invoke",
                f"/model/{self.model}/invoke-with-response-stream",
            }, url.raw_path
            assert isinstance(body["anthropic_version"], str)  # in the body, as Bedrock takes it
            assert "model" not in body
            assert "stream" not in body
            _check_sigv4(request)
            return url.path.endswith("-with-response-stream")
        if self.platform == "vertex":
            assert url.host == f"{VERTEX_REGION}-aiplatform.googleapis.com"
            prefix = f"/v1/projects/{VERTEX_PROJECT}/locations/{VERTEX_REGION}/publishers/anthropic/models/"
            assert url.path in {f"{prefix}{self.model}:rawPredict", f"{prefix}{self.model}:streamRawPredict"}
            assert request.headers["authorization"] == f"Bearer {VERTEX_TOKEN}"
            assert isinstance(body["anthropic_version"], str)  # in the body, as Vertex takes it
            assert "model" not in body
            return url.path.endswith(":streamRawPredict")
        assert url.host == f"{FOUNDRY_RESOURCE}.services.ai.azure.com"
        assert url.path == "/anthropic/v1/messages"
        assert request.headers["api-key"] == FOUNDRY_KEY
        assert body["model"] == self.model
        return bool(body.get("stream"))

    def _throttled(self) -> httpx2.Response:
        if self.platform == "bedrock":
            return httpx2.Response(
                429,
                headers={
                    "x-amzn-errortype": "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/",
                    "x-amzn-requestid": "0f4b7c2e-fake-4d6a-9a53-throttled000",
                },
                json={"message": "Too many requests, please wait before trying again."},
            )
        if self.platform == "vertex":
            return httpx2.Response(
                429,
                json={
                    "error": {
                        "code": 429,
                        "message": "Resource exhausted. Please try again later.",
                        "status": "RESOURCE_EXHAUSTED",
                    }
                },
            )
        return httpx2.Response(
            429,
            headers={"retry-after": "1", "apim-request-id": "fake-apim-request"},
            json={"error": {"code": "429", "message": "Rate limit is exceeded. Try again in 1 seconds."}},
        )

    def _stream(self, message: JSON) -> httpx2.Response:
        events = list(raw_events(parse_message(message, model=self.model)))
        if self.platform == "bedrock":
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
            return httpx2.Response(
                200,
                headers={
                    "content-type": "application/vnd.amazon.eventstream",
                    "x-amzn-requestid": "0f4b7c2e-fake-4d6a-9a53-stream000000",
                    "x-amzn-bedrock-content-type": "application/json",
                },
                stream=_Chunks([bedrock_chunk(event) for event in events]),
            )
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, stream=_Chunks([sse(e) for e in events])
        )


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


def _check_sigv4(request: httpx2.Request) -> None:
    """The request's SigV4 signature is the one AWS computes from the fake secret: the signed
    headers, the payload hash and the `bedrock` scope in `us-east-1`."""
    authorization = request.headers["authorization"]
    assert authorization.startswith(f"AWS4-HMAC-SHA256 Credential={AWS_KEY}/"), authorization
    assert f"/{AWS_REGION}/bedrock/aws4_request" in authorization
    signed = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
    assert "host" in signed
    assert "x-amz-date" in signed
    aws = AWSRequest(
        method=request.method,
        url=str(request.url),
        data=request.content,
        headers={name: request.headers[name] for name in signed},
    )
    aws.context["timestamp"] = request.headers["x-amz-date"]
    auth = SigV4Auth(Credentials(AWS_KEY, AWS_SECRET), "bedrock", AWS_REGION)
    signature = auth.signature(auth.string_to_sign(aws, auth.canonical_request(aws)), aws)
    assert authorization.endswith(f"Signature={signature}"), "the SigV4 signature does not verify"
