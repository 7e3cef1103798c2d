"""Setup errors: the model call failed because the loop is set up wrong, not because of the run.

No API key, a key the API refuses, a model that does not exist: a run cannot succeed until its
owner changes the setup, so these leave `run()` as `SetupError` (a `ConfigurationError`) with
one sentence, instead of ending the run `failed` like a transient API error. Each is told from
typed facts: the SDK's error class and status, and the client's own credential attributes.
"""

from __future__ import annotations

import difflib
import typing

import anthropic

from ..errors import SetupError


def _known_models() -> list[str]:
    """The model ids the installed SDK lists (`anthropic.types.Model`)."""
    names: list[str] = []
    for arg in typing.get_args(anthropic.types.Model):
        if typing.get_origin(arg) is typing.Literal:
            names += [str(name) for name in typing.get_args(arg)]
    return names


def _without_credentials(client: object) -> bool:
    """An SDK client with neither an API key nor an auth token (nor an auth header of its own)."""
    if not isinstance(client, anthropic.AsyncAnthropic | anthropic.Anthropic):
        return False
    headers = {name.lower() for name in client.default_headers}
    return (
        client.api_key is None and client.auth_token is None and not {"x-api-key", "authorization"} & headers
    )


def setup_error(exc: BaseException, client: object, model: str) -> SetupError | None:
    """The `SetupError` a failed model call means, or None when it is not a setup error."""
    if isinstance(exc, TypeError) and _without_credentials(client):
        return SetupError("ANTHROPIC_API_KEY is not set: the client has no API key or auth token")
    if isinstance(exc, anthropic.AuthenticationError):
        return SetupError(f"the API refused the API key ({exc.status_code}): check ANTHROPIC_API_KEY")
    if isinstance(exc, anthropic.NotFoundError):  # the one route the loop calls exists: the model does not
        close = difflib.get_close_matches(model, _known_models(), n=1)
        hint = f"; did you mean {close[0]}?" if close else ""
        return SetupError(f"model {model!r} does not exist{hint}")
    return None
