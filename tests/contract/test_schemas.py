"""The shipped contract schemas work outside `boundloop check`: plain jsonschema and editors."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, cast

import jsonschema
import pytest

import boundloop
from boundloop import Budget, ConfigurationError, LoopSpec
from boundloop.contract import CONTRACT_SCHEMA, POLICY_SCHEMA, load_contract
from scripts.contract_schema import schema_files
from tests.contract.test_contract import EXAMPLE, contract

JSON = dict[str, Any]


def _refs(node: object) -> list[str]:
    """Every `$ref` (and `$dynamicRef`) value anywhere in a schema document."""
    if isinstance(node, dict):
        found: list[str] = []
        for key, value in cast(JSON, node).items():
            if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                found.append(value)
            else:
                found += _refs(value)
        return found
    if isinstance(node, list):
        return [ref for item in cast(list[object], node) for ref in _refs(item)]
    return []


def _ids_below_root(node: object, root: bool = True) -> list[str]:
    """`$id`s of subschemas: each would rebase the `$ref`s under it for a validator, not an editor."""
    if isinstance(node, dict):
        items = cast(JSON, node)
        here = [] if root or not isinstance(items.get("$id"), str) else [items["$id"]]
        return here + [i for value in items.values() for i in _ids_below_root(value, root=False)]
    if isinstance(node, list):
        return [i for item in cast(list[object], node) for i in _ids_below_root(item, root=False)]
    return []


def _pointer(document: JSON, ref: str) -> object:
    """What a local `#/a/b` reference points to, following the JSON pointer by hand (KeyError if
    nothing): the way an editor's JSON service resolves a reference within the document."""
    node: Any = document
    for part in ref.removeprefix("#").split("/")[1:]:
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def test_plain_jsonschema_validates_a_contract_with_no_registry() -> None:
    """`jsonschema.validate(contract, schema)`, nothing else set up: no `Unresolvable`."""
    jsonschema.validate(contract(), CONTRACT_SCHEMA)
    jsonschema.validate(json.loads(EXAMPLE.read_text(encoding="utf-8")), CONTRACT_SCHEMA)
    jsonschema.validate(contract(policy="loop-policy.json"), CONTRACT_SCHEMA)


@pytest.mark.parametrize(
    "document",
    [
        pytest.param(contract(modle="claude-sonnet-4-6"), id="top-level"),
        pytest.param(contract(policy={"alowed": ["lookup"]}), id="inline-policy"),
        pytest.param(contract(budget={"max_steps": 4, "max_step": 2}), id="budget"),
        pytest.param(
            contract(tools=[{**contract()["tools"][0], "side_effects": True}]),
            id="tool",
        ),
        pytest.param(contract(system={"txt": "hi"}), id="system"),
    ],
)
def test_plain_jsonschema_rejects_a_misspelt_field(document: JSON) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, CONTRACT_SCHEMA)


def test_every_reference_is_local_and_resolves_within_the_document() -> None:
    """An editor's JSON service follows `#/...` within the document and fetches no `$id` host."""
    refs = _refs(CONTRACT_SCHEMA) + _refs(POLICY_SCHEMA)
    assert refs  # the walk finds the references there are
    for document in (CONTRACT_SCHEMA, POLICY_SCHEMA):
        assert _ids_below_root(document) == []
        for ref in _refs(document):
            assert ref.startswith("#/"), ref
            assert isinstance(_pointer(document, ref), dict), ref


def test_the_bundled_policy_schema_is_the_standalone_one() -> None:
    """`$defs/policy` is loop-policy.schema.json without its `$schema`, `$id` and `$defs`; those
    `$defs` are the contract's own, the same: the two cannot drift apart."""
    standalone = {
        key: value for key, value in POLICY_SCHEMA.items() if key not in ("$schema", "$id", "$defs")
    }
    assert CONTRACT_SCHEMA["$defs"]["policy"] == standalone
    for name, definition in POLICY_SCHEMA["$defs"].items():
        assert CONTRACT_SCHEMA["$defs"][name] == definition
    assert {"$ref": "#/$defs/policy"} in CONTRACT_SCHEMA["properties"]["policy"]["oneOf"]


def test_the_committed_schemas_are_generated_from_loop_spec() -> None:
    """The schema files are `LoopSpec`'s (scripts/contract-schema writes them), the eval
    fixture's budget `Budget`'s: the spec, the contract and the fixtures cannot drift apart."""
    folder = Path(boundloop.__file__).parent
    for name, text in schema_files().items():
        assert (folder / name).read_text(encoding="utf-8") == text, f"run scripts/contract-schema: {name}"


def test_a_contract_is_a_loop_spec_round_trip() -> None:
    """A contract holds its spec; its document (`LoopSpec.document`) keeps every setting; the
    spec's own JSON too."""
    path = EXAMPLE
    spec = load_contract(path).spec
    assert load_contract(spec.document()).spec == spec
    assert LoopSpec.from_document(spec.document()) == spec
    assert LoopSpec.model_validate_json(spec.model_dump_json()) == spec
    assert spec.budget == Budget(**json.loads(path.read_text(encoding="utf-8"))["budget"])


def test_a_small_contract_is_a_loop_spec_round_trip() -> None:
    spec = load_contract(contract()).spec
    assert spec.document() == load_contract(spec.document()).to_dict()
    assert load_contract(spec.document()).spec == spec


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"budget": {"max_steps": 0}}, "Budget.max_steps must be > 0, got 0"),
        ({"budget": {"max_steps": 2}, "policy": {"max_continuations": -1}}, "Policy.max_continuations"),
        ({"budget": {"max_steps": 2}, "max_tokens": 0}, "max_tokens must be a positive int, got 0"),
        ({"budget": None}, "a Budget is required: there is no unbounded loop"),
        ({"budget": {"max_steps": 2, "count_tokens": 1}}, "Budget.count_tokens must be True or False, got 1"),
        ({"budget": {"max_steps": 2}, "signals": {"end_turn": "not a name"}}, "signals.end_turn"),
        ({"budget": {"max_steps": 2}, "custom_handlers": ["a", "a"]}, "names must be unique"),
        ({"budget": {"max_steps": 2}, "modle": "x"}, "modle: Extra inputs are not permitted"),
    ],
)
def test_a_loop_spec_is_validated_once_with_configuration_errors(settings: JSON, message: str) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(message)):
        LoopSpec.of(model="claude-sonnet-4-6", **settings)
