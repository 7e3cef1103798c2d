"""`boundloop demo --live --platform bedrock|vertex|foundry`: the platform's client from its
environment variables, or one sentence naming what is missing (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import pytest

from boundloop.cli import main
from boundloop.cli._demo import Reach
from boundloop.cli.demo import SCRIPT
from tests.platform_api import AWS_KEY, AWS_REGION, AWS_SECRET, FOUNDRY_KEY, PlatformAPI, platform_server

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


def test_the_demo_runs_on_foundry_from_its_environment(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ANTHROPIC_FOUNDRY_API_KEY and ANTHROPIC_FOUNDRY_BASE_URL (here a loopback resource): the
    demo completes through `AsyncAnthropicFoundry`, its key in Foundry's headers."""
    api = PlatformAPI("foundry", SCRIPT, model="claude-sonnet-4-6")
    with platform_server() as server:
        server.api = api
        monkeypatch.setenv("ANTHROPIC_FOUNDRY_API_KEY", FOUNDRY_KEY)
        monkeypatch.setenv("ANTHROPIC_FOUNDRY_BASE_URL", f"{server.url}/anthropic/")
        assert main(["demo", "--live", "--platform", "foundry", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert api.refused == []
    assert result["stop_reason"] == "completed"
    assert result["state"]["provenance"]["platform"] == "foundry"
    assert api.served == len(SCRIPT)
    assert api.requests[0]["cache_control"] == {"type": "ephemeral"}  # Foundry has automatic caching


def test_the_live_wrapper_keeps_its_clients_platform() -> None:
    """The demo wraps the client to watch for an unreachable API: the loop still sees Bedrock."""
    bedrock = anthropic.AsyncAnthropicBedrock(
        aws_access_key=AWS_KEY, aws_secret_key=AWS_SECRET, aws_region=AWS_REGION
    )
    assert Reach(bedrock).platform == "bedrock"  # type: ignore[arg-type]
