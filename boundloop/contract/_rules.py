"""The rules a loop contract keeps, as data: the compile report lists them as the checks passed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

RULES: Final[Mapping[str, str]] = {
    "schema": "the contract and its policy match their JSON Schemas (an unknown field is named)",
    "budget-required": "a budget with max_steps: there is no unbounded loop",
    "control-by-prose": "no field ends the loop on the model's text; control is the typed stop_reason",
    "tool-result-role": "a tool_result is only ever in a user message",
    "history": "the history is a valid transcript: every tool_use answered once, in the next user message",
    "unknown-handler": "every signal handler is built in, `unhandled_stop`, or declared in custom_handlers",
    "unhandled-signal": "every API stop_reason has an explicit handler (or `unhandled_stop`)",
    "signal-handler": "a built-in handler answers only its own stop_reason (a refusal is never a completion)",
    "tool-schema": "every tool has a valid JSON Schema of type object for its input (and a valid output "
    "one), its `$ref`s resolving within it",
    "allowed-and-forbidden": "no tool is both allowed and forbidden",
    "policy-conflict": "no forbidden tool is required evidence or gated by approval; evidence is allowed",
    "api-name": "every tool name is one the Messages API accepts: 1-64 of [a-zA-Z0-9_-]",
    "unknown-tool": "the policy's allowed, approval and evidence lists name declared tools",
    "duplicate-tool": "each tool is declared once",
    "file": "the files the contract names (policy, system prompt) exist and parse",
    "file-outside": "the files the contract names are under its folder (unless --allow-outside)",
    "number": "counts are whole numbers (1, not 1.0) and limits are finite",
    "mcp-server": "MCP servers have unique names and prefixes, and no declared tool is under a prefix",
    "mcp-secret": "no secret is written into the contract: an MCP header takes it from the environment",
}
"""Rule id -> what it guarantees."""
