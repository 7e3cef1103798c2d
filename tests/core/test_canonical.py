"""The repeat history's call identity: the digest of canonical JSON, however it is computed."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from boundloop._core.validation import canonical
from boundloop.records import Turn
from boundloop.state import LoopState

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), _json_values, max_size=6))
def test_the_key_is_sorted_compact_json_of_the_input(tool_input: dict[str, Any]) -> None:
    """Any input: the key is the SHA-256 of `name NUL json.dumps(sort_keys, compact)`, so
    checkpoints keep their keys (and hold no copy of the input)."""
    expected = json.dumps(tool_input, sort_keys=True, separators=(",", ":"), default=str)
    assert canonical("lookup", tool_input) == hashlib.sha256(f"lookup\x00{expected}".encode()).hexdigest()


def test_key_order_does_not_change_the_identity() -> None:
    assert canonical("t", {"b": 1, "a": {"y": 2, "x": 1}}) == canonical("t", {"a": {"x": 1, "y": 2}, "b": 1})
    assert canonical("t", {"a": 1}) != canonical("u", {"a": 1})


def test_a_checkpoint_with_the_old_undigested_keys_reads_back_with_digests() -> None:
    """A state saved when the keys were `name NUL json` still finds its repeats once resumed."""
    state = LoopState(task_id="t", trace_id="x", goal="g", started_at=0.0)
    state.succeeded = {'lookup\x00{"key":"a"}': 0, canonical("lookup", {"key": "b"}): 1}
    state.turn = Turn(calls=[], keys=["lookup\x00{}"], answers=[])
    read = LoopState.from_json(state.to_json())
    assert read.succeeded == {canonical("lookup", {"key": "a"}): 0, canonical("lookup", {"key": "b"}): 1}
    assert read.turn is not None
    assert read.turn.keys == [canonical("lookup", {})]
