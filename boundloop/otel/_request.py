"""A model call's request and client as the GenAI conventions' attributes of its `chat` span.

Nothing here imports OpenTelemetry: the values are plain `str`, `bool`, `int`, `float` and lists
of `str`, which is what OpenTelemetry's `AttributeValue` allows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final, cast

if TYPE_CHECKING:
    from opentelemetry.util.types import AttributeValue

_NUMBERS: Final = {
    "temperature": "gen_ai.request.temperature",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
}
"""Request settings whose attribute is a double (`top_k` too, as the conventions type it)."""


def _integer(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _strings(value: object) -> list[str] | None:
    if isinstance(value, str) or not isinstance(value, Sequence):
        return None
    items = list(cast(Sequence[object], value))
    strings = [item for item in items if isinstance(item, str)]
    return strings if len(strings) == len(items) else None


def request_attributes(request: Mapping[str, object]) -> dict[str, AttributeValue]:
    """The `chat` span's attributes of a Messages API request (the keyword arguments of
    `messages.create`): the settings the GenAI conventions name, as the request sends them.

    `model`, `max_tokens` (after the budget's clamp: the value sent), `stop_sequences`,
    `temperature`, `top_p`, `top_k` (also when sent through `extra_body`, which the SDK merges
    into the body last, so its value wins), `stream`, an `output_config.format`
    (`gen_ai.output.type` `"json"`) and `service_tier` (`anthropic.request.service_tier`, the
    anthropic SDK's own name: the conventions have none for it). A key the request does not
    have, or a value of the wrong type, gives no attribute; nothing here raises.
    """
    attributes: dict[str, AttributeValue] = {}
    model = request.get("model")
    if isinstance(model, str):
        attributes["gen_ai.request.model"] = model
    max_tokens = _integer(request.get("max_tokens"))
    if max_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = max_tokens
    extra = request.get("extra_body")
    layers = [request, cast(Mapping[str, object], extra)] if isinstance(extra, Mapping) else [request]
    for layer in layers:
        stop = _strings(layer.get("stop_sequences"))
        if stop is not None:
            attributes["gen_ai.request.stop_sequences"] = stop
        for key, name in _NUMBERS.items():
            number = _number(layer.get(key))
            if number is not None:
                attributes[name] = number
    if request.get("stream") is True:
        attributes["gen_ai.request.stream"] = True
    output_config = request.get("output_config")
    if isinstance(output_config, Mapping) and cast(Mapping[str, object], output_config).get("format"):
        attributes["gen_ai.output.type"] = "json"
    tier = request.get("service_tier")
    if isinstance(tier, str):
        attributes["anthropic.request.service_tier"] = tier
    return attributes


def server_attributes(client: object) -> dict[str, AttributeValue]:
    """`server.address` and `server.port` of an SDK client, from its `base_url` (the port the
    scheme implies when the URL names none); none for a client without one (`ScriptedClient`)."""
    url = getattr(client, "base_url", None)
    host = getattr(url, "host", None)
    if not isinstance(host, str) or not host:
        return {}
    port = _integer(getattr(url, "port", None))
    if port is None:
        port = 80 if getattr(url, "scheme", None) == "http" else 443
    return {"server.address": host, "server.port": port}
