"""The Messages API's rules for a request, checked in the tests independently of boundloop's own
check (`boundloop._core.invariant`): what the API answers 400 to.

`violations(requests, responses)` reads the requests a run sent (JSON, in order) and the
responses it was given (JSON bodies, in order: request `k + 1` followed response `k`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

JSON = dict[str, Any]
SERVER_CALLS = ("server_tool_use", "mcp_tool_use")


def violations(requests: Sequence[Mapping[str, Any]], responses: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every rule a request breaks, as `request k: problem`."""
    found: list[str] = []
    contents = [list(response.get("content") or []) for response in responses]
    for k, request in enumerate(requests):
        found += [f"request {k}: {problem}" for problem in _request(request, contents)]
        if k >= 1 and k - 1 < len(responses):
            container: object = responses[k - 1].get("container")
            expected = cast(JSON, container).get("id") if isinstance(container, dict) else None
            if expected is not None and request.get("container") != expected:
                found.append(f"request {k}: container {request.get('container')!r}, expected {expected!r}")
    return found


def _request(request: Mapping[str, Any], contents: list[list[Any]]) -> list[str]:
    problems: list[str] = []
    messages: list[Mapping[str, Any]] = list(request.get("messages") or [])
    if not messages or messages[0].get("role") != "user":
        problems.append("the transcript does not open with a user turn")
    position = 0  # assistant turns are responses' content, in the order received
    for index, message in enumerate(messages):
        content = message.get("content")
        if message.get("role") == "assistant":
            matches = [at for at in range(position, len(contents)) if contents[at] == content]
            if not matches:
                problems.append(
                    f"messages[{index}]: an assistant turn that is no response's content, in order"
                )
            else:
                position = matches[0] + 1
            continue
        if index > 0 and messages[index - 1].get("role") == "user":
            problems.append(f"messages[{index}]: two user turns in a row")
        if index > 0 and messages[index - 1].get("role") == "assistant":
            problems += [
                f"messages[{index}]: {p}" for p in _after(messages[index - 1].get("content"), content)
            ]
    if messages and messages[-1].get("role") == "assistant":
        blocks = list(messages[-1].get("content") or [])
        if any(block.get("type") == "tool_use" for block in blocks):
            problems.append("the request ends with an assistant turn whose tool_use is unanswered")
    return problems


def _after(previous: Any, content: Any) -> list[str]:
    """The rules of a user turn after an assistant turn."""
    blocks: list[JSON] = list(previous or [])
    answers: list[JSON] = [] if isinstance(content, str) else list(content or [])
    problems: list[str] = []
    calls = [block["id"] for block in blocks if block.get("type") == "tool_use"]
    if blocks and blocks[-1].get("type") in SERVER_CALLS and not calls:
        # With client calls in the turn, their results may follow: the API answers the server
        # call first in the next response (a tool search ending a turn with a client tool_use).
        call_id = blocks[-1].get("id")
        if not any(block.get("tool_use_id") == call_id for block in blocks):
            problems.append(f"a user turn after the unfinished {blocks[-1]['type']} {call_id!r}")
    head = answers[: len(calls)]
    if [block.get("type") for block in head] != ["tool_result"] * len(calls) or sorted(
        str(block.get("tool_use_id")) for block in head
    ) != sorted(calls):
        problems.append(f"tool_use {calls} not answered first, once each: {[b.get('type') for b in answers]}")
    if any(block.get("type") == "tool_result" for block in answers[len(calls) :]):
        problems.append("a tool_result that answers no tool_use of the turn before")
    return problems
