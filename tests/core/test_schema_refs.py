"""A tool's schemas never retrieve anything: a `$ref` outside the schema fails when the tool is built."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from boundloop import ConfigurationError, Tool
from boundloop.contract import check_contract
from boundloop.tools import ToolInputError
from tests.contract.test_contract import contract

JSON = dict[str, Any]


def lookup(**arguments: Any) -> str:
    """A handler that is never called here."""
    return json.dumps(arguments)


def with_ref(ref: str) -> JSON:
    return {"type": "object", "properties": {"key": {"$ref": ref}}}


def test_a_file_ref_is_refused_when_the_tool_is_built_and_the_file_is_not_read(tmp_path: Path) -> None:
    """jsonschema's default registry opens `file://` when a call is validated: here the tool is not
    built, so no call can be validated against the file's content."""
    referenced = tmp_path / "key.json"
    referenced.write_text(json.dumps({"type": "string"}), encoding="utf-8")
    ref = referenced.as_uri()
    with pytest.raises(ConfigurationError) as caught:
        Tool(name="lookup", description="Look up.", input_schema=with_ref(ref), handler=lookup)
    assert "tool 'lookup'" in str(caught.value)
    assert ref in str(caught.value)


@pytest.mark.parametrize("field", ["input_schema", "output_schema"])
def test_an_http_ref_is_refused_when_the_tool_is_built(field: str) -> None:
    """The error comes at construction, before any call: nothing is fetched (`.invalid` never resolves,
    and no validation ever runs, so no request is even tried)."""
    ref = "http://schemas.invalid/key.json"
    schemas: JSON = {"input_schema": {"type": "object"}, field: with_ref(ref)}
    with pytest.raises(
        ConfigurationError, match=r"tool 'lookup': .*\$ref 'http://schemas\.invalid/key\.json'"
    ):
        Tool(name="lookup", description="Look up.", handler=lookup, **schemas)


def test_a_local_ref_that_points_nowhere_is_refused_when_the_tool_is_built() -> None:
    with pytest.raises(ConfigurationError, match=r"\$ref '#/\$defs/missing'"):
        Tool(name="lookup", description="Look up.", input_schema=with_ref("#/$defs/missing"), handler=lookup)


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param({**with_ref("#/$defs/key"), "$defs": {"key": {"type": "string"}}}, id="defs-pointer"),
        pytest.param(
            {**with_ref("#key"), "$defs": {"key": {"$anchor": "key", "type": "string"}}}, id="anchor"
        ),
        pytest.param(
            {
                **with_ref("https://example.com/key.json"),
                "$defs": {"key": {"$id": "https://example.com/key.json", "type": "string"}},
            },
            id="embedded-id",
        ),
    ],
)
def test_refs_within_the_schema_keep_working(schema: JSON) -> None:
    checked = Tool(name="lookup", description="Look up.", input_schema=schema, handler=lookup)
    assert checked.validate({"key": "k"}) == {"key": "k"}
    with pytest.raises(ToolInputError, match="key: 1 is not of type 'string'"):
        checked.validate({"key": 1})


def test_check_reports_a_ref_outside_the_schema() -> None:
    """`boundloop check` says so too, as a tool-schema problem of the field."""
    tools = [
        {
            "name": "lookup",
            "description": "Look up.",
            "input_schema": with_ref("file:///etc/passwd"),
            "output_schema": with_ref("http://schemas.invalid/out.json"),
        }
    ]
    problems = check_contract(contract(tools=tools))
    assert [(p.rule, p.where) for p in problems] == [
        ("tool-schema", "tools/0/input_schema"),
        ("tool-schema", "tools/0/output_schema"),
    ]
    assert "'file:///etc/passwd' does not resolve within the schema" in problems[0].message
