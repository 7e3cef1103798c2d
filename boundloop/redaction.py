"""Redaction: secrets never reach what a run records (trace, errors, stop details).

The default patterns cover Anthropic, OpenAI, AWS, Google, GitHub and Slack keys and bearer
tokens; `AgentLoop(redaction=Redaction(patterns=[...]))` adds yours, and `Redaction(hook=fn)`
runs your own function after them. `boundloop.events.redact_strings` applies a `Redactor` to
every string of JSON values, the keys of objects included.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from typing import Final, cast, final

from .errors import ConfigurationError

__all__ = [
    "DEFAULT_PATTERNS",
    "REDACTED",
    "Redaction",
    "Redactor",
    "recorded_call_id",
]

DEFAULT_PATTERNS: Final[tuple[str, ...]] = (
    r"sk-ant-[A-Za-z0-9_\-]{8,}",  # Anthropic
    r"sk-(?:proj-)?[A-Za-z0-9_\-]{20,}",  # OpenAI
    r"(?:AKIA|ASIA)[0-9A-Z]{16}",  # AWS access key ids
    r"(?i:aws_secret_access_key)\s*[=:]\s*\S+",  # AWS secret keys, as written in config
    r"AIza[0-9A-Za-z_\-]{35}",  # Google API keys
    r"gh[pousr]_[A-Za-z0-9]{20,}",  # GitHub tokens
    r"xox[abposr]-[A-Za-z0-9\-]{10,}",  # Slack tokens
    r"(?i:bearer)\s+[A-Za-z0-9._~+/\-]{8,}=*",  # bearer tokens
)
REDACTED: Final = "[REDACTED]"


_GLOBAL_FLAGS: Final = re.compile(r"^\(\?([aiLmsux]+)\)")


def _scoped(pattern: object) -> str:
    """A pattern's source with its flags scoped to it, so patterns combine into one expression."""
    if isinstance(pattern, re.Pattern):
        flags = "".join(
            letter
            for letter, flag in (("i", re.IGNORECASE), ("m", re.MULTILINE), ("s", re.DOTALL))
            if cast(re.Pattern[str], pattern).flags & flag
        )
        source = str(cast(re.Pattern[str], pattern).pattern)
        return f"(?{flags}:{source})" if flags else source
    if not isinstance(pattern, str):
        return ""
    found = _GLOBAL_FLAGS.match(pattern)
    return pattern if found is None else f"(?{found.group(1)}:{pattern[found.end() :]})"


@final
@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Redaction:
    """What a loop redacts: `AgentLoop(redaction=Redaction(...))` (docs/security.md)."""

    patterns: Iterable[str | re.Pattern[str]] = ()
    """Regular expressions of your own secrets, added to the default ones."""
    hook: Callable[[str], str] | None = None
    """Applied, after the patterns, to everything a run records (the events, `state.errors`,
    stop details); the transcript and observations stay verbatim in the state."""
    checkpoints: bool = False
    """Save checkpoints with every string redacted: the transcript, observations and pending
    approvals too (a resumed run continues from them): `LoopSpec.redact_checkpoints`."""


@final
class Redactor:
    """The patterns and hook of one loop, compiled once into one expression."""

    __slots__ = ("_hook", "_pattern")

    def __init__(
        self, patterns: Iterable[str | re.Pattern[str]] = (), hook: Callable[[str], str] | None = None
    ):
        """Compile the default patterns and `patterns` into one expression.

        Raises:
            ConfigurationError: a pattern does not compile, or `hook` is not callable.
        """
        sources: list[str] = list(DEFAULT_PATTERNS)
        for pattern in patterns:
            source = _scoped(pattern)
            if not source:
                raise ConfigurationError(f"Redaction.patterns takes regular expressions, got {pattern!r}")
            try:
                re.compile(source)
            except re.error as exc:
                raise ConfigurationError(f"redact pattern {source!r} does not compile: {exc}") from None
            sources.append(source)
        if hook is not None and not callable(hook):
            raise ConfigurationError(f"redact must be a callable taking and returning a str, got {hook!r}")
        self._pattern = re.compile("|".join(f"(?:{source})" for source in sources))
        self._hook = hook

    def __call__(self, text: str) -> str:
        """`text` with every secret replaced by `[REDACTED]`, then the hook applied."""
        text = self._pattern.sub(REDACTED, text)
        return text if self._hook is None else self._hook(text)


_API_ID = re.compile(r"(?:toolu|srvtoolu)_[A-Za-z0-9]{1,64}")
"""The shape of the ids the API gives tool_use blocks."""


def recorded_call_id(tool_use_id: str, redact: Callable[[str], str]) -> str:
    """A tool_use id as the trace records it: the API's own ids as they are, anything else redacted."""
    return tool_use_id if _API_ID.fullmatch(tool_use_id) else redact(tool_use_id)
