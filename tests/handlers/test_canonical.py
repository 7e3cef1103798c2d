"""The repeat history's call identity: canonical JSON, the same bytes however it is computed."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from boundloop.handlers._validation import canonical

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), _json_values, max_size=6))
def test_the_key_is_sorted_compact_json_of_the_input(tool_input: dict[str, Any]) -> None:
    """Any input: the key is `name NUL json.dumps(sort_keys, compact)`, so checkpoints keep their keys."""
    expected = json.dumps(tool_input, sort_keys=True, separators=(",", ":"), default=str)
    assert canonical("lookup", tool_input) == "lookup\x00" + expected


def test_key_order_does_not_change_the_identity() -> None:
    assert canonical("t", {"b": 1, "a": {"y": 2, "x": 1}}) == canonical("t", {"a": {"x": 1, "y": 2}, "b": 1})
    assert canonical("t", {"a": 1}) != canonical("u", {"a": 1})
