"""A `@tool` is still its function, and its docstring documents it: the summary is the tool's
description, each parameter's text its schema's description (Google, NumPy, Sphinx)."""

from __future__ import annotations

from typing import Annotated, Any

import anyio.to_thread
import pytest
from pydantic import Field

from boundloop import AgentLoop, Budget, Observers, ScriptedClient, StopReason, Tool, ToolContext, tool
from tests.helpers import text, tool_use

GOOGLE = """Read one order by id.

    The order's status and its amount, as the shop's database has them.

    Args:
        order_id: The order's id, such as O-104.
        region: Where the order was placed.

    Returns:
        The order.

    Raises:
        KeyError: no such order.
    """

NUMPY = """Read one order by id.

    The order's status and its amount, as the shop's database has them.

    Parameters
    ----------
    order_id : str
        The order's id, such as O-104.
    region : str
        Where the order was placed.

    Returns
    -------
    dict
        The order.
    """

SPHINX = """Read one order by id.

    The order's status and its amount, as the shop's database has them.

    :param order_id: The order's id, such as O-104.
    :param region: Where the order was placed.
    :returns: The order.
    :raises KeyError: no such order.
    """


def read_order(order_id: str, region: str = "eu") -> dict[str, str]:
    return {"id": order_id, "region": region}


@pytest.mark.parametrize("docstring", [GOOGLE, NUMPY, SPHINX], ids=["google", "numpy", "sphinx"])
def test_the_docstring_gives_the_description_and_each_parameters_text(docstring: str) -> None:
    """The summary (without the parameters' or returns' sections) is the description; each
    parameter's text is its property's description."""
    read_order.__doc__ = docstring
    made = tool(read_order)
    assert made.description == (
        "Read one order by id.\n\nThe order's status and its amount, as the shop's database has them."
    )
    properties = made.input_schema["properties"]
    assert properties["order_id"]["description"] == "The order's id, such as O-104."
    assert properties["region"]["description"] == "Where the order was placed."
    assert made.to_param() == {  # what the model reads
        "name": "read_order",
        "description": made.description,
        "input_schema": made.input_schema,
    }


def test_a_field_description_wins_over_the_docstring_and_the_context_is_not_documented() -> None:
    """`Annotated[..., Field(description=...)]` is kept; the context parameter's text goes nowhere."""

    @tool
    async def refund(
        order_id: Annotated[str, Field(description="From the Field.")], amount: float, ctx: ToolContext
    ) -> str:
        """Refund an order.

        Args:
            order_id: From the docstring.
            amount: In euros.
            ctx: The call's context.
        """
        return order_id

    properties = refund.input_schema["properties"]
    assert properties["order_id"]["description"] == "From the Field."
    assert properties["amount"]["description"] == "In euros."
    assert set(properties) == {"order_id", "amount"}
    assert refund.description == "Refund an order."


def test_a_docstring_that_documents_no_parameter_is_the_description_whole() -> None:
    """Without a parameters' section the docstring is the description as written (a `Raises:`
    or `Example:` section included), and the schema has no descriptions."""

    @tool
    def lookup(sku: str) -> str:
        """Look a product up.

        Example:
            lookup("A-1")
        """
        return sku

    assert lookup.description == 'Look a product up.\n\nExample:\n    lookup("A-1")'
    assert "description" not in lookup.input_schema["properties"]["sku"]
    described = tool(description="Given.")(read_order)
    read_order.__doc__ = GOOGLE
    assert described.description == "Given."


async def test_a_tool_is_callable_as_its_function() -> None:
    """`await read_order("O-1")` calls an async tool function, `double(2)` a sync one, with their
    own arguments (the context too, when the caller gives one); the loop is not involved."""

    @tool
    async def fetch(order_id: str, ctx: ToolContext[dict[str, str]]) -> str:
        """Fetch an order."""
        return f"{order_id} for {ctx.deps['user']}"

    @tool(name="double_it")
    def double(n: int) -> int:
        """Double a number."""
        return 2 * n

    context = ToolContext(
        task_id="t", trace_id="x", step=1, tool_use_id="u", idempotency_key="k", deps={"user": "ann"}
    )
    assert await fetch("O-1", context) == "O-1 for ann"
    assert await fetch(order_id="O-2", ctx=context) == "O-2 for ann"
    assert double(2) == 4
    assert double.name == "double_it"
    assert callable(fetch)

    @tool
    async def broken(n: int) -> int:
        """Raise."""
        raise ValueError(f"bad {n}")

    with pytest.raises(ValueError, match="bad 3"):
        await broken(3)


async def test_a_tool_is_a_handler_of_a_contract() -> None:
    """`from_contract(handlers={name: tool})` takes a `Tool`: its async function runs (awaited on
    the event loop, its context given), as the function itself would."""
    calls: list[tuple[str, str]] = []

    @tool
    async def lookup(sku: str, ctx: ToolContext) -> str:
        """Look a product up."""
        calls.append((sku, ctx.tool_use_id))
        return f"{sku}: in stock"

    def rebuild() -> AgentLoop:  # in a thread: the contract's modules read their schemas
        loop = AgentLoop(
            ScriptedClient([]), model="claude-sonnet-4-6", tools=[lookup], budget=Budget(max_steps=3)
        )
        client = ScriptedClient([tool_use(("lookup", {"sku": "A-1"}, "toolu_1")), text("In stock.")])
        document = loop.to_contract().to_dict()
        return AgentLoop.from_contract(
            document, handlers={"lookup": lookup}, client=client, observers=Observers(metrics=None)
        )

    rebuilt = await anyio.to_thread.run_sync(rebuild)
    assert not rebuilt.tools["lookup"].runs_in_thread
    result = await rebuilt.run("Is A-1 in stock?")
    assert result.stop_reason is StopReason.COMPLETED
    assert calls == [("A-1", "toolu_1")]
    assert result.state.observations[0].content == "A-1: in stock"


def test_a_defined_tool_is_callable_as_its_handler() -> None:
    """`Tool.defined(definition, handler)` called is its handler, the input as one dict."""

    def memory(tool_input: dict[str, Any]) -> str:
        return f"memory {tool_input['command']}"

    made = Tool.defined({"type": "memory_20250818", "name": "memory"}, memory)
    assert made({"command": "view"}) == "memory view"
