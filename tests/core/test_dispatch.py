"""Dispatch through real runs: contexts and idempotency keys, retries, timeouts, result conversion."""

from __future__ import annotations

import contextvars
import json
import threading
from collections.abc import Callable
from typing import Annotated, Any, Final

import anyio
import pydantic
import pytest

from boundloop import (
    AgentLoop,
    Budget,
    ConfigurationError,
    LoopResult,
    Observers,
    RetryableToolError,
    ScriptedClient,
    StopReason,
    Tool,
    ToolContext,
    tool,
)
from boundloop.events import ToolResult
from tests.helpers import assert_valid_transcript, blocks, text, tool_use

JSON = dict[str, Any]


def make_loop(script: list[JSON], tools: list[Tool], **kwargs: Any) -> AgentLoop:
    """A loop on a ScriptedClient with no metrics; any option overridden."""
    options: JSON = {
        "model": "claude-sonnet-4-6",
        "budget": Budget(max_steps=4),
        "observers": Observers(metrics=None),
    }
    options.update(kwargs)
    return AgentLoop(ScriptedClient(script), tools=tools, **options)


async def run(loop: AgentLoop, **kwargs: Any) -> LoopResult:
    """Run under a generous deadline, so a hang fails the test instead of stalling the suite."""
    with anyio.fail_after(10):
        return await loop.run("goal", **kwargs)


async def produced(value: object, **kwargs: Any) -> LoopResult:
    """A run whose one tool call returns `value`, then answers."""

    @tool
    async def produce(key: str) -> object:
        """Return the value under test."""
        return value

    script = [tool_use(("produce", {"key": "k"}, "toolu_1")), text("done")]
    return await run(make_loop(script, [produce], **kwargs))


def answers(result: LoopResult, index: int = 2) -> list[JSON]:
    """The tool_result blocks of the user message at `index`, as plain dicts."""
    message = result.messages[index]
    assert message["role"] == "user"
    return blocks(message)


# -- context and idempotency -------------------------------------------------------------


async def test_a_handler_gets_the_context_of_its_call_with_the_idempotency_key() -> None:
    """The ToolContext holds the call's ids and step; its key is f"{task_id}:{step}:{tool_use_id}"."""
    seen: list[ToolContext] = []

    @tool(side_effect=True)
    async def charge(amount: int, ctx: ToolContext) -> str:
        """Charge once per idempotency key."""
        seen.append(ctx)
        return "charged"

    script = [
        tool_use(("charge", {"amount": 5}, "toolu_A")),
        tool_use(("charge", {"amount": 6}, "toolu_B")),
        text("done"),
    ]
    result = await run(make_loop(script, [charge]), task_id="task-7")
    assert result.stop_reason is StopReason.COMPLETED
    assert seen == [
        ToolContext(
            task_id="task-7",
            trace_id=result.state.trace_id,
            step=1,
            tool_use_id="toolu_A",
            idempotency_key="task-7:1:toolu_A",
        ),
        ToolContext(
            task_id="task-7",
            trace_id=result.state.trace_id,
            step=2,
            tool_use_id="toolu_B",
            idempotency_key="task-7:2:toolu_B",
        ),
    ]


# -- retries -----------------------------------------------------------------------------


async def test_a_retryable_error_is_retried_with_the_same_key_then_reported_as_an_error() -> None:
    """max_tool_retries=2 means three attempts, one idempotency key, three tool calls, then is_error."""
    keys: list[str] = []

    @tool(side_effect=True)
    async def flaky(order_id: str, ctx: ToolContext) -> str:
        """Always busy."""
        keys.append(ctx.idempotency_key)
        raise RetryableToolError(f"{order_id} is locked")

    script = [tool_use(("flaky", {"order_id": "O-1"}, "toolu_1")), text("gave up")]
    budget = Budget(max_steps=3, max_tool_retries=2, retry_backoff_s=0)
    result = await run(make_loop(script, [flaky], budget=budget), task_id="t")
    assert keys == ["t:1:toolu_1"] * 3
    assert result.state.tool_calls == 3
    assert answers(result) == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": "RetryableToolError: O-1 is locked (after 3 attempts)",
            "is_error": True,
        }
    ]
    assert [o.outcome for o in result.state.observations] == ["error"]
    [event] = [e for e in result.events if isinstance(e, ToolResult)]
    assert event.attempts == 3
    assert result.stop_reason is StopReason.COMPLETED
    assert_valid_transcript(result.messages)


async def test_a_retry_that_succeeds_is_an_ok_result() -> None:
    """A handler that succeeds on its second attempt answers ok, after two counted tool calls."""
    attempts: list[str] = []

    @tool(side_effect=True)
    async def flaky(order_id: str, ctx: ToolContext) -> str:
        """Busy once."""
        attempts.append(ctx.idempotency_key)
        if len(attempts) == 1:
            raise RetryableToolError("busy")
        return f"read {order_id}"

    script = [tool_use(("flaky", {"order_id": "O-1"}, "toolu_1")), text("done")]
    budget = Budget(max_steps=3, max_tool_retries=3, retry_backoff_s=0)
    result = await run(make_loop(script, [flaky], budget=budget), task_id="t")
    assert attempts == ["t:1:toolu_1", "t:1:toolu_1"]
    assert result.state.tool_calls == 2
    assert answers(result) == [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "read O-1"}]


async def test_retry_after_zero_retries_at_once_instead_of_waiting_for_the_backoff() -> None:
    """RetryableToolError(retry_after_s=0) retries now, even when the budget's backoff is an hour."""
    attempts: list[int] = []

    @tool
    async def flaky(order_id: str) -> str:
        """Busy once, and says to retry at once."""
        attempts.append(len(attempts))
        if len(attempts) == 1:
            raise RetryableToolError("busy", retry_after_s=0)
        return "ok"

    script = [tool_use(("flaky", {"order_id": "O-1"})), text("done")]
    budget = Budget(max_steps=3, max_tool_retries=1, retry_backoff_s=3600)
    result = await run(make_loop(script, [flaky], budget=budget))
    assert attempts == [0, 1]
    assert result.state.observations[0].outcome == "ok"


async def test_retries_stop_when_the_tool_call_budget_is_spent() -> None:
    """Each attempt takes a tool call: retries end, answered as an error, when max_tool_calls is reached."""
    attempts: list[int] = []

    @tool
    async def flaky(order_id: str) -> str:
        """Always busy."""
        attempts.append(len(attempts))
        raise RetryableToolError("busy")

    script = [tool_use(("flaky", {"order_id": "O-1"}, "toolu_1")), text("done")]
    budget = Budget(max_steps=3, max_tool_calls=2, max_tool_retries=5, retry_backoff_s=0)
    result = await run(make_loop(script, [flaky], budget=budget))
    assert attempts == [0, 1]
    assert result.state.tool_calls == 2
    assert answers(result) == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": "RetryableToolError: busy (retries stopped: the tool-call budget is spent)",
            "is_error": True,
        }
    ]


# -- timeouts ----------------------------------------------------------------------------


def slow_and_fast(*, slow_timeout_s: float | None) -> tuple[list[str], list[Tool]]:
    """A tool that waits forever (recording its cancellation) and a sibling that answers at once."""
    log: list[str] = []
    never = anyio.Event()

    @tool(timeout_s=slow_timeout_s)
    async def slow(key: str) -> str:
        """Waits on an event that never fires."""
        try:
            await never.wait()
        except anyio.get_cancelled_exc_class():
            log.append("slow cancelled")
            raise
        return key

    @tool
    async def fast(key: str) -> str:
        """Answers at once."""
        log.append("fast done")
        return f"fast {key}"

    return log, [slow, fast]


@pytest.mark.parametrize(
    ("tool_timeout", "budget_timeout"),
    [
        pytest.param(0.05, None, id="tool-timeout_s"),
        pytest.param(None, 0.05, id="budget-tool_timeout_s"),
    ],
)
async def test_a_tool_timeout_cancels_only_the_slow_call(
    tool_timeout: float | None, budget_timeout: float | None
) -> None:
    """The slow call is cancelled and answered with a timeout error; its sibling's ok result is kept."""
    log, tools = slow_and_fast(slow_timeout_s=tool_timeout)
    script = [
        tool_use(("slow", {"key": "a"}, "toolu_slow"), ("fast", {"key": "b"}, "toolu_fast")),
        text("done"),
    ]
    loop = make_loop(script, tools, budget=Budget(max_steps=3, tool_timeout_s=budget_timeout))
    result = await run(loop)
    assert sorted(log) == ["fast done", "slow cancelled"]
    assert answers(result) == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_slow",
            "content": "timed out after 0.05 s; the call was cancelled",
            "is_error": True,
        },
        {"type": "tool_result", "tool_use_id": "toolu_fast", "content": "fast b"},
    ]
    assert [o.outcome for o in result.state.observations] == ["timeout", "ok"]
    assert result.stop_reason is StopReason.COMPLETED
    assert_valid_transcript(result.messages)


async def test_a_tools_own_timeout_overrides_the_budgets_default() -> None:
    """A tool's timeout_s beats Budget.tool_timeout_s: it ends after its default-timed sibling timed out."""
    released = anyio.Event()

    @tool(timeout_s=30)
    async def patient(key: str) -> str:
        """Waits until the impatient sibling has timed out."""
        await released.wait()
        return "patient ok"

    @tool
    async def impatient(key: str) -> str:
        """Waits forever; its cancellation releases the patient one."""
        try:
            await anyio.Event().wait()
        except anyio.get_cancelled_exc_class():
            released.set()
            raise
        return key

    script = [tool_use(("patient", {"key": "a"}), ("impatient", {"key": "b"})), text("done")]
    loop = make_loop(script, [patient, impatient], budget=Budget(max_steps=3, tool_timeout_s=0.05))
    result = await run(loop)
    assert [o.outcome for o in result.state.observations] == ["ok", "timeout"]
    assert answers(result)[0]["content"] == "patient ok"


# -- result conversion -------------------------------------------------------------------


class Address(pydantic.BaseModel):
    """A pydantic result."""

    city: str
    postcode: str | None = None


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("plain text", "plain text", id="str"),
        pytest.param(
            {"order": "O-1", "total": 12.5, "paid": True},
            '{"order": "O-1", "total": 12.5, "paid": true}',
            id="dict",
        ),
        pytest.param(["a", 1, None], '["a", 1, null]', id="list"),
        pytest.param({"city": "Zürich"}, '{"city": "Zürich"}', id="non-ascii-kept"),
        pytest.param(None, "null", id="none"),
        pytest.param(Address(city="Lyon"), '{"city":"Lyon","postcode":null}', id="pydantic-model"),
        pytest.param(
            [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}],
            [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}],
            id="content-blocks",
        ),
        pytest.param([{"type": "text"}], '[{"type": "text"}]', id="text-block-without-text-is-json"),
        pytest.param([], "[]", id="empty-list-is-json"),
    ],
)
async def test_results_become_the_right_tool_result_content(
    value: object, expected: str | list[JSON]
) -> None:
    """Text stays text, JSON values are dumped, pydantic models give their JSON, content blocks pass."""

    result = await produced(value)
    assert answers(result) == [{"type": "tool_result", "tool_use_id": "toolu_1", "content": expected}]
    assert result.state.observations[0].outcome == "ok"


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        pytest.param(object(), "object", id="object"),
        pytest.param({1, 2}, "set", id="set"),
        pytest.param({"when": threading.Lock()}, "dict", id="dict-holding-an-object"),
        pytest.param(b"raw", "bytes", id="bytes"),
    ],
)
async def test_an_unserialisable_result_is_an_error_result_not_a_crash(value: object, kind: str) -> None:
    """A value that is not text, JSON or content blocks answers with is_error, and the run goes on."""

    result = await produced(value)
    [answer] = answers(result)
    assert answer["is_error"] is True
    assert answer["content"].startswith(
        f"the tool returned a {kind}, which is not text, JSON or content blocks"
    )
    assert result.state.observations[0].outcome == "error"
    assert result.stop_reason is StopReason.COMPLETED


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("x" * 25, "x" * 10 + "\n[truncated: 15 more characters]", id="str"),
        pytest.param({"k": "v" * 20}, '{"k": "vvv\n[truncated: 19 more characters]', id="json"),
        pytest.param("x" * 10, "x" * 10, id="exactly-the-limit"),
        pytest.param(
            [
                {"type": "text", "text": "a" * 8},
                {"type": "text", "text": "b" * 8},
                {"type": "text", "text": "c" * 3},
            ],
            [
                {"type": "text", "text": "a" * 8},
                {"type": "text", "text": "bb\n[truncated: 9 more characters]"},
            ],
            id="blocks-share-the-limit",
        ),
    ],
)
async def test_long_output_is_truncated_with_a_visible_marker(
    value: object, expected: str | list[JSON]
) -> None:
    """Output over max_tool_output_chars is cut, and the marker says how many characters were cut."""

    result = await produced(value, budget=Budget(max_steps=4, max_tool_output_chars=10))
    assert answers(result) == [{"type": "tool_result", "tool_use_id": "toolu_1", "content": expected}]


def image(data: str) -> JSON:
    """An image block with base64 data."""
    return {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}


def document(data: str) -> JSON:
    """A PDF document block with base64 data."""
    return {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": data}}


def search_result(text: str) -> JSON:
    """A search result block holding one text block."""
    return {
        "type": "search_result",
        "source": "https://example.com/page",
        "title": "A page",
        "content": [{"type": "text", "text": text}],
    }


def size(block: JSON) -> int:
    """A non-text block's size: the characters of its JSON."""
    return len(json.dumps(block, ensure_ascii=False))


SMALL_IMAGE: Final = image("iVBORw0KGgo=")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(
            [{"type": "text", "text": "a" * 4}, document("J" * 500)],
            [
                {
                    "type": "text",
                    "text": f"aaaa\n[truncated: {size(document('J' * 500))} more characters; "
                    "blocks left out: 1 document]",
                }
            ],
            id="document-left-out-whole",
        ),
        pytest.param(
            [image("A" * 500), image("B" * 500), {"type": "text", "text": "after"}],
            [
                {
                    "type": "text",
                    "text": f"[truncated: {2 * size(image('A' * 500)) + 5} more characters; "
                    "blocks left out: 2 image]",
                }
            ],
            id="images-left-out-whole",
        ),
        pytest.param(
            [search_result("s" * 500), {"type": "text", "text": "b" * 3}],
            [
                {
                    "type": "text",
                    "text": "[truncated: "
                    + str(size(search_result("s" * 500)) + 3)
                    + " more characters; blocks left out: 1 search_result]",
                }
            ],
            id="search-result-left-out-and-all-after-it",
        ),
        pytest.param(
            [SMALL_IMAGE, {"type": "text", "text": "c" * 200}],
            [
                SMALL_IMAGE,
                {
                    "type": "text",
                    "text": "c" * (120 - size(SMALL_IMAGE))
                    + f"\n[truncated: {size(SMALL_IMAGE) + 80} more characters]",
                },
            ],
            id="a-block-that-fits-counts-towards-the-limit",
        ),
        pytest.param(
            [SMALL_IMAGE, {"type": "text", "text": "ok"}],
            [SMALL_IMAGE, {"type": "text", "text": "ok"}],
            id="blocks-within-the-limit-pass-whole",
        ),
    ],
)
async def test_every_kind_of_block_counts_towards_the_output_limit(
    value: list[JSON], expected: list[JSON]
) -> None:
    """Images, documents and search results count by their JSON; a block that does not fit whole is
    left out (its base64 data never cut), and the marker says how much was cut and which blocks."""

    result = await produced(value, budget=Budget(max_steps=4, max_tool_output_chars=120))
    assert answers(result) == [{"type": "tool_result", "tool_use_id": "toolu_1", "content": expected}]


async def test_a_huge_document_neither_reaches_the_model_nor_the_checkpoint() -> None:
    """A 2 MB document block under the default limit (100,000 characters): the model gets a marker
    instead, and the state a checkpoint saves stays small."""

    @tool
    async def fetch(key: str) -> object:
        """Return a huge PDF."""
        return [{"type": "text", "text": "the report:"}, document("J" * 2_000_000)]

    client = ScriptedClient([tool_use(("fetch", {"key": "k"}, "toolu_1")), text("done")])
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[fetch],
        budget=Budget(max_steps=4),
        observers=Observers(metrics=None),
    )
    result = await run(loop)
    assert result.stop_reason is StopReason.COMPLETED
    [answer] = answers(result)
    [block] = answer["content"]
    assert block["text"].startswith("the report:\n[truncated: 2")
    assert block["text"].endswith("more characters; blocks left out: 1 document]")
    assert len(json.dumps(client.requests[-1]["messages"])) < 10_000
    assert len(result.state.to_json()) < 100_000


async def test_a_huge_exception_message_is_bounded_like_a_result() -> None:
    """A tool's exception text is what the model sees of it: it counts toward the same limit."""

    @tool
    async def fetch(key: str) -> str:
        """Fail with a huge message."""
        raise RuntimeError("E" * 50_000)

    client = ScriptedClient([tool_use(("fetch", {"key": "k"}, "toolu_1")), text("done")])
    loop = AgentLoop(
        client,
        model="claude-sonnet-4-6",
        tools=[fetch],
        budget=Budget(max_steps=4, max_tool_output_chars=1_000),
        observers=Observers(metrics=None),
    )
    result = await run(loop)
    [answer] = answers(result)
    assert answer["is_error"] is True
    content = answer["content"]
    assert isinstance(content, str)
    assert content.startswith("RuntimeError: EEE")
    assert content.endswith("[truncated: 49014 more characters]")
    assert len(result.state.to_json()) < 20_000


# -- threads -----------------------------------------------------------------------------


async def test_sync_handlers_run_in_a_worker_thread() -> None:
    """A sync handler runs on another thread than the event loop, which async handlers run on."""
    threads: dict[str, int] = {}

    @tool
    async def on_loop(key: str) -> str:
        """Records the event loop's thread."""
        threads["async"] = threading.get_ident()
        return key

    @tool
    def in_thread(key: str) -> str:
        """Records its own thread."""
        threads["sync"] = threading.get_ident()
        return key

    script = [tool_use(("on_loop", {"key": "a"}), ("in_thread", {"key": "b"})), text("done")]
    result = await run(make_loop(script, [on_loop, in_thread]))
    assert result.stop_reason is StopReason.COMPLETED
    assert threads["async"] == threading.get_ident()  # the test body runs on the event loop's thread
    assert threads["sync"] != threads["async"]


# -- huge batches ------------------------------------------------------------------------


def batch_of(count: int) -> JSON:
    """One response asking for `count` calls of `ping`, each with its own input."""
    return tool_use(*[("ping", {"n": n}, f"toolu_{n:06d}") for n in range(count)])


ON_CHECK: contextvars.ContextVar[Callable[[], None]] = contextvars.ContextVar("ON_CHECK")
"""Called by the input check of `Checked`: a hook into the validation of a batch."""


def _on_check(n: int) -> int:
    ON_CHECK.get()()
    return n


Checked = Annotated[int, pydantic.AfterValidator(_on_check)]


class Pings:
    """`ping`: counts the calls that started; each waits until it is cancelled."""

    def __init__(self, on_start: anyio.Event | None = None) -> None:
        self.started = 0
        self.on_start = on_start

        @tool
        async def ping(n: int) -> str:
            """Wait until cancelled."""
            self.started += 1
            if self.on_start is not None:
                self.on_start.set()
            await anyio.Event().wait()
            return "pong"

        self.tool = ping


async def test_all_results_of_a_large_batch_come_back_in_one_user_message_in_block_order() -> None:
    """Every call of a 3,000-call batch runs once and is answered in block order, in one message."""
    count = 3_000

    @tool
    async def ping(n: int) -> str:
        """Answer with the number."""
        return f"pong {n}"

    result = await run(make_loop([batch_of(count), text("done")], [ping]))
    assert result.stop_reason is StopReason.COMPLETED
    assert_valid_transcript(result.messages)
    assert answers(result) == [
        {"type": "tool_result", "tool_use_id": f"toolu_{n:06d}", "content": f"pong {n}"} for n in range(count)
    ]
    assert [observation.attempts for observation in result.state.observations] == [1] * count


@pytest.mark.parametrize(("limit", "at_once"), [(2, 2), (3, 3), (None, 5)])
async def test_max_parallel_tools_bounds_the_calls_of_a_batch_that_run_at_once(
    limit: int | None, at_once: int
) -> None:
    """With `Budget(max_parallel_tools=N)`, N calls of a 5-call batch start and the others wait
    for a place; without it all 5 start at once."""
    started: list[int] = []
    release = anyio.Event()

    @tool
    async def hold(n: int) -> str:
        """Wait for the test's release."""
        started.append(n)
        await release.wait()
        return f"done {n}"

    script = [tool_use(*[("hold", {"n": n}, f"toolu_{n}") for n in range(5)]), text("done")]
    loop = make_loop(script, [hold], budget=Budget(max_steps=4, max_parallel_tools=limit))
    results: list[LoopResult] = []

    async def running() -> None:
        results.append(await run(loop))

    async with anyio.create_task_group() as group:
        group.start_soon(running)
        await anyio.wait_all_tasks_blocked()  # every call that may start has started, and waits
        assert len(started) == at_once
        release.set()
    assert sorted(started) == list(range(5))
    assert results[0].stop_reason is StopReason.COMPLETED
    assert [answer["content"] for answer in answers(results[0])] == [f"done {n}" for n in range(5)]


@pytest.mark.parametrize("limit", [0, -1, 1.5, True])
def test_max_parallel_tools_is_a_positive_int(limit: object) -> None:
    """A limit of no calls, or of part of one, is a mistake named at construction."""
    with pytest.raises(ConfigurationError, match="max_parallel_tools"):
        Budget(max_steps=1, max_parallel_tools=limit)  # type: ignore[arg-type]


async def test_a_cancel_during_the_validation_of_a_huge_batch_stops_it_before_any_call_starts() -> None:
    """The cancel event is set while the batch is validated (by the input check of its first
    call): validation yields every few hundred calls, so the run stops before any handler runs
    (before the fix, the whole batch was validated and started before the cancel could cut in).
    The run's deadline is the same cancel scope."""
    count = 2_000
    cancel = anyio.Event()
    started: list[int] = []

    @tool
    async def ping(n: Checked) -> str:
        """Record the start."""
        started.append(n)
        return "pong"

    ON_CHECK.set(cancel.set)
    result = await run(make_loop([batch_of(count), text("done")], [ping]), cancel=cancel)
    assert result.stop_reason is StopReason.CANCELLED
    assert started == []
    assert_valid_transcript(result.messages)
    replies = answers(result)
    assert [reply["tool_use_id"] for reply in replies] == [f"toolu_{n:06d}" for n in range(count)]
    assert {reply["content"] for reply in replies} == {"not run: cancelled"}


async def test_a_huge_batch_past_its_deadline_stops_with_timeout_and_every_call_answered() -> None:
    """A 5,000-call batch of calls that never finish, under a small timeout_s: the run stops with
    `timeout`, each call answered once, in block order, as interrupted or not run."""
    count = 5_000
    pings = Pings()
    budget = Budget(max_steps=4, timeout_s=0.05)
    result = await run(make_loop([batch_of(count), text("done")], [pings.tool], budget=budget))
    assert result.stop_reason is StopReason.TIMEOUT
    assert_valid_transcript(result.messages)
    replies = answers(result)
    assert [reply["tool_use_id"] for reply in replies] == [f"toolu_{n:06d}" for n in range(count)]
    interrupted = sum(reply["content"].startswith("interrupted while running (timeout)") for reply in replies)
    assert interrupted == pings.started
    # Not run: cut off in validation or in the batch's start, or refused at the batch's budget check.
    assert sum(reply["content"].startswith("not run: timeout") for reply in replies) == count - pings.started


async def test_a_cancel_while_a_huge_batch_starts_stops_the_calls_not_yet_started() -> None:
    """The first call to start sets the cancel event: the batch stops starting calls within a
    few hundred more (before the fix, all 5,000 started before the cancel could cut in)."""
    count = 5_000
    cancel = anyio.Event()
    pings = Pings(on_start=cancel)
    result = await run(make_loop([batch_of(count), text("done")], [pings.tool]), cancel=cancel)
    assert result.stop_reason is StopReason.CANCELLED
    assert 0 < pings.started < count // 2
    assert_valid_transcript(result.messages)
    replies = answers(result)
    assert [reply["tool_use_id"] for reply in replies] == [f"toolu_{n:06d}" for n in range(count)]
    interrupted = [reply for reply in replies if reply["content"].startswith("interrupted while running")]
    assert len(interrupted) == pings.started  # a started call's effect is unknown; the others did not run
    assert sum(reply["content"] == "not run: cancelled" for reply in replies) == count - pings.started
