"""The model seam: the `Model` protocol, the one method of a client the loop calls."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from anthropic.types import Message, MessageTokensCount

__all__ = [
    "MessagesAPI",
    "Model",
    "TokenCounter",
]


class MessagesAPI(Protocol):
    """The one method the loop calls: `messages.create(**request) -> Message`."""

    @property
    def create(self) -> Callable[..., Awaitable[Message]]: ...


class Model(Protocol):
    """Anything with `messages.create`: `anthropic.AsyncAnthropic` or `ScriptedClient`."""

    @property
    def messages(self) -> MessagesAPI: ...


class TokenCounter(Protocol):
    """`messages.count_tokens`, which `Budget(count_tokens=True)` makes the loop call before each request."""

    @property
    def count_tokens(self) -> Callable[..., Awaitable[MessageTokensCount]]: ...
