"""`boundloop demo --live --platform bedrock|vertex|foundry`: the platform's client from its
environment variables, or one sentence naming what is missing (exit 2)."""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path
from typing import Any, ClassVar

import anthropic
import pytest

from boundloop.cli import main
from boundloop.cli._demo import Reach
from boundloop.cli.demo import SCRIPT
from tests.helpers import api_message
from tests.platform_api import AWS_KEY, AWS_REGION, AWS_SECRET

VARIABLES = (
    "ANTHROPIC_API_KEY",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_PROFILE",
    "AWS_BEARER_TOKEN_BEDROCK",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "CLOUD_ML_REGION",
    "ANTHROPIC_VERTEX_PROJECT_ID",
    "GOOGLE_APPLICATION_CREDENTIALS",
    "ANTHROPIC_FOUNDRY_API_KEY",
    "ANTHROPIC_FOUNDRY_RESOURCE",
    "ANTHROPIC_FOUNDRY_BASE_URL",
)


@pytest.fixture(autouse=True)
def no_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No platform's variables, and a home without ~/.aws or gcloud credentials files."""
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


@pytest.mark.parametrize(
    ("platform", "sentence"),
    [
        (
            "bedrock",
            "--live --platform bedrock needs a region (AWS_REGION or AWS_DEFAULT_REGION) and AWS "
            "credentials (AWS_ACCESS_KEY_ID or AWS_PROFILE or AWS_BEARER_TOKEN_BEDROCK or "
            "AWS_WEB_IDENTITY_TOKEN_FILE) for Amazon Bedrock (InvokeModel)",
        ),
        (
            "vertex",
            "--live --platform vertex needs a region (CLOUD_ML_REGION) and a project "
            "(ANTHROPIC_VERTEX_PROJECT_ID) and Google credentials (GOOGLE_APPLICATION_CREDENTIALS) "
            "for Google Vertex AI",
        ),
        (
            "foundry",
            "--live --platform foundry needs an API key (ANTHROPIC_FOUNDRY_API_KEY) and a resource "
            "(ANTHROPIC_FOUNDRY_RESOURCE or ANTHROPIC_FOUNDRY_BASE_URL) for Microsoft Foundry",
        ),
    ],
)
def test_without_credentials_the_demo_says_what_is_missing(
    platform: str, sentence: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--live", "--platform", platform, "--json"]) == 2
    captured = capsys.readouterr()
    assert " ".join(captured.err.split()) == f"boundloop: error: {sentence}"
    assert captured.out == ""


def test_a_credentials_file_stands_for_the_variables(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`aws configure`'s file gives the credentials: only the region is missing then."""
    (tmp_path / ".aws").mkdir()
    (tmp_path / ".aws" / "credentials").write_text("[default]\n")
    assert main(["demo", "--live", "--platform", "bedrock"]) == 2
    assert "needs a region (AWS_REGION or AWS_DEFAULT_REGION) for" in capsys.readouterr().err


class FoundryAPI(http.server.BaseHTTPRequestHandler):
    """A loopback Foundry resource: answers the demo's script on its Messages path."""

    script: ClassVar[list[dict[str, Any]]] = []
    requests: ClassVar[list[tuple[str, dict[str, str], dict[str, Any]]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        type(self).requests.append((self.path, dict(self.headers.items()), body))
        reply = json.dumps(api_message(type(self).script.pop(0), model=body["model"])).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output quiet."""


def test_the_demo_runs_on_foundry_from_its_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ANTHROPIC_FOUNDRY_API_KEY and ANTHROPIC_FOUNDRY_BASE_URL (here a loopback resource): the
    demo completes through `AsyncAnthropicFoundry`, its key in Foundry's `api-key` header."""
    FoundryAPI.script = list(SCRIPT)
    FoundryAPI.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FoundryAPI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("ANTHROPIC_FOUNDRY_API_KEY", "fake-foundry-key")
        monkeypatch.setenv("ANTHROPIC_FOUNDRY_BASE_URL", f"http://127.0.0.1:{server.server_port}/anthropic/")
        assert main(["demo", "--live", "--platform", "foundry", "--json"]) == 0
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    result = json.loads(capsys.readouterr().out)
    assert result["stop_reason"] == "completed"
    assert result["state"]["provenance"]["platform"] == "foundry"
    path, headers, body = FoundryAPI.requests[0]
    assert path == "/anthropic/v1/messages"
    assert headers["api-key"] == "fake-foundry-key"
    assert body["model"] == "claude-sonnet-4-6"
    assert body["cache_control"] == {"type": "ephemeral"}  # Foundry has automatic caching


def test_the_live_wrapper_keeps_its_clients_platform() -> None:
    """The demo wraps the client to watch for an unreachable API: the loop still sees Bedrock."""
    bedrock = anthropic.AsyncAnthropicBedrock(
        aws_access_key=AWS_KEY, aws_secret_key=AWS_SECRET, aws_region=AWS_REGION
    )
    assert Reach(bedrock).platform == "bedrock"  # type: ignore[arg-type]
