"""Mocked tools: each call of a tool takes the fixture's next result for it.

Calls of one batch run concurrently, so the order in which handlers start is not the
block order. The `tool_call` trace event, emitted before the batch starts, lists the calls
that will run in block order: each call's first attempt is given its result then; a retry
takes the next result when it happens. The event records ids the API did not make
redacted, so they are matched to the raw ids of the response the model script served.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, final

import anyio
from anthropic.types import Message

from .._core import Cut
from ..events import Event, ToolStarted
from ..redaction import recorded_call_id
from ..tools import Handler, RetryableToolError, ToolContext

DEFAULT_TIMEOUT_S = 0.05
"""How long a mocked `timeout` result takes when the fixture sets no timeout."""


class MockedToolError(Exception):
    """A mocked tool's `error` result."""


class MockExhausted(Exception):
    """A call beyond a tool's mocked results: a fixture error, reported as such."""


@final
class Mocks:
    """The mocked results of one run, handed out in call order."""

    def __init__(
        self,
        results: Mapping[str, Sequence[Mapping[str, Any]]],
        shown: Mapping[str, str],
        cut: Cut | None = None,
    ) -> None:
        self._results = results
        self.cut = cut
        """The case's cut (`Case.cut`): a call past a tool's results, or the model call past the
        script, cuts the run there (None: a fixture error)."""
        self._shown = shown
        self._next: dict[str, int] = {}
        self._given: dict[str, int] = {}
        """A batch's first attempts, by tool_use id: the index of their result."""
        self._served: list[tuple[str, str]] = []
        """(tool, tool_use id) of each tool_use block of the last response served."""
        self.redact: Callable[[str], str] = str
        """The loop's redactor, to match the ids the trace records to the raw ones."""
        self.problems: list[str] = []
        """Fixture errors found while running: calls beyond the mocked results."""

    def on_event(self, event: Event) -> None:
        """Give each call of a starting batch its result index, in block order."""
        if not isinstance(event, ToolStarted):
            return
        cursor = 0
        for call in event.calls:
            tool, recorded = call.tool, call.tool_use_id
            raw = recorded
            for position in range(cursor, len(self._served)):
                name, block_id = self._served[position]
                if name == tool and recorded_call_id(block_id, self.redact) == recorded:
                    raw, cursor = block_id, position + 1
                    break
            self._given[raw] = self._take(tool)

    def serve(self, message: Message) -> Message:
        """Note the tool_use blocks of a response the model script serves, and return it."""
        self._served = [(block.name, block.id) for block in message.content if block.type == "tool_use"]
        return message

    def _take(self, tool: str) -> int:
        index = self._next.get(tool, 0)
        self._next[tool] = index + 1
        return index

    def handler(self, tool: str) -> Handler:
        """The handler of one mocked tool."""

        async def mocked(boundloop_mock_context: ToolContext, **_: object) -> object:
            index = self._given.pop(boundloop_mock_context.tool_use_id, None)
            if index is None:  # a retry: the next result
                index = self._take(tool)
            results = self._results.get(tool, ())
            if index >= len(results) and self.cut is not None:
                await self.cut.reached()  # the recorded run was cut while this call ran
            if index >= len(results):
                name = self._shown.get(tool, tool)
                problem = (
                    f"mocked_tools: {name!r} was called {index + 1} times; the fixture has "
                    f"{len(results)} result{'' if len(results) == 1 else 's'} for it"
                )
                self.problems.append(problem)
                raise MockExhausted(problem)
            return await _play(results[index])

        return mocked


def mocked_server(servers: Sequence[Mapping[str, Any]], tool: str) -> Mapping[str, Any] | None:
    """The declared MCP server (a fixture's `mcp_servers`) a mocked tool stands in for: the one
    whose prefix starts its name. An eval starts no server: its mocks replace it."""
    for server in servers:
        prefix: str | None = server.get("prefix")
        if prefix and tool.startswith(prefix) and len(tool) > len(prefix):
            return server
    return None


async def _play(result: Mapping[str, Any]) -> object:
    status = result["status"]
    if status == "ok":
        return copy.deepcopy(result["output"])
    if status == "error":
        raise MockedToolError(str(result.get("error", "mocked error")))
    if status == "retryable_error":
        raise RetryableToolError(
            str(result.get("reason", "mocked retryable error")),
            retry_after_s=float(result.get("retry_after_s", 0.0)),
        )
    await anyio.sleep_forever()  # "timeout": the tool's timeout cancels the call
    raise AssertionError("unreachable")  # pragma: no cover
