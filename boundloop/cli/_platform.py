"""`boundloop demo --live --platform ...`: the platform's SDK client, built from the platform's
usual environment variables, or one sentence saying which are missing."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Final

from ..platforms import FEATURES, Platform
from ._errors import CommandError

LIVE_PLATFORMS: Final[tuple[Platform, ...]] = ("anthropic", "bedrock", "vertex", "foundry")
"""The platforms `--live --platform` builds a client for."""

MODELS: Final[dict[Platform, str]] = {
    "bedrock": "global.anthropic.claude-sonnet-4-6",
    "vertex": "claude-sonnet-4-6",
    "foundry": "claude-sonnet-4-6",
}
"""The demo's model in each platform's form (on Foundry: the deployment name Foundry suggests)."""

_NEEDS: Final[dict[Platform, tuple[tuple[str, tuple[str, ...]], ...]]] = {
    "anthropic": (("an API key", ("ANTHROPIC_API_KEY",)),),
    "bedrock": (
        ("a region", ("AWS_REGION", "AWS_DEFAULT_REGION")),
        (
            "AWS credentials",
            ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "AWS_WEB_IDENTITY_TOKEN_FILE"),
        ),
    ),
    "vertex": (
        ("a region", ("CLOUD_ML_REGION",)),
        ("a project", ("ANTHROPIC_VERTEX_PROJECT_ID",)),
        ("Google credentials", ("GOOGLE_APPLICATION_CREDENTIALS",)),
    ),
    "foundry": (
        ("an API key", ("ANTHROPIC_FOUNDRY_API_KEY",)),
        ("a resource", ("ANTHROPIC_FOUNDRY_RESOURCE", "ANTHROPIC_FOUNDRY_BASE_URL")),
    ),
}
"""What each platform's client needs, and the environment variables any one of which gives it."""

_FILES: Final[dict[str, str]] = {
    "AWS credentials": "~/.aws/credentials",
    "Google credentials": "~/.config/gcloud/application_default_credentials.json",
}
"""A credentials file that stands for the variables (`aws configure`, `gcloud auth
application-default login`)."""


def live_model(platform: Platform, model: str, default: str) -> str:
    """The model `--live` sends on `platform`: the one given, else the demo's in the platform's form."""
    return MODELS.get(platform, model) if model == default else model


def platform_client(platform: Platform) -> Any:
    """The platform's async SDK client, configured from the environment.

    Raises:
        CommandError: a variable the platform's client needs is not set (exit 2).
    """
    missing = [
        f"{what} ({' or '.join(names)})"
        for what, names in _NEEDS[platform]
        if not any(os.environ.get(name) for name in names) and not _has_file(what)
    ]
    if missing:
        hint = " (or run the demo without --live)" if platform == "anthropic" else ""
        raise CommandError(
            f"--live --platform {platform} needs {' and '.join(missing)} for {FEATURES[platform].title}{hint}"
        )
    import anthropic
    from anthropic.lib.bedrock import AsyncAnthropicBedrock  # re-exported by `anthropic` with *
    from anthropic.lib.vertex import AsyncAnthropicVertex

    if platform == "bedrock":
        return AsyncAnthropicBedrock()
    if platform == "vertex":
        return AsyncAnthropicVertex()
    if platform == "foundry":
        return anthropic.AsyncAnthropicFoundry()
    return anthropic.AsyncAnthropic()


def _has_file(what: str) -> bool:
    path = _FILES.get(what)
    return path is not None and Path(path).expanduser().is_file()
