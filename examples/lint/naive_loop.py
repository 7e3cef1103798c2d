"""A hand-written agent loop with the mistakes `boundloop lint` finds: `boundloop lint examples/lint/`.

A specimen, never run. Each mistake is marked with the rule that flags it; clean_loop.py is
the same agent written well.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anthropic import Anthropic
from anthropic.types import Message, TextBlock, ToolParam, ToolUseBlock

MODEL = "claude-sonnet-4-5"


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


def run_tool(name: str, arguments: dict[str, Any]) -> str:
    """Run a tool by name."""
    try:
        return HANDLERS[name](**arguments)
    except Exception:  # BL003: the model gets an empty result and never learns the call failed
        return ""


def ask(client: Anthropic, question: str) -> str:
    """Loop until the model says it is done."""
    messages: list[Any] = [{"role": "user", "content": question}]
    while True:  # BL002: nothing stops a model that keeps calling tools
        response = client.messages.create(model=MODEL, max_tokens=1024, tools=TOOLS, messages=messages)
        messages.append({"role": "assistant", "content": response.content})
        text = "".join(block.text for block in response.content if isinstance(block, TextBlock))
        if "FINAL ANSWER" in text:  # BL001: control by prose
            return text
        for block in response.content:
            if isinstance(block, ToolUseBlock):
                output = run_tool(block.name, block.input)
                # BL007: one user message per result; BL006: no tool_use_id to pair it with its call
                messages.append({"role": "user", "content": [{"type": "tool_result", "content": output}]})


def resume(client: Anthropic, messages: list[Any], response: Message, output: str) -> str:
    """Continue a conversation with the output of the tool `response` asked for, run elsewhere."""
    call = next(b for b in response.content if b.type == "tool_use")  # BL004: the response may hold several
    messages.append(
        {
            "role": "assistant",  # BL005: tool results belong in a user message
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": output}],
        }
    )
    response = client.messages.create(model=MODEL, max_tokens=1024, tools=TOOLS, messages=messages)
    return "".join(block.text for block in response.content if isinstance(block, TextBlock))
