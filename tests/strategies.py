"""Hypothesis strategies: JSON values, tool input schemas (Draft 2020-12), and inputs for them."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

JSON = dict[str, Any]

PROPERTY_NAMES = ("a", "b", "c", "order_id")
"""Names the generated schemas declare; inputs also use names outside this set."""

json_scalars: st.SearchStrategy[Any] = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6)
)
"""Every JSON scalar: null, booleans, integers, finite floats, strings."""

json_values: st.SearchStrategy[Any] = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=8,
)
"""Any JSON value, nested a few levels deep."""

property_schemas: st.SearchStrategy[JSON] = st.sampled_from(
    [
        {"type": "string"},
        {"type": "string", "minLength": 2, "maxLength": 4},
        {"type": "string", "pattern": "^O-[0-9]+$"},
        {"type": "integer"},
        {"type": "integer", "minimum": 0, "maximum": 10},
        {"type": "number", "exclusiveMinimum": 0},
        {"type": "boolean"},
        {"type": "null"},
        {"type": ["string", "null"]},
        {"enum": ["a", "b", 1, None]},
        {"const": 3},
        {"type": "array", "items": {"type": "string"}, "maxItems": 2},
        {"type": "array", "prefixItems": [{"type": "integer"}], "items": False},
        {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
        {"anyOf": [{"type": "integer"}, {"type": "string", "maxLength": 1}]},
        {"not": {"type": "boolean"}},
    ]
)
"""Property schemas across the keywords a tool schema uses."""


@st.composite
def object_schemas(draw: st.DrawFn) -> JSON:
    """A tool input schema: an object with some properties, some required, maybe closed."""
    names = draw(st.lists(st.sampled_from(PROPERTY_NAMES), unique=True, max_size=len(PROPERTY_NAMES)))
    properties = {name: draw(property_schemas) for name in names}
    schema: JSON = {"type": "object", "properties": properties}
    required = draw(st.lists(st.sampled_from(names), unique=True)) if names else []
    if required:
        schema["required"] = required
    closed = draw(st.sampled_from([None, False, {"type": "integer"}]))
    if closed is not None:
        schema["additionalProperties"] = closed
    if draw(st.booleans()):
        schema["minProperties"] = draw(st.integers(min_value=0, max_value=2))
    return schema


def tool_inputs(schema: JSON) -> st.SearchStrategy[Any]:
    """Inputs for `schema`: mostly objects over its property names (valid or not), sometimes anything."""
    names = [*schema.get("properties", {}), "extra"]
    values = json_values | st.sampled_from(["O-12", "ab", 0, 3, 11, -1, 0.5, True, None, ["x"], {"x": 1}])
    objects = st.dictionaries(st.sampled_from(names), values, max_size=len(names))
    return objects | objects | objects | json_values
