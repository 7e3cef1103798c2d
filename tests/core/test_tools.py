"""The tool layer: `@tool` schemas from type hints, `Tool(...)` with a JSON schema, and validation."""

from __future__ import annotations

import inspect
import typing
from typing import Any, Literal, Optional

import jsonschema
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from boundloop import ConfigurationError, Tool, ToolContext, tool
from boundloop.tools import ToolInputError
from tests.strategies import object_schemas, tool_inputs

JSON = dict[str, Any]

CONTEXT = ToolContext(
    task_id="task", trace_id="trace", step=1, tool_use_id="toolu_1", idempotency_key="task:1:toolu_1"
)

ORDER_SCHEMA: JSON = {
    "type": "object",
    "properties": {
        "qty": {"type": "integer", "minimum": 1},
        "items": {"type": "array", "items": {"type": "string"}},
        "address": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
    "required": ["qty"],
    "additionalProperties": False,
}


class Address(pydantic.BaseModel):
    """A nested model in a tool's parameters."""

    city: str
    postcode: str | None = None


def echo(**kwargs: Any) -> JSON:
    """A handler for explicit-schema tools: returns its arguments."""
    return kwargs


def explicit(**overrides: Any) -> Tool:
    """A Tool with an explicit schema, any argument overridden."""
    options: JSON = {
        "name": "place_order",
        "description": "Place an order.",
        "input_schema": ORDER_SCHEMA,
        "handler": echo,
    }
    options.update(overrides)
    return Tool(**options)


# -- @tool --------------------------------------------------------------------------------


async def test_async_function_becomes_a_tool_named_after_it() -> None:
    """@tool on an async function takes the name from the function and the description from the docstring."""

    @tool
    async def read_order(order_id: str) -> JSON:
        """Read one order by id."""
        return {"id": order_id}

    assert isinstance(read_order, Tool)
    assert read_order.to_param() == {
        "name": "read_order",
        "description": "Read one order by id.",
        "input_schema": {
            "type": "object",
            "properties": {"order_id": {"title": "Order Id", "type": "string"}},
            "required": ["order_id"],
            "additionalProperties": False,
        },
    }
    assert (read_order.side_effect, read_order.timeout_s, read_order.requires_approval) == (
        False,
        None,
        False,
    )
    assert await read_order.invoke(read_order.validate({"order_id": "O-1"}), CONTEXT) == {"id": "O-1"}


async def test_sync_function_becomes_a_tool_that_is_awaited_like_an_async_one() -> None:
    """@tool on a sync function builds the same kind of Tool, and invoke() returns its value."""

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers.

        Both are required.
        """
        return a + b

    assert add.name == "add"
    assert add.description == "Add two integers.\n\nBoth are required."
    assert add.input_schema["required"] == ["a", "b"]
    assert await add.invoke(add.validate({"a": 2, "b": 3}), CONTEXT) == 5


def test_schema_from_type_hints_covers_defaults_optional_lists_literals_and_nested_models() -> None:
    """Defaults, Optional, list[str], Literal and a nested pydantic model all land in the JSON schema."""

    @tool
    def ship(
        order_id: str,
        address: Address,
        items: list[str],
        speed: Literal["standard", "express"] = "standard",
        note: Optional[str] = None,  # noqa: UP045 - the Optional spelling is what is under test
        quantity: int = 1,
    ) -> str:
        """Ship an order."""
        return order_id

    assert ship.input_schema == {
        "$defs": {
            "Address": {
                "description": "A nested model in a tool's parameters.",
                "properties": {
                    "city": {"title": "City", "type": "string"},
                    "postcode": {
                        "anyOf": [{"type": "string"}, {"type": "null"}],
                        "default": None,
                        "title": "Postcode",
                    },
                },
                "required": ["city"],
                "title": "Address",
                "type": "object",
            }
        },
        "additionalProperties": False,
        "properties": {
            "order_id": {"title": "Order Id", "type": "string"},
            "address": {"$ref": "#/$defs/Address"},
            "items": {"items": {"type": "string"}, "title": "Items", "type": "array"},
            "speed": {
                "default": "standard",
                "enum": ["standard", "express"],
                "title": "Speed",
                "type": "string",
            },
            "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Note"},
            "quantity": {"default": 1, "title": "Quantity", "type": "integer"},
        },
        "required": ["order_id", "address", "items"],
        "type": "object",
    }
    jsonschema.Draft202012Validator.check_schema(ship.input_schema)
    arguments = ship.validate({"order_id": "O-1", "address": {"city": "Lyon"}, "items": ["a"]})
    assert arguments == {
        "order_id": "O-1",
        "address": Address(city="Lyon"),
        "items": ["a"],
        "speed": "standard",
        "note": None,
        "quantity": 1,
    }


def test_decorator_options_are_kept_on_the_tool() -> None:
    """@tool(name=, description=, timeout_s=, side_effect=, requires_approval=) sets each option."""

    @tool(
        name="issue-refund",
        description="Refund an order.",
        timeout_s=2.5,
        side_effect=True,
        requires_approval=True,
    )
    async def refund(order_id: str, ctx: ToolContext) -> str:
        """Not this docstring."""
        return ctx.idempotency_key

    assert refund.name == "issue-refund"
    assert refund.description == "Refund an order."
    assert (refund.timeout_s, refund.side_effect, refund.requires_approval) == (2.5, True, True)
    assert refund.input_schema["properties"] == {"order_id": {"title": "Order Id", "type": "string"}}


async def test_a_tool_context_parameter_is_left_out_of_the_schema_and_passed_at_call_time() -> None:
    """The ToolContext parameter is not part of the schema; invoke() hands the call's context to it."""

    @tool(side_effect=True)
    def charge(amount: int, context: ToolContext) -> str:
        """Charge an amount once."""
        return f"{context.idempotency_key}:{amount}"

    assert list(charge.input_schema["properties"]) == ["amount"]
    assert await charge.invoke(charge.validate({"amount": 5}), CONTEXT) == "task:1:toolu_1:5"


async def test_parameters_named_like_model_attributes_or_private_names_are_kept() -> None:
    """Parameters called schema, json or _id are properties of the schema and reach the handler."""

    @tool
    def search(schema: str, json: bool, _id: int = 0) -> str:
        """Search one schema."""
        return f"{schema}|{json}|{_id}"

    assert list(search.input_schema["properties"]) == ["schema", "json", "_id"]
    assert search.input_schema["required"] == ["schema", "json"]
    arguments = search.validate({"schema": "public", "json": True, "_id": 7})
    assert arguments == {"schema": "public", "json": True, "_id": 7}
    assert await search.invoke(arguments, CONTEXT) == "public|True|7"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param(None, "tool 'no_doc' needs a description", id="no-docstring"),
        pytest.param("bad name", "'bad name' is rejected by the Messages API", id="bad-name"),
        pytest.param("", "'' is rejected by the Messages API", id="empty-name-is-not-the-default"),
    ],
)
def test_decorator_misuse_raises_configuration_error(name: str | None, expected: str) -> None:
    """A function without a docstring, or a name the API rejects (even ''), fails at decoration."""

    def no_doc(key: str) -> str:
        return key

    with pytest.raises(ConfigurationError, match=expected):
        tool(name=name)(no_doc)


class Opaque:
    """A type pydantic cannot describe as JSON."""


def test_parameters_without_a_schema_raise_configuration_error() -> None:
    """Missing annotations, *args and types with no JSON schema fail at decoration, naming the parameter."""

    def unannotated(key):  # type: ignore[no-untyped-def]
        """No annotation."""
        return key

    def star_args(*keys: str) -> str:
        """Variadic."""
        return ""

    def opaque(thing: Opaque) -> str:
        """Unsupported type."""
        return ""

    with pytest.raises(ConfigurationError, match="parameter 'key' needs a type annotation"):
        tool(unannotated)
    with pytest.raises(ConfigurationError, match="parameter 'keys' must be a plain keyword parameter"):
        tool(star_args)
    with pytest.raises(ConfigurationError, match="tool 'opaque': no JSON schema for its parameters"):
        tool(opaque)


# -- Tool(...) ----------------------------------------------------------------------------


def test_explicit_schema_tool_is_sent_as_declared() -> None:
    """Tool(...) keeps the JSON schema it was given and strips the description."""
    order = explicit(description="  Place an order.\n")
    assert order.to_param() == {
        "name": "place_order",
        "description": "Place an order.",
        "input_schema": ORDER_SCHEMA,
    }


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param(
            {"input_schema": {"type": "object", "properties": {"a": {"type": "strin"}}}},
            "invalid input_schema",
            id="unknown-type",
        ),
        pytest.param(
            {"input_schema": {"type": "object", "required": "a"}},
            "invalid input_schema",
            id="required-not-a-list",
        ),
        pytest.param({"input_schema": {"type": "array"}}, "input_schema must have type 'object'", id="array"),
        pytest.param(
            {"input_schema": {"properties": {}}}, "input_schema must have type 'object'", id="no-type"
        ),
        pytest.param({"input_schema": "object"}, "input_schema must be a JSON schema object", id="a-str"),
        pytest.param({"description": ""}, "needs a description", id="empty-description"),
        pytest.param({"description": "   "}, "needs a description", id="blank-description"),
        pytest.param({"handler": "echo"}, "handler 'echo' is not callable", id="handler-not-callable"),
        pytest.param({"timeout_s": 0}, "timeout_s must be a number > 0, got 0", id="zero-timeout"),
        pytest.param({"timeout_s": True}, "timeout_s must be a number > 0, got True", id="bool-timeout"),
        pytest.param({"timeout_s": "3"}, "timeout_s must be a number > 0, got '3'", id="str-timeout"),
    ],
)
def test_explicit_tool_misconfiguration_raises_configuration_error(overrides: JSON, expected: str) -> None:
    """An invalid or non-object schema, an empty description, a non-callable handler or a bad timeout fail."""
    with pytest.raises(ConfigurationError, match=expected) as caught:
        explicit(**overrides)
    assert isinstance(caught.value, ValueError)
    assert "'place_order'" in str(caught.value)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("read order", id="space"),
        pytest.param("orders.read", id="dot"),
        pytest.param("x" * 65, id="65-chars"),
        pytest.param("", id="empty"),
        pytest.param("read_order\n", id="trailing-newline"),
        pytest.param("lire_la_commande_é", id="non-ascii"),
    ],
)
def test_names_the_messages_api_rejects_raise_configuration_error(name: str) -> None:
    """A name outside ^[a-zA-Z0-9_-]{1,64}$ fails for Tool(...) and for @tool(name=...)."""
    with pytest.raises(ConfigurationError, match="rejected by the Messages API"):
        explicit(name=name)

    def read_order(order_id: str) -> str:
        """Read an order."""
        return order_id

    with pytest.raises(ConfigurationError, match="rejected by the Messages API"):
        tool(name=name)(read_order)


def test_names_the_messages_api_accepts_are_kept() -> None:
    """64 characters of letters, digits, '_' and '-' is a valid name."""
    name = "Read-order_2" + "x" * 52
    assert len(name) == 64
    assert explicit(name=name).name == name


def test_a_side_effect_tool_must_take_a_tool_context() -> None:
    """side_effect=True without a ToolContext parameter fails: the handler cannot read its idempotency key."""

    def refund(order_id: str) -> str:
        """Refund an order."""
        return order_id

    def refund_once(order_id: str, ctx: ToolContext) -> str:
        """Refund an order once."""
        return ctx.idempotency_key

    with pytest.raises(
        ConfigurationError, match="'refund' has side effects: its handler must take a ToolContext"
    ):
        tool(side_effect=True)(refund)
    with pytest.raises(ConfigurationError, match="'place_order' has side effects"):
        explicit(side_effect=True)
    assert explicit(handler=refund_once, side_effect=True).side_effect is True


# -- validation ---------------------------------------------------------------------------


@tool
def ship_order(order_id: str, address: Address, quantity: int = 1) -> str:
    """Ship an order to an address."""
    return order_id


@pytest.mark.parametrize(
    ("tool_input", "expected"),
    [
        pytest.param(
            {"order_id": 3, "address": {"city": "Lyon"}},
            "order_id: Input should be a valid string",
            id="type",
        ),
        pytest.param({"order_id": "O-1"}, "address: Field required", id="missing"),
        pytest.param(
            {"order_id": 3},
            "order_id: Input should be a valid string; address: Field required",
            id="two-fields",
        ),
        pytest.param({"order_id": "O-1", "address": {}}, "address/city: Field required", id="nested"),
        pytest.param(
            {"order_id": "O-1", "address": {"city": "Lyon"}, "coupon": "X"},
            "coupon: Extra inputs are not permitted",
            id="extra",
        ),
        pytest.param(
            {"order_id": "O-1", "address": {"city": "Lyon"}, "quantity": "many"},
            "quantity: Input should be a valid integer, unable to parse string as an integer",
            id="default-field",
        ),
        pytest.param(["O-1"], "input must be a JSON object, got list", id="not-an-object"),
    ],
)
def test_pydantic_validation_errors_name_the_wrong_field(tool_input: Any, expected: str) -> None:
    """For an @tool, the ToolInputError message names the path of every field that is wrong."""
    with pytest.raises(ToolInputError) as caught:
        ship_order.validate(tool_input)
    assert str(caught.value) == expected


@pytest.mark.parametrize(
    ("tool_input", "expected"),
    [
        pytest.param({"qty": "x"}, "qty: 'x' is not of type 'integer'", id="type"),
        pytest.param({"qty": 0}, "qty: 0 is less than the minimum of 1", id="minimum"),
        pytest.param({"qty": 1, "items": ["a", 2]}, "items/1: 2 is not of type 'string'", id="array-item"),
        pytest.param({"qty": 1, "address": {}}, "address: 'city' is a required property", id="nested"),
        pytest.param({}, "(input): 'qty' is a required property", id="missing"),
        pytest.param(
            {"qty": 1, "coupon": "X"},
            "(input): Additional properties are not allowed ('coupon' was unexpected)",
            id="extra",
        ),
        pytest.param("qty=1", "input must be a JSON object, got str", id="not-an-object"),
    ],
)
def test_jsonschema_validation_errors_name_the_wrong_field(tool_input: Any, expected: str) -> None:
    """For a Tool with an explicit schema, the ToolInputError message names the field (or its path)."""
    with pytest.raises(ToolInputError) as caught:
        explicit().validate(tool_input)
    assert str(caught.value) == expected
    assert isinstance(caught.value, ValueError)


def test_valid_input_is_returned_as_the_handlers_keyword_arguments() -> None:
    """A valid input comes back unchanged as the keyword arguments of the handler."""
    tool_input = {"qty": 2, "items": ["a", "b"], "address": {"city": "Lyon"}}
    assert explicit().validate(tool_input) == tool_input


@settings(max_examples=300, deadline=None, database=None)
@given(schema=object_schemas(), data=st.data())
def test_explicit_schema_validation_agrees_with_draft_2020_12(schema: JSON, data: st.DataObject) -> None:
    """Tool.validate accepts exactly the inputs Draft202012Validator(schema).is_valid accepts."""
    checked = explicit(input_schema=schema)
    tool_input = data.draw(tool_inputs(schema), label="tool_input")
    expected = jsonschema.Draft202012Validator(schema).is_valid(tool_input)
    try:
        arguments = checked.validate(tool_input)
    except ToolInputError:
        accepted = False
    else:
        accepted = True
        assert arguments == tool_input
    assert accepted is expected


def test_an_explicit_empty_description_is_not_replaced_by_the_docstring() -> None:
    """@tool(description="") is an empty description, not a request for the docstring."""

    def read_order(order_id: str) -> str:
        """Read an order."""
        return order_id

    with pytest.raises(ConfigurationError, match="tool 'read_order' needs a description"):
        tool(description="")(read_order)


# -- @tool's check against a pydantic model's --------------------------------------------


def reference_model(fn: Any) -> tuple[type[pydantic.BaseModel], dict[str, str]]:
    """The model @tool validated with before it validated through a TypedDict: fields with
    neutral names aliased to the parameters (a ToolContext left out); and field -> parameter."""
    hints = typing.get_type_hints(fn, include_extras=True)
    fields: JSON = {}
    names: dict[str, str] = {}
    for param in inspect.signature(fn).parameters.values():
        hint = hints[param.name]
        if hint is ToolContext:
            continue
        default = ... if param.default is param.empty else param.default
        names[f"arg{len(fields)}"] = param.name
        fields[f"arg{len(fields)}"] = (hint, pydantic.Field(default, alias=param.name))
    model = pydantic.create_model("reference", __config__=pydantic.ConfigDict(extra="forbid"), **fields)
    return model, names


def model_check(fn: Any) -> Any:
    """The check @tool made with `reference_model`: validated, then each field read back by name."""
    model, names = reference_model(fn)

    def check(tool_input: JSON) -> JSON:
        try:
            parsed = model.model_validate(tool_input)
        except pydantic.ValidationError as exc:
            raise ToolInputError(
                "; ".join(
                    f"{'/'.join(str(p) for p in err['loc']) or '(input)'}: {err['msg']}"
                    for err in exc.errors()
                )
            ) from None
        return {param: getattr(parsed, field) for field, param in names.items()}

    return check


def attribute_names(
    schema: str,
    json: bool,
    _id: int = 0,
    model_config: Optional[dict[str, int]] = None,  # noqa: UP045 - the Optional spelling
) -> str:
    """Parameters named like BaseModel attributes or private names."""
    return schema


def shipping(
    order_id: str,
    address: Address,
    items: list[int],
    speed: Literal["standard", "express"] = "standard",
    note: str | None = None,
    quantity: int = 1,
) -> str:
    """A nested model, a list, a Literal, Optional and defaults."""
    return order_id


def constrained(
    count: typing.Annotated[int, pydantic.Field(ge=1)],
    renamed: typing.Annotated[str, pydantic.Field(alias="other")] = "r",
    tags: list[str] = ["a"],  # noqa: B006 - a mutable default: each call gets its own copy
    ctx: ToolContext | None = None,
) -> str:
    """Constraints and an alias in Annotated, a mutable default, a context parameter."""
    return ""


def with_context(
    ctx: ToolContext, model_fields: float, validate: bool = False, copy: Address | None = None
) -> str:
    """A ToolContext first, then names BaseModel has as methods."""
    return ""


def nothing() -> str:
    """No parameters."""
    return ""


SIGNATURES: list[tuple[Any, JSON, JSON, JSON]] = [
    # function, a valid value of each parameter, lax values pydantic converts, wrong values
    (
        attribute_names,
        {"schema": "s", "json": True, "_id": 7, "model_config": {"a": 1}},
        {"json": "yes", "_id": "5", "model_config": {"a": "2"}},
        {"schema": 5, "json": "maybe", "_id": "x", "model_config": [1]},
    ),
    (
        shipping,
        {
            "order_id": "O-1",
            "address": {"city": "Lyon", "postcode": None},
            "items": [1, 2],
            "speed": "express",
            "note": "n",
            "quantity": 3,
        },
        {"items": ["5", 6.0], "quantity": "5", "address": {"city": "Lyon", "postcode": None}},
        {"order_id": None, "address": {}, "items": ["x"], "speed": "slow", "note": 1, "quantity": 1.5},
    ),
    (
        constrained,
        {"count": 2, "renamed": "x", "tags": ["t"]},
        {"count": "5", "tags": ("t",)},
        {"count": 0, "renamed": 1, "tags": "t"},
    ),
    (
        with_context,
        {"model_fields": 1.5, "validate": True, "copy": {"city": "Paris"}},
        {"model_fields": "2", "validate": 1},
        {"model_fields": "x", "validate": "perhaps", "copy": 3},
    ),
    (nothing, {}, {}, {}),
]


def inputs(good: JSON, lax: JSON, bad: JSON, required: list[str]) -> list[Any]:
    """Valid inputs (all given, only the required, each lax value), each required key missing,
    an extra key, each wrong value, every wrong value at once, keys out of order, not a dict."""
    minimal = {key: good[key] for key in required}
    cases: list[Any] = [dict(good), minimal, dict(reversed(good.items())), {**good, **lax}]
    cases += [{**minimal, key: value} for key, value in lax.items()]
    cases += [{k: v for k, v in good.items() if k != key} for key in required]
    cases += [{**good, "extra": 1}, {"extra": 1}, {**good, "arg0": 1}, {}]
    cases += [{**good, key: value} for key, value in bad.items()]
    cases += [{**bad, "extra": None}]
    return cases


@pytest.mark.parametrize(("fn", "good", "lax", "bad"), SIGNATURES, ids=lambda v: getattr(v, "__name__", ""))
def test_the_tool_check_gives_what_a_model_of_the_signature_gives(
    fn: Any, good: JSON, lax: JSON, bad: JSON
) -> None:
    """@tool's check returns the keyword arguments a model of the signature gives (same values of
    the same types, defaults included, in the signature's order) or fails with the same message."""
    checked = tool(fn)
    reference = model_check(fn)
    assert checked.input_schema == tool_schema_of(fn)
    required = checked.input_schema.get("required", [])
    for tool_input in inputs(good, lax, bad, required):
        assert outcome(checked.validate, tool_input) == outcome(reference, tool_input), tool_input


def outcome(check: Any, tool_input: JSON) -> Any:
    """The keyword arguments a check gives, each with its type, in order; or its error message."""
    try:
        arguments = check(tool_input)
    except ToolInputError as exc:
        return str(exc)
    return [(key, value, type(value)) for key, value in arguments.items()]


def tool_schema_of(fn: Any) -> JSON:
    """The JSON schema of the reference model, as @tool sends it (no title)."""
    schema = reference_model(fn)[0].model_json_schema()
    schema.pop("title", None)
    return schema


def test_a_mutable_default_is_a_fresh_copy_for_each_call() -> None:
    """A list default reaches each call as its own copy, as pydantic gives a model's."""
    checked = tool(constrained)
    first, second = checked.validate({"count": 1}), checked.validate({"count": 1})
    assert first["tags"] == second["tags"] == ["a"]
    assert first["tags"] is not second["tags"]
    assert first["tags"] is not inspect.signature(constrained).parameters["tags"].default
