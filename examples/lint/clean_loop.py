"""A hand-written agent loop done right: `boundloop lint examples/lint/clean_loop.py` finds nothing.

Bounded by `max_steps`, routed on `stop_reason`, every tool_use block answered in one user
message, each result carrying its `tool_use_id`, and a failing tool reported to the model as
an `is_error` result.
"""

from __future__ import annotations

from collections.abc import Callable

from anthropic import Anthropic
from anthropic.types import MessageParam, TextBlock, ToolParam, ToolResultBlockParam, ToolUseBlock

MODEL = "claude-sonnet-4-5"
MAX_STEPS = 10


def get_weather(city: str) -> str:
    """A tool: the weather in `city`."""
    return f"Sunny in {city}."


HANDLERS: dict[str, Callable[..., str]] = {"get_weather": get_weather}
TOOLS: list[ToolParam] = [
    {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    }
]


def error_result(call: ToolUseBlock, error: str) -> ToolResultBlockParam:
    """A failed call, told to the model so that it can recover."""
    return {"type": "tool_result", "tool_use_id": call.id, "content": error, "is_error": True}


def run_tool(call: ToolUseBlock) -> ToolResultBlockParam:
    """Run one tool call; an unknown tool or a failure becomes an `is_error` result."""
    handler = HANDLERS.get(call.name)
    if handler is None:
        return error_result(call, f"unknown tool: {call.name}")
    try:
        output = handler(**call.input)
    except Exception as exc:
        return error_result(call, f"{type(exc).__name__}: {exc}")
    return {"type": "tool_result", "tool_use_id": call.id, "content": output}


def ask(client: Anthropic, question: str, *, max_steps: int = MAX_STEPS) -> str:
    """Answer `question`, calling tools for at most `max_steps` model turns."""
    messages: list[MessageParam] = [{"role": "user", "content": question}]
    for _step in range(max_steps):
        response = client.messages.create(model=MODEL, max_tokens=1024, tools=TOOLS, messages=messages)
        messages.append({"role": "assistant", "content": response.content})
        if response.stop_reason == "end_turn":
            return "".join(block.text for block in response.content if isinstance(block, TextBlock))
        if response.stop_reason != "tool_use":
            raise RuntimeError(f"the model stopped on {response.stop_reason}")
        calls = [block for block in response.content if isinstance(block, ToolUseBlock)]
        messages.append({"role": "user", "content": [run_tool(call) for call in calls]})
    raise RuntimeError(f"no answer after {max_steps} steps")
