"""A run's provenance (the model and the hashes replay compares) and its effective model
settings (the loop's, a run's override, compaction and context editing merged)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import typing
from collections.abc import Mapping
from typing import Any, Final

from .._base.cache import cache_sha256
from .._base.model_settings import BETA_ONLY, settings_sha256
from .._base.route import route_data
from ..compaction import context_settings
from ..errors import ConfigurationError
from ..model import Model
from ..platforms import FEATURES, Platform
from ..records import Provenance
from ..settings import LoopSpec


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigurationError(message)


def provenance(spec: LoopSpec, platform: Platform = "anthropic") -> Provenance:
    """The model and hashes of what a run is made with, from its spec, and the platform its
    client runs on: replay compares them.

    Each hash is of canonical JSON (sorted keys): the system prompt, the tool manifest as the
    model and the approval gate see it (name, description, input_schema, requires_approval)
    and the policy's decisions (`Policy.fingerprint`, its hooks by qualified name).
    """
    manifest: list[dict[str, Any]] = [tool.model_dump(include=_MANIFEST) for tool in spec.tools]
    manifest.extend(spec.server_tools)  # after the loop's tools: a manifest without any is as before
    manifest = json.loads(json.dumps(manifest, default=str))
    return Provenance(
        model=spec.model,
        system_sha256=_sha256(spec.system or ""),
        tools_sha256=_sha256(json.dumps(manifest, sort_keys=True)),
        policy_sha256=_sha256(spec.policy.fingerprint()),
        tools=manifest,
        # What a failing tool does decides stops too: recorded with the policy (not in its hash).
        policy={**json.loads(spec.policy.fingerprint()), "on_tool_error": spec.policy.on_tool_error},
        budget=dataclasses.asdict(spec.budget),
        settings_sha256=settings_sha256(effective_settings(spec, spec.settings.data())),
        output_sha256=None
        if spec.output_schema is None
        else _sha256(json.dumps(spec.output_schema, sort_keys=True)),
        fallback_model=route_data(spec.fallback_model),  # one model: its name, as before routes
        version=spec.version,
        cache_sha256=cache_sha256(spec.cache),
        platform=platform,
    )


def field_text(provenance: Provenance, field: str) -> str:
    """A provenance field as replay's diff names it: a route of fallback models as `[a, b]`."""
    value: object = getattr(provenance, field)
    if isinstance(value, tuple):
        return f"[{', '.join(str(item) for item in typing.cast(tuple[object, ...], value))}]"
    return str(value)


def effective_settings(spec: LoopSpec, settings: Mapping[str, Any]) -> dict[str, Any]:
    """A run's request settings: `settings` with the spec's compaction and context editing
    edits (and their betas) merged into `context_management` (`compaction.context_settings`).

    Raises:
        ConfigurationError: `settings` already hold an edit of the same type.
    """
    return context_settings(settings, compaction=spec.compaction, context_editing=spec.context_editing)


def check_client(client: Model, settings: Mapping[str, object], platform: Platform = "anthropic") -> None:
    """A client that can send `settings`: the beta ones need `client.beta.messages.create`, and
    the client's platform must offer each feature they use (`boundloop.platforms.FEATURES`).

    Raises:
        ConfigurationError: it cannot, naming the platform and the feature.
    """
    features = FEATURES[platform]
    if settings.get("cache_control") and not features.automatic_cache:
        raise ConfigurationError(
            f"ModelSettings(cache_control=...): {features.title} ({platform}) has no automatic prompt "
            "caching (the top-level cache_control); leave it out: cache='auto' marks the last block "
            "there instead (docs/platforms.md)"
        )
    for name, feature in features.refused.items():
        _require(
            not settings.get(name),
            f"settings {name!r}: {features.title} ({platform}) does not offer {feature} (docs/platforms.md)",
        )
    beta = sorted(BETA_ONLY & set(settings))
    if beta:
        create = getattr(getattr(getattr(client, "beta", None), "messages", None), "create", None)
        _require(
            callable(create),
            f"settings {beta} go through client.beta.messages.create, which {client!r} does not have",
        )


_MANIFEST: Final = {"name", "description", "input_schema", "requires_approval"}
"""A tool's fields its provenance hash covers."""


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
