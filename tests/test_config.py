"""Configuration errors: AgentLoop, Budget and Policy fail at construction; prices and their arithmetic."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest
from anthropic.types import Usage as ApiUsage

from boundloop import (
    AgentLoop,
    Budget,
    ConfigurationError,
    LoopError,
    LoopSpec,
    Observers,
    Policy,
    Price,
    ScriptedClient,
    StopReason,
    tool,
)
from boundloop.compaction import Compaction, ContextEdit, ContextManagement
from boundloop.contract import load_contract
from boundloop.prices import PRICES, price_for
from boundloop.redaction import Redaction
from boundloop.settings import CONTRACT_REQUIRED
from tests.helpers import text

JSON = dict[str, Any]


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return key


@tool(name="lookup")
async def lookup_again(key: str) -> str:
    """A second tool with the same name."""
    return key


@tool
async def refund(order_id: str) -> str:
    """Refund an order."""
    return order_id


class NoCreate:
    """A client whose `messages` has no `create`."""

    messages = object()


def budget_with(limit: str, value: object) -> Budget:
    """A Budget with one limit set to a value of any type."""
    options: JSON = {"max_steps": 4, limit: value}
    return Budget(**options)


def policy_with(option: str, value: object) -> Policy:
    """A Policy with one option set to a value of any type."""
    options: JSON = {option: value}
    return Policy(**options)


def make_loop(**overrides: Any) -> AgentLoop:
    """A valid AgentLoop, any argument overridden."""
    options: JSON = {
        "client": ScriptedClient([]),
        "model": "claude-sonnet-4-6",
        "tools": [lookup, refund],
        "budget": Budget(max_steps=4),
        "observers": Observers(metrics=None),
    }
    options.update(overrides)
    client = options.pop("client")
    return AgentLoop(client, **options)


# -- AgentLoop ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param({"budget": None}, r"a Budget is required: there is no unbounded loop", id="no-budget"),
        pytest.param(
            {"budget": {"max_steps": 4}}, r"budget must be a Budget, got dict", id="budget-not-a-budget"
        ),
        pytest.param(
            {"tools": [lookup, lookup_again]}, r"two tools are named 'lookup'", id="duplicate-names"
        ),
        pytest.param({"tools": [lookup, "refund"]}, r"'refund' is not a Tool", id="non-tool-in-tools"),
        pytest.param({"tools": [lookup, len]}, r"<built-in function len> is not a Tool", id="plain-function"),
        pytest.param({"tools": lookup}, r"tools takes a list of tools", id="one-tool-not-a-list"),
        pytest.param({"tools": None}, r"tools takes a list of tools, got NoneType", id="tools-none"),
        pytest.param(
            {"policy": Policy(allowed={"lookup", "ghost"})},
            r"Policy\.allowed names tools with no handler: \['ghost'\]",
            id="allowed-unregistered",
        ),
        pytest.param(
            {"policy": Policy(required_evidence={"ghost"})},
            r"Policy\.required_evidence names tools with no handler: \['ghost'\]",
            id="required-evidence-unregistered",
        ),
        pytest.param(
            {"policy": Policy(requires_approval={"ghost", "phantom"})},
            r"Policy\.requires_approval names tools with no handler: \['ghost', 'phantom'\]",
            id="requires-approval-unregistered",
        ),
        pytest.param(
            {"model": "house-model-1", "budget": Budget(max_steps=4, max_cost_usd=1.0)},
            r"max_cost_usd needs a price for model 'house-model-1'",
            id="cost-budget-without-price",
        ),
        pytest.param(
            {"prices": {"claude-sonnet-4-6": 3.0}},
            r"prices\['claude-sonnet-4-6'\] must be a Price, got 3\.0",
            id="price-not-a-price",
        ),
        pytest.param({"client": object()}, r"has no messages\.create", id="client-without-messages"),
        pytest.param({"client": NoCreate()}, r"has no messages\.create", id="client-without-create"),
        pytest.param({"model": ""}, r"model must be a non-empty model name", id="empty-model"),
        pytest.param({"model": None}, r"model must be a non-empty model name", id="model-none"),
        pytest.param({"max_tokens": 0}, r"max_tokens must be a positive int, got 0", id="max-tokens-zero"),
        pytest.param({"context": Compaction()}, r"context must be a ContextManagement", id="bad-context"),
    ],
)
def test_agent_loop_misconfiguration_raises_at_construction(overrides: JSON, expected: str) -> None:
    """Each misconfiguration raises ConfigurationError (a ValueError) naming the problem, before any run."""
    with pytest.raises(ConfigurationError, match=expected) as caught:
        make_loop(**overrides)
    assert isinstance(caught.value, ValueError)
    assert isinstance(caught.value, LoopError)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        pytest.param(
            {"policy": {"forbidden": ["refund"]}},
            r"policy must be a Policy",
            id="policy-not-a-policy",
        ),
        pytest.param(
            {"observers": Observers(metrics="on")},  # type: ignore[arg-type]
            r"metrics must be a LoopMetrics",
            id="metrics-not-loop-metrics",
        ),
        pytest.param(
            {"redaction": Redaction(hook="[hidden]")},  # type: ignore[arg-type]
            r"redact must be a callable",
            id="redact-not-callable",
        ),
        pytest.param(
            {"max_tokens": True},
            r"max_tokens must be a positive int, got True",
            id="max-tokens-bool",
        ),
        pytest.param(
            {"observers": Observers(on_event="print")},  # type: ignore[arg-type]
            r"on_event must be a callable taking an Event, got 'print'",
            id="on-event-not-callable",
        ),
        pytest.param(
            {"observers": Observers(tracing="otlp")},  # type: ignore[arg-type]
            r"tracing must be a TraceSettings or None, got 'otlp'",
            id="tracing-not-trace-settings",
        ),
        pytest.param(
            {"observers": {"metrics": None}},
            r"observers must be an Observers, got dict",
            id="observers-not-observers",
        ),
    ],
)
def test_agent_loop_rejects_arguments_of_the_wrong_type(overrides: JSON, expected: str) -> None:
    """A wrong-typed policy, observer, redact hook or max_tokens is a ConfigurationError, not a
    later crash."""
    with pytest.raises(ConfigurationError, match=expected):
        make_loop(**overrides)


def test_a_valid_loop_keeps_its_wiring() -> None:
    """Forbidding an unregistered tool is allowed, and the policy, tools and price are kept."""
    policy = Policy(forbidden={"delete_everything"}, required_evidence={"lookup"})
    loop = make_loop(policy=policy, budget=Budget(max_steps=4, max_cost_usd=0.5))
    assert loop.policy is policy
    assert list(loop.tools) == ["lookup", "refund"]
    assert loop.config.price == PRICES["claude-sonnet-4-6"]


def test_the_settings_are_the_specs_validated_once() -> None:
    """The configuration's settings are its `LoopSpec`'s: the objects given, validated once."""
    policy = Policy(required_evidence={"lookup"}, escalation_tool="ask_human")
    budget = Budget(max_steps=4)
    loop = make_loop(policy=policy, budget=budget, system="Be brief.", redaction=Redaction(checkpoints=True))
    spec = loop.config.spec
    assert isinstance(spec, LoopSpec)
    assert spec.policy is policy
    assert loop.policy is policy
    assert spec.budget is budget
    assert loop.budget is budget
    assert (spec.model, spec.system, spec.redact_checkpoints, spec.budget.count_tokens) == (
        "claude-sonnet-4-6",
        "Be brief.",
        True,
        False,
    )
    assert [declared.name for declared in spec.tools] == ["lookup", "refund", "ask_human"]
    with pytest.raises(ConfigurationError, match="redact_checkpoints: Input should be a valid boolean"):
        make_loop(redaction=Redaction(checkpoints="yes"))  # type: ignore[arg-type]


def test_the_provenance_hashes_are_the_specs_and_keep_their_values() -> None:
    """Hashes of the spec's system prompt, tool manifest and policy: the values traces and
    checkpoints recorded before still compare equal on replay."""

    @tool(requires_approval=True)
    async def refund_order(order_id: str, amount: float = 1.0) -> str:
        """Refund an order."""
        return order_id

    loop = make_loop(
        tools=[lookup, refund_order],
        system="be nice",
        policy=Policy(allowed={"lookup", "refund_order"}, escalation_tool="ask_human", on_tool_error="stop"),
    )
    provenance = loop.config.provenance
    assert provenance.system_sha256 == "90868159d4f4e1dfe23eb6761fc870bf0285b89efd34d9d15c08eac883095913"
    assert provenance.tools_sha256 == "b0ef10abea330951cbf71943332dc7ff2eca264a36869f3f4a08fdc3f7072d46"
    assert provenance.policy_sha256 == "6f4f73613ff85d908490721185632b5f90a4b74b028adde1c8baf068f98fd665"
    assert [entry["name"] for entry in provenance.tools] == ["lookup", "refund_order", "ask_human"]
    assert provenance.policy["on_tool_error"] == "stop"


def test_a_callers_price_makes_a_cost_budget_possible_for_any_model() -> None:
    """prices={model: Price(...)} is merged over the built-in table, and a cost budget then constructs."""
    house = Price(input_per_mtok=2, output_per_mtok=8)
    loop = make_loop(
        model="house-model-1", prices={"house-model-1": house}, budget=Budget(max_steps=4, max_cost_usd=1)
    )
    assert loop.config.price is house
    assert make_loop(prices={"house-model-1": house}).config.price == PRICES["claude-sonnet-4-6"]


# -- Budget ------------------------------------------------------------------------------


def test_budget_requires_max_steps() -> None:
    """Budget() without max_steps fails: there is no unbounded loop."""
    with pytest.raises(TypeError, match="max_steps"):
        Budget()  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("max_steps", "expected"),
    [
        pytest.param(0, r"Budget\.max_steps must be > 0, got 0", id="zero"),
        pytest.param(-3, r"Budget\.max_steps must be > 0, got -3", id="negative"),
        pytest.param(True, r"Budget\.max_steps must be an int, got True", id="bool"),
        pytest.param(2.0, r"Budget\.max_steps must be an int, got 2\.0", id="float"),
        pytest.param("8", r"Budget\.max_steps must be an int, got '8'", id="str"),
        pytest.param(None, r"Budget\.max_steps must be an int, got None", id="none"),
    ],
)
def test_budget_rejects_a_bad_max_steps(max_steps: Any, expected: str) -> None:
    """max_steps must be a positive int: not 0, negative, a bool, a float or a str."""
    with pytest.raises(ConfigurationError, match=expected):
        Budget(max_steps=max_steps)


LIMITS = [
    "max_tool_calls",
    "timeout_s",
    "max_total_tokens",
    "max_cost_usd",
    "max_consecutive_tool_errors",
    "max_repeated_calls",
    "max_tool_retries",
    "tool_timeout_s",
    "retry_backoff_s",
]


@pytest.mark.parametrize("limit", LIMITS)
def test_budget_rejects_negative_and_nan_limits(limit: str) -> None:
    """Every limit rejects a negative value and NaN, naming the field."""
    with pytest.raises(ConfigurationError, match=rf"Budget\.{limit} must be > 0, got -1"):
        budget_with(limit, -1)
    with pytest.raises(ConfigurationError, match=rf"Budget\.{limit} .*got nan"):
        budget_with(limit, float("nan"))
    with pytest.raises(ConfigurationError, match=rf"Budget\.{limit} must be a number, got True"):
        budget_with(limit, True)


@pytest.mark.parametrize(
    ("limit", "zero_allowed"),
    [
        ("max_tool_calls", True),
        ("max_repeated_calls", True),
        ("max_tool_retries", True),
        ("retry_backoff_s", True),
        ("timeout_s", False),
        ("max_total_tokens", False),
        ("max_cost_usd", False),
        ("max_consecutive_tool_errors", False),
        ("tool_timeout_s", False),
    ],
)
def test_budget_zero_is_a_limit_only_where_it_means_something(limit: str, zero_allowed: bool) -> None:
    """Zero tool calls, repeats, retries or backoff are limits; a zero timeout, token or cost limit is not."""
    if zero_allowed:
        assert getattr(budget_with(limit, 0), limit) == 0
    else:
        with pytest.raises(ConfigurationError, match=rf"Budget\.{limit} must be > 0, got 0"):
            budget_with(limit, 0)


@pytest.mark.parametrize(
    "limit",
    [
        "max_tool_calls",
        "max_total_tokens",
        "max_consecutive_tool_errors",
        "max_repeated_calls",
        "max_tool_retries",
    ],
)
def test_budget_counts_must_be_ints(limit: str) -> None:
    """A limit that counts something rejects a float such as 1.5."""
    with pytest.raises(ConfigurationError, match=rf"Budget\.{limit} counts: it must be an int, got 1\.5"):
        budget_with(limit, 1.5)


def test_budget_rejects_a_bad_tool_output_bound_and_count_tokens() -> None:
    """max_tool_output_chars counts characters (>= 1); count_tokens is a flag."""
    with pytest.raises(ConfigurationError, match=r"Budget\.max_tool_output_chars must be > 0, got 0"):
        Budget(max_steps=4, max_tool_output_chars=0)
    with pytest.raises(ConfigurationError, match=r"Budget\.count_tokens must be True or False, got 1"):
        Budget(max_steps=4, count_tokens=1)  # type: ignore[arg-type]


def test_budget_rejects_a_bad_on_exhausted() -> None:
    """on_exhausted is 'stop' or 'final_answer'."""
    with pytest.raises(
        ConfigurationError, match=r"Budget\.on_exhausted must be 'stop' or 'final_answer', got 'retry'"
    ):
        Budget(max_steps=4, on_exhausted="retry")  # type: ignore[arg-type]


def test_budget_defaults_match_the_design() -> None:
    """Only max_steps is required; the other limits have their documented defaults."""
    budget = Budget(max_steps=8)
    assert (
        budget.max_tool_calls,
        budget.timeout_s,
        budget.max_total_tokens,
        budget.max_cost_usd,
        budget.max_consecutive_tool_errors,
        budget.max_repeated_calls,
        budget.max_tool_retries,
        budget.on_exhausted,
    ) == (None, None, None, None, 2, 2, 0, "stop")


# -- Policy ------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["allowed", "forbidden", "requires_approval", "required_evidence"])
def test_policy_rejects_a_str_where_a_collection_of_names_belongs(field: str) -> None:
    """Policy(forbidden="issue_refund") would forbid letters: it raises instead."""
    with pytest.raises(
        ConfigurationError, match=rf"Policy\.{field} takes a collection of tool names, not a str"
    ):
        policy_with(field, "issue_refund")


def test_policy_rejects_names_that_are_not_str() -> None:
    """Every tool name in a policy set is a str."""
    with pytest.raises(ConfigurationError, match=r"Policy\.forbidden takes tool names \(str\), got 3"):
        Policy(forbidden=["refund", 3])  # type: ignore[list-item]


def test_policy_rejects_a_tool_both_allowed_and_forbidden() -> None:
    """allowed and forbidden must not overlap; the message lists the overlap."""
    with pytest.raises(ConfigurationError, match=r"tools both allowed and forbidden: \['refund'\]"):
        Policy(allowed=["lookup", "refund"], forbidden={"refund"})


def test_policy_rejects_evidence_from_a_forbidden_tool() -> None:
    """Evidence that only a forbidden tool could provide can never exist."""
    with pytest.raises(ConfigurationError, match=r"required evidence from forbidden tools: \['refund'\]"):
        Policy(forbidden={"refund"}, required_evidence={"refund"})


@pytest.mark.parametrize(
    ("option", "value", "expected"),
    [
        ("on_forbidden", "ignore", r"Policy\.on_forbidden must be one of \('stop', 'report'\), got 'ignore'"),
        (
            "on_missing_evidence",
            "retry",
            r"Policy\.on_missing_evidence must be one of \('stop', 'continue'\)",
        ),
        (
            "on_max_tokens",
            "raise",
            r"Policy\.on_max_tokens must be one of \('stop', 'continue'\), got 'raise'",
        ),
        ("max_continuations", -1, r"Policy\.max_continuations must be an int >= 0, got -1"),
        ("max_continuations", 1.5, r"Policy\.max_continuations must be an int >= 0, got 1\.5"),
        ("max_continuations", True, r"Policy\.max_continuations must be an int >= 0, got True"),
        ("success", "yes", r"Policy\.success must be a callable, got 'yes'"),
        ("approve", True, r"Policy\.approve must be a callable, got True"),
        ("signal_handlers", {"end_turn": "stop"}, r"Policy\.signal_handlers maps a stop_reason str"),
        ("signal_handlers", [], r"Policy\.signal_handlers maps stop_reasons to handlers, got \[\]"),
        (
            "on_tool_error",
            "ignore",
            r"Policy\.on_tool_error must be one of \('report', 'raise', 'stop'\), got 'ignore'",
        ),
    ],
)
def test_policy_rejects_bad_option_values(option: str, value: object, expected: str) -> None:
    """Each option outside its allowed values raises, naming the option and the value."""
    with pytest.raises(ConfigurationError, match=expected):
        policy_with(option, value)


def test_policy_defaults_are_its_fields_defaults() -> None:
    """`Policy()` holds each field's declared default (what the contract schema and the docs
    show): the constructor's own defaults cannot drift from the declarations."""
    built = Policy()
    declared = {
        field.name: field.default if field.default_factory is dataclasses.MISSING else field.default_factory()
        for field in dataclasses.fields(Policy)
    }
    assert {name: getattr(built, name) for name in declared} == declared


def test_policy_keeps_names_as_frozensets() -> None:
    """Lists, sets and generators of names all become frozensets; allowed stays None when not given."""
    names = (name for name in ["lookup"])
    policy = Policy(forbidden=["refund"], required_evidence=names)  # type: ignore[arg-type]  # read once
    assert policy.forbidden == frozenset({"refund"})
    assert policy.required_evidence == frozenset({"lookup"})
    assert policy.allowed is None
    assert policy.is_allowed("anything") is True
    assert policy.is_forbidden("refund") is True


# -- prices ------------------------------------------------------------------------------


def test_price_cost_counts_every_kind_of_token_with_default_cache_prices() -> None:
    """Cache reads cost a tenth of input and cache writes 1.25x input, when the price does not say."""
    usage = ApiUsage(
        input_tokens=1_000,
        output_tokens=500,
        cache_read_input_tokens=2_000,
        cache_creation_input_tokens=4_000,
    )
    price = Price(input_per_mtok=3, output_per_mtok=15)
    # 1000 * 3 + 500 * 15 + 2000 * 0.3 + 4000 * 3.75 = 26 100 USD per million tokens
    assert price.cost(usage) == pytest.approx(0.0261)


def test_price_cost_uses_explicit_cache_prices() -> None:
    """Explicit cache read and write prices replace the defaults."""
    usage = ApiUsage(
        input_tokens=1_000,
        output_tokens=500,
        cache_read_input_tokens=2_000,
        cache_creation_input_tokens=4_000,
    )
    price = Price(input_per_mtok=3, output_per_mtok=15, cache_read_per_mtok=0.5, cache_write_per_mtok=6)
    assert price.cost(usage) == pytest.approx((3_000 + 7_500 + 1_000 + 24_000) / 1_000_000)


def test_price_cost_without_cache_fields() -> None:
    """Usage without cache token counts (None) costs input and output only."""
    usage = ApiUsage(input_tokens=2_000_000, output_tokens=1_000_000)
    assert Price(input_per_mtok=1, output_per_mtok=5).cost(usage) == pytest.approx(7.0)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("input_per_mtok", -1),
        ("output_per_mtok", "15"),
        ("cache_read_per_mtok", float("nan")),
        ("input_per_mtok", True),
    ],
)
def test_price_rejects_negative_or_non_numeric_prices(field: str, value: object) -> None:
    """A price is a number >= 0."""
    options: JSON = {"input_per_mtok": 3, "output_per_mtok": 15, field: value}
    with pytest.raises(ConfigurationError, match=rf"Price\.{field} must be a number >= 0"):
        Price(**options)


@pytest.mark.parametrize(
    ("model", "alias"),
    [
        pytest.param("claude-haiku-4-5-20251001", "claude-haiku-4-5", id="haiku-4-5-dated"),
        pytest.param("claude-sonnet-4-5-20250929", "claude-sonnet-4-5", id="sonnet-4-5-dated"),
        pytest.param("claude-opus-4-1-20250805", "claude-opus-4-1", id="opus-4-1-dated"),
        pytest.param("claude-sonnet-4-20250514", "claude-sonnet-4-0", id="sonnet-4-dated-via-4-0"),
        pytest.param("claude-opus-4-20250514", "claude-opus-4-0", id="opus-4-dated-via-4-0"),
        pytest.param("claude-3-7-sonnet-20250219", "claude-3-7-sonnet-latest", id="latest-alias"),
        pytest.param("claude-sonnet-4-6", "claude-sonnet-4-6", id="exact"),
    ],
)
def test_dated_model_ids_find_their_price_by_prefix(model: str, alias: str) -> None:
    """A dated snapshot id is priced as its alias."""
    assert price_for(model, PRICES) is PRICES[alias]


@pytest.mark.parametrize("model", ["claude-sonnet-4", "claude-sonnet-4-x", "house-model-1", "claude"])
def test_unknown_models_have_no_price(model: str) -> None:
    """A model that is neither an entry nor a dated snapshot of one has no price."""
    assert price_for(model, PRICES) is None


def test_the_longest_prefix_wins_whatever_the_table_order() -> None:
    """claude-x-2-... takes claude-x-2's price even when claude-x comes first in the table."""
    short = Price(input_per_mtok=1, output_per_mtok=1)
    long = Price(input_per_mtok=2, output_per_mtok=2)
    assert price_for("claude-x-2-20250101", {"claude-x": short, "claude-x-2": long}) is long
    assert price_for("claude-x-2-20250101", {"claude-x-2": long, "claude-x": short}) is long


async def test_a_run_on_a_dated_model_is_costed_at_its_alias_price() -> None:
    """A run on claude-haiku-4-5-20251001 is costed at claude-haiku-4-5's price ($1 / $5 per MTok)."""
    client = ScriptedClient([text("done", input_tokens=1_000, output_tokens=200)])
    loop = make_loop(
        client=client, model="claude-haiku-4-5-20251001", budget=Budget(max_steps=2, max_cost_usd=1.0)
    )
    result = await loop.run("goal")
    assert result.stop_reason is StopReason.COMPLETED
    assert result.usage.cost_usd == pytest.approx((1_000 * 1 + 200 * 5) / 1_000_000)


def test_agent_loop_takes_at_most_20_parameters_and_loop_spec_s_defaults() -> None:
    """The constructor stays small (related settings travel as value objects: `Budget`, `Policy`,
    `Redaction`, `ContextManagement`, `Observers`; `pools` are objects with their stores that no
    value object holds), and a data keyword's default is its `LoopSpec` field's: a loop given
    only what is required has the spec of those settings."""
    parameters = [name for name in inspect.signature(AgentLoop.__init__).parameters if name != "self"]
    assert len(parameters) <= 20, parameters
    for name in set(parameters) & set(LoopSpec.model_fields):
        field = LoopSpec.model_fields[name]
        if field.is_required() or name in ("budget", "policy", "settings"):  # None: the spec's default
            continue
        if name == "tools":  # the functions: wiring, the spec's are their declarations
            continue
        assert inspect.signature(AgentLoop.__init__).parameters[name].default == field.get_default(
            call_default_factory=True
        ), name
    budget = Budget(max_steps=4)
    loop = AgentLoop(ScriptedClient([]), model="claude-sonnet-4-6", budget=budget)
    spec = LoopSpec.of(model="claude-sonnet-4-6", budget=budget)
    assert {name: getattr(loop.spec, name) for name in LoopSpec.model_fields} == {
        name: getattr(spec, name) for name in LoopSpec.model_fields
    }


def test_context_management_is_checked_when_built() -> None:
    """`ContextManagement` takes a `Compaction` (or None) and a sequence of edits, read once."""
    with pytest.raises(
        ConfigurationError, match=r"ContextManagement\.compaction must be a Compaction or None"
    ):
        ContextManagement(compaction={"trigger_tokens": 60_000})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"ContextManagement\.edits must be a sequence of edits"):
        ContextManagement(edits={"type": "clear_thinking_20251015"})  # type: ignore[arg-type]
    clear: ContextEdit = {"type": "clear_thinking_20251015"}
    assert ContextManagement(edits=[clear]).edits == (clear,)


def test_every_way_to_a_spec_given_only_what_is_required_has_loop_spec_s_defaults() -> None:
    """A default is written once, in `LoopSpec` (or the value object that holds the setting):
    the contract document, a loaded contract, `Redaction` and `ContextManagement` given nothing
    more than what is required have the spec's defaults."""
    budget = Budget(max_steps=4)
    loop = AgentLoop(ScriptedClient([]), model="claude-sonnet-4-6", budget=budget)
    document = loop.to_contract().to_dict()
    assert set(document) == {*CONTRACT_REQUIRED, "metrics"}  # a default is not written again
    spec = LoopSpec.of(model="claude-sonnet-4-6", budget=budget, signals=document["signals"])
    assert load_contract(document).spec == spec
    assert LoopSpec.from_document(spec.document()) == spec
    defaults = {
        name: field.get_default(call_default_factory=True) for name, field in LoopSpec.model_fields.items()
    }
    assert Redaction().checkpoints == defaults["redact_checkpoints"]
    context = ContextManagement()
    assert (context.compaction, context.edits) == (defaults["compaction"], defaults["context_editing"])
