"""The loop contract's and the loop policy's JSON Schemas, generated from `LoopSpec`, and the
eval fixture schema's budget, generated from `Budget`.

`scripts/contract-schema` runs this file, which writes them to boundloop/contract/*.schema.json
and boundloop/evals/fixture.schema.json (its `$defs/budget`; the rest of that file is written by
hand); tests/contract/test_schemas.py keeps the committed files equal to `schema_files()`. The
package ships the files and reads them; it never generates them.
"""

from __future__ import annotations

import json
import typing
from pathlib import Path
from typing import Any

from boundloop import LoopSpec, Policy
from boundloop._base.field_schema import TOOL_NAME_SCHEMA, field_schema
from boundloop.settings import CONTRACT_REQUIRED

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def contract_schema() -> dict[str, Any]:
    """The loop contract's JSON Schema, generated from `LoopSpec`: the committed
    loop-contract.schema.json (`scripts/contract-schema` writes it)."""
    generated = _plain(LoopSpec.model_json_schema(ref_template="#/$defs/{model}"))
    models = generated["$defs"]
    properties: dict[str, Any] = generated["properties"]
    for model in models.values():
        model.pop("description", None)  # a model's docstring is for Python readers
    tool = models["ToolSpec"]
    tool["properties"]["name"] = {"$ref": "#/$defs/tool_name"}
    properties["tools"]["items"] = {"$ref": "#/$defs/tool"}
    message = models["HistoryMessage"]
    message["properties"]["content"] = {"oneOf": message["properties"]["content"].pop("anyOf")}
    properties["history"]["items"] = message
    # The contract document's own spellings of three settings (see the module's docstring).
    properties["system"] = {
        "description": properties["system"]["description"],
        "type": "object",
        "additionalProperties": False,
        "minProperties": 1,
        "maxProperties": 1,
        "properties": {"text": {"type": "string"}, "file": {"type": "string", "minLength": 1}},
    }
    budget = properties["budget"]["properties"]
    for name in ("max_tool_output_chars", "count_tokens"):  # `Budget`'s, at the contract's top level
        properties[name] = budget.pop(name)
    policy = policy_schema()
    properties["policy"] = {
        "description": properties["policy"]["description"],
        "oneOf": [{"type": "string", "minLength": 1}, {"$ref": "#/$defs/policy"}],
    }
    properties["metrics"] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {"enabled": properties["metrics"]},
    }
    del policy["$schema"], policy["$id"], policy["$defs"]
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": "https://boundloop.dev/schemas/loop-contract.json",
        "title": "boundloop loop contract",
        "description": "A loop declared as data: model, system prompt, tools, the stop_reason -> "
        "signal handler map, budget, policy and metrics. See docs/contracts.md.",
        "type": "object",
        "additionalProperties": False,
        "required": list(CONTRACT_REQUIRED),
        "properties": {"$schema": {"type": "string"}, **properties},
        "$defs": {
            "tool_name": TOOL_NAME_SCHEMA,
            "tool": tool,
            "policy": policy,
            # `settings` (`ModelSettings`) and the SDK param types it is made of.
            **{
                name: _sorted_enums(model)
                for name, model in models.items()
                if name not in ("ToolSpec", "HistoryMessage")
            },
        },
    }


def policy_schema() -> dict[str, Any]:
    """The loop policy's JSON Schema, from `Policy`'s data fields: the committed
    loop-policy.schema.json, and the contract schema's `$defs/policy`."""
    fields = field_schema(Policy, {"$ref": "#/$defs/tool_name"})
    return {
        "$schema": SCHEMA_DIALECT,
        "$id": "https://boundloop.dev/schemas/loop-policy.json",
        "title": "boundloop loop policy",
        "description": "What the model may do, what needs a human, what counts as done, and what a "
        "failing tool does. See docs/contracts.md.",
        "type": "object",
        "additionalProperties": False,
        "properties": {"$schema": {"type": "string"}, **fields["properties"]},
        "$defs": {"tool_name": TOOL_NAME_SCHEMA},
    }


def _sorted_enums(node: object) -> Any:
    """The SDK's literal types in a stable order (pydantic's order of some varies per process)."""
    if isinstance(node, list):
        return [_sorted_enums(item) for item in node]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if not isinstance(node, dict):
        return node
    items = typing.cast(dict[str, Any], node)
    return {
        key: sorted(value, key=str) if key == "enum" else _sorted_enums(value) for key, value in items.items()
    }


def _plain(node: object) -> Any:
    """pydantic's schema as the contract's: no titles or defaults, an
    optional field as its type (a contract leaves it out rather than null), an enum alone."""
    if isinstance(node, list):
        return [_plain(item) for item in node]  # pyright: ignore[reportUnknownVariableType, reportUnknownArgumentType]
    if not isinstance(node, dict):
        return node
    items = typing.cast(dict[str, Any], node)
    options = items.get("anyOf")
    if isinstance(options, list):
        kept: list[Any] = [option for option in options if option != {"type": "null"}]  # pyright: ignore[reportUnknownVariableType]
        if len(kept) == 1:
            rest = {key: value for key, value in items.items() if key != "anyOf"}
            return _plain({**rest, **kept[0]})
    plain = {
        key: _plain(value)
        for key, value in items.items()
        if key not in ("title", "default") and not (key == "additionalProperties" and value is True)
    }
    patterns = plain.pop("patternProperties", None)
    if isinstance(patterns, dict):  # a constrained key: every key matches its pattern
        [(pattern, value)] = typing.cast(dict[str, Any], patterns).items()
        plain["propertyNames"] = {"pattern": pattern}
        plain["additionalProperties"] = value
    if "enum" in plain or "const" in plain:
        plain.pop("type", None)
    return plain


def budget_schema() -> dict[str, Any]:
    """`Budget`'s JSON Schema, every field (the contract moves two of them to its top level)."""
    generated = _plain(LoopSpec.model_json_schema(ref_template="#/$defs/{model}"))
    budget: dict[str, Any] = generated["properties"]["budget"]
    budget.pop("description", None)
    return budget


def fixture_schema() -> dict[str, Any]:
    """The eval fixture's JSON Schema: the committed one with its `$defs/budget` generated (a
    fixture's budget is a `Budget`, every field of it)."""
    fixture = json.loads((PACKAGE / FIXTURE).read_text(encoding="utf-8"))
    fixture["$defs"]["budget"] = budget_schema()
    return fixture


PACKAGE = Path(__file__).resolve().parents[1] / "boundloop"
"""Where the package keeps the schema files."""
FIXTURE = "evals/fixture.schema.json"


def schema_files() -> dict[str, str]:
    """The committed schema files' text, generated: path (in boundloop/) -> JSON."""
    return {
        "contract/loop-contract.schema.json": json.dumps(contract_schema(), indent=2) + "\n",
        "contract/loop-policy.schema.json": json.dumps(policy_schema(), indent=2) + "\n",
        FIXTURE: json.dumps(fixture_schema(), indent=2) + "\n",
    }


def write_schema_files() -> None:
    """Write the schema files (scripts/contract-schema runs this after a change to the spec)."""
    for name, text in schema_files().items():
        (PACKAGE / name).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    write_schema_files()
