"""The fake Messages API for budget pools: `count_tokens`, exact billing, and a two-call run.

A request's input is billed at its count (`counted`: 20 tokens a message, what `count_tokens`
answers) and its output at all of its `max_tokens`, so every call costs exactly the worst case
it reserved: a pool that let one request through uncovered would be found past its ceiling.
A request whose transcript has no tool result yet is answered with a `lookup` call, one after
it with the answer, so runs can be served in any order, concurrently. Each bill is recorded in
whole nanodollars (claude-sonnet-4-6: $3 and $15 per million tokens).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Final

import httpx2

from tests.fake_api import JSON, FakeAPI, message, text_block, tool_use_block

INPUT_NUSD: Final = 3_000
OUTPUT_NUSD: Final = 15_000
"""claude-sonnet-4-6's price per token, in nanodollars."""


def counted(body: JSON) -> int:
    """The fake's token count of a request: what `count_tokens` answers and what it bills."""
    return 20 * len(body["messages"])


def worst_nusd(body: JSON) -> int:
    """A request's worst case, which is also what the fake bills for it."""
    return counted(body) * INPUT_NUSD + int(body["max_tokens"]) * OUTPUT_NUSD


class PoolAPI(FakeAPI):
    """The fake Messages API with `count_tokens`, billing every request its worst case.

    Args:
        check: called with each request's body as it arrives, before it is answered (the
            guarantee test reads the pool's store there).
        tool_input: the `lookup` call's input (default `{"key": "k"}`).
    """

    def __init__(
        self, check: Callable[[JSON], None] | None = None, *, tool_input: JSON | None = None
    ) -> None:
        super().__init__()
        self.tool_input = {"key": "k"} if tool_input is None else tool_input
        self.billed: list[int] = []
        """Each answered request's bill, in nanodollars."""
        self.check = check

    async def handler(self, request: httpx2.Request) -> httpx2.Response:
        """Answer `count_tokens`, or a model call (see the class)."""
        body: JSON = json.loads(request.content)
        if request.url.path == "/v1/messages/count_tokens":
            return httpx2.Response(200, json={"input_tokens": counted(body)})
        self.requests.append(body)
        number = len(self.requests)
        if self.check is not None:
            self.check(body)
        answered = '"type": "tool_result"' in json.dumps(body["messages"])
        if answered:
            reply = message([text_block("the answer")], output_tokens=body["max_tokens"], n=number)
        else:
            call = tool_use_block(f"toolu_{number}", "lookup", self.tool_input)
            reply = message([call], "tool_use", output_tokens=body["max_tokens"], n=number)
        reply["usage"]["input_tokens"] = counted(body)
        self.billed.append(worst_nusd(body))
        return httpx2.Response(200, json=reply, headers={"request-id": f"req_{number:04d}"})
