"""A run's `ModelSettings` in its requests: the parameters they add, the route, the count.

`build_request` (propose.py) adds `settings_params(...)` to every request. Settings only the
beta API takes send the request through `client.beta.messages.create`, whose `BetaMessage` is
read back as the `Message` the regular endpoint gives for the same JSON.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping
from typing import Any, cast

import anthropic
from anthropic.types import Message

from .._base.model_settings import BETA_ONLY, MIN_THINKING_BUDGET
from ..model import Model


def settings_params(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of `messages.create` a run's settings (as JSON) add."""
    params = {key: value for key, value in settings.items() if key != "output_config"}
    config = output_config(settings)
    if config is not None:
        params["output_config"] = config
    return params


def output_config(
    settings: Mapping[str, Any], *, format: Mapping[str, Any] | None = None
) -> dict[str, Any] | None:
    """The request's `output_config`: the settings' (effort, ...), with `format` when given
    (structured output's JSON schema) in place of theirs; None: none to send."""
    config = dict(cast(Mapping[str, Any], settings.get("output_config") or {}))
    if format is not None:
        config["format"] = dict(format)
    return config or None


def uses_beta(settings: Mapping[str, Any]) -> bool:
    """Whether the settings need `client.beta.messages.create`."""
    return not BETA_ONLY.isdisjoint(settings)


def fit_thinking(request: dict[str, Any]) -> None:
    """Keep an enabled thinking budget below the request's `max_tokens` (clamped to what the
    budget has left): lowered to `max_tokens - 1`, or thinking off when that is below the
    API's minimum. The API refuses a budget not below `max_tokens`."""
    thinking = cast(Mapping[str, Any], request.get("thinking") or {})
    if thinking.get("type") != "enabled":
        return
    limit = int(request["max_tokens"]) - 1
    if int(thinking["budget_tokens"]) <= limit:
        return
    if limit >= MIN_THINKING_BUDGET:
        request["thinking"] = {**thinking, "budget_tokens": limit}
    else:
        request["thinking"] = {"type": "disabled"}


def messages_of(client: Model, *, beta: bool) -> Any:
    """`client.messages`, or `client.beta.messages` (checked at construction to exist)."""
    return cast(Any, client).beta.messages if beta else client.messages


def for_count(request: Mapping[str, Any], *, beta: bool) -> dict[str, Any]:
    """The request's parameters `messages.count_tokens` (or the beta one) takes, from its
    signature in the installed SDK."""
    accepted = _count_parameters(beta)
    # `extra_body` is left out: its keys (temperature, ...) are the call's, not the count's.
    return {key: value for key, value in request.items() if key in accepted and key != "extra_body"}


@functools.cache
def _count_parameters(beta: bool) -> frozenset[str]:
    from anthropic.resources.beta.messages import AsyncMessages as BetaMessages
    from anthropic.resources.messages import AsyncMessages

    method = BetaMessages.count_tokens if beta else AsyncMessages.count_tokens
    return frozenset(inspect.signature(method).parameters) - {"self"}


def as_message(response: object) -> object:
    """A beta endpoint's `BetaMessage` as the `Message` of the same JSON; anything else as is."""
    if isinstance(response, Message) or not isinstance(response, anthropic.BaseModel):
        return response
    fields: dict[str, Any] = response.to_dict(warnings=False)
    return Message.model_construct(**fields)
