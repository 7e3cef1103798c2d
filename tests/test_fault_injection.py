"""Fault injection through the real SDK: a stateful campaign over a fake Messages API.

`FaultCampaign` (a hypothesis `RuleBasedStateMachine`) builds one `AgentLoop` per example on
`tests.fake_api.FakeAPI`, queues replies (valid tool_use batches, end_turn, pause_turn,
max_tokens, refusal, unknown stop reasons, malformed bodies, HTTP errors, dropped connections,
garbage) and runs the loop, sometimes cancelled by an event a tool sets, or from outside.
After every run, on both anyio backends, `check_run` asserts what must hold whatever the API
sent; `metrics_add_up` checks the Prometheus counters after every step.

The campaign's length is `BOUNDLOOP_FUZZ_EXAMPLES` (examples per backend, default 30) and
`BOUNDLOOP_FUZZ_STEPS` (rules per example, default 12); `scripts/fuzz` runs a long one.
The regression tests at the end pin single faults, and the two library bugs the campaign
found (a secret in an unknown stop_reason written raw into the trace; a run stopped in its
first checkpoint never recorded nor counted), both fixed since.
"""

from __future__ import annotations

import dataclasses
import json
import os
import string
import sys
from collections import Counter, deque
from collections.abc import Callable, Iterator
from typing import Any, Final, Literal, cast

import anyio
import anyio.lowlevel
import pytest
from hypothesis import HealthCheck, event, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
)
from prometheus_client import CollectorRegistry

from boundloop import (
    AgentLoop,
    Budget,
    Event,
    LoopMetrics,
    LoopResult,
    LoopState,
    MemoryStore,
    Observers,
    Policy,
    RetryableToolError,
    StopReason,
    StoredRun,
    Tool,
    ToolContext,
    UnhandledStop,
    tool,
)
from boundloop.checkpoint import Status
from boundloop.redaction import Redaction
from boundloop.transcript import transcript_errors
from tests.fake_api import (
    ERROR_TYPES,
    MODEL,
    ApiError,
    Body,
    Cut,
    Drop,
    DropKind,
    FakeAPI,
    Hang,
    Raw,
    Reply,
    message,
    text_block,
    tool_use_block,
)

JSON = dict[str, Any]

EXAMPLES: Final = int(os.environ.get("BOUNDLOOP_FUZZ_EXAMPLES", "30"))
"""Examples per backend; `scripts/fuzz` raises it for a long campaign."""
STEPS: Final = int(os.environ.get("BOUNDLOOP_FUZZ_STEPS", "12"))
"""Rules per example (queued replies and runs)."""
CAMPAIGN: Final = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

LOOP_NAME: Final = "fuzz"
GOAL: Final = "Decide whether refund evidence is sufficient for order O-104."
API_KEY_PREFIX: Final = "sk-ant-api03-"
"""Every API key the campaign plants starts with this; the built-in redactor removes them."""
FAKE_SECRET: Final = "hunter2-c0ffee-5ecret"
"""Not an API key: only the loop's own `Redaction.hook` removes it."""
TOOL_ERROR_KEY: Final = API_KEY_PREFIX + "T00lErr0rS3cretT00lE"
"""An API key inside the tools' exception messages."""
KEY_CHARS: Final = string.ascii_letters + string.digits + "_-"
REGISTERED: Final = ("read_order", "flaky", "slow_lookup", "apply_credit", "issue_refund")
UNKNOWN_LABEL: Final = "_unknown"
OUTCOMES: Final = ("ok", "error", "denied", "invalid", "timeout", "cancelled", "repeated", "invalid_result")
"""`boundloop_tool_calls_total`'s `outcome` values (README, Metrics)."""
API_STOP_REASONS: Final = frozenset(
    {
        "end_turn",
        "stop_sequence",
        "tool_use",
        "pause_turn",
        "max_tokens",
        "refusal",
        "model_context_window_exceeded",
    }
)
"""The API's stop reasons the loop routes (README, Routing); anything else raises UnhandledStop."""

CancelMode = Literal["none", "event", "outer_from_tool", "outer_deadline"]
Category = Literal["message", "unknown_stop", "fault"]
"""What a queued reply is: a valid Message, a Message with an unhandled stop_reason, or a
fault the run must fail on (malformed, an error status, a drop, garbage, an empty queue)."""


def hide_fake_secret(text: str) -> str:
    """The loop's `Redaction.hook`."""
    return text.replace(FAKE_SECRET, "[fake secret]")


def leaks(text: str) -> bool:
    """Whether `text` holds a planted secret (the redactor replaces a whole key, prefix included)."""
    return API_KEY_PREFIX in text or FAKE_SECRET in text


class YieldingStore:
    """A `MemoryStore` whose save yields to the event loop first, like `SQLiteStore`'s worker thread.

    With `fail=True` every save raises `OSError` instead (a full disk).
    """

    def __init__(self, *, fail: bool = False) -> None:
        self.inner = MemoryStore()
        self.fail = fail

    async def save(self, state: LoopState) -> None:
        """Checkpoint (a cancellation point), then snapshot the state."""
        await anyio.lowlevel.checkpoint()
        if self.fail:
            raise OSError("disk full")
        await self.inner.save(state)

    async def load(self, task_id: str) -> LoopState | None:
        """The last snapshot of `task_id`, or None."""
        return await self.inner.load(task_id)

    async def list(self, *, status: Status | None = None, stop_reason: str | None = None) -> list[StoredRun]:
        """The stored runs, newest first."""
        return await self.inner.list(status=status, stop_reason=stop_reason)

    async def delete(self, task_id: str) -> bool:
        """Forget a task."""
        return await self.inner.delete(task_id)


class World:
    """The tools of one example, and what they actually did."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        """Every handler invocation, by tool name."""
        self.attempts: Counter[str] = Counter()
        """apply_credit invocations per idempotency key."""
        self.effects: Counter[str] = Counter()
        """apply_credit effects applied per idempotency key."""
        self.trip: Callable[[], object] | None = None
        """What slow_lookup does first in this run: set the cancel event, cancel the caller."""
        self.tripped = False
        world = self

        @tool
        async def read_order(order_id: str) -> dict[str, str]:
            """Read one order by id."""
            world.ran.append("read_order")
            return {"order_id": order_id, "status": "delivered", "internal": f"token {FAKE_SECRET}"}

        @tool
        async def flaky(mode: str) -> str:
            """An upstream that fails (retryably or not) or breaks its declared type unless mode is 'ok'."""
            world.ran.append("flaky")
            if mode == "retry":
                raise RetryableToolError(f"upstream busy, key {TOOL_ERROR_KEY}", retry_after_s=0.0)
            if mode == "crash":
                raise RuntimeError(f"upstream down ({FAKE_SECRET})")
            if mode == "malformed":  # breaks the declared `-> str`: the outcome invalid_result
                return cast(str, {"unexpected": FAKE_SECRET})
            return "fine"

        @tool
        async def slow_lookup(key: str, delay_ms: int) -> str:
            """A slow lookup."""
            world.ran.append("slow_lookup")
            if world.trip is not None:
                world.tripped = True
                world.trip()
            await anyio.sleep(max(0, min(delay_ms, 50)) / 1000)
            return f"value-{key}"

        @tool(side_effect=True)
        async def apply_credit(order_id: str, ctx: ToolContext) -> str:
            """Credit an order; the effect belongs to ctx.idempotency_key."""
            world.ran.append("apply_credit")
            key = ctx.idempotency_key
            world.attempts[key] += 1
            if order_id == "O-retry" and world.attempts[key] == 1:
                raise RetryableToolError("ledger locked", retry_after_s=0.0)  # before the effect
            world.effects[key] += 1  # deliberately no dedupe: the loop must not call twice per key
            return f"credited {order_id}"

        @tool
        async def issue_refund(order_id: str, amount: float) -> str:
            """Refund an order (forbidden by the policy)."""
            world.ran.append("issue_refund")
            return "refunded"

        self.tools: list[Tool] = [read_order, flaky, slow_lookup, apply_credit, issue_refund]


# -- what the model "says" -----------------------------------------------------------------

api_keys = st.text(alphabet=KEY_CHARS, min_size=20, max_size=20).map(lambda tail: API_KEY_PREFIX + tail)
secret_texts = st.one_of(
    api_keys.map(lambda key: f"my key is {key}."),
    st.just(f"the password is {FAKE_SECRET}"),
    api_keys.map(lambda key: f"{key}{FAKE_SECRET}"),
)
texts = st.one_of(st.none(), st.text(max_size=12), secret_texts)
delays = st.sampled_from([0.0, 0.0, 0.0, 0.001, 0.01, 0.03])
"""Latency of a reply, modelled with anyio.sleep inside the fake."""
usages = st.fixed_dictionaries(
    {
        "input_tokens": st.integers(0, 60) | st.integers(0, 400),
        "output_tokens": st.integers(0, 30) | st.integers(0, 300),
    },
    optional={
        "cache_read_input_tokens": st.integers(0, 150),
        "cache_creation_input_tokens": st.integers(0, 150),
    },
)
VALID_INPUTS: Final[dict[str, st.SearchStrategy[JSON]]] = {
    "read_order": st.fixed_dictionaries({"order_id": st.sampled_from(["O-1", "O-2"]) | secret_texts}),
    "flaky": st.fixed_dictionaries({"mode": st.sampled_from(["ok", "retry", "crash", "malformed"])}),
    "slow_lookup": st.fixed_dictionaries(
        {"key": st.sampled_from(["a", "b"]), "delay_ms": st.integers(0, 20)}
    ),
    "apply_credit": st.fixed_dictionaries({"order_id": st.sampled_from(["O-1", "O-retry"])}),
    "issue_refund": st.fixed_dictionaries(
        {"order_id": st.just("O-1"), "amount": st.floats(0, 500, allow_nan=False)}
    ),
}
odd_inputs = st.dictionaries(
    st.sampled_from(["order_id", "mode", "key", "x"]),
    st.none() | st.integers() | st.text(max_size=4),
    max_size=2,
)


@st.composite
def proposed_calls(draw: st.DrawFn) -> tuple[str, JSON]:
    """One tool_use: a registered tool (often the forbidden one), an unknown name, or a secret name."""
    kind = draw(st.sampled_from([*REGISTERED, "issue_refund", "unknown", "secret"]))
    if kind == "unknown":
        name = draw(st.sampled_from(["ghost", "delete_everything", "Read_Order"]))
    elif kind == "secret":
        name = draw(st.sampled_from(["", "lookup_"])) + draw(api_keys | st.just(FAKE_SECRET))
    else:
        name = kind
    valid = VALID_INPUTS.get(name)
    tool_input = draw(odd_inputs) if valid is None else draw(st.one_of(valid, valid, odd_inputs))
    return name, tool_input


def nested(depth: int) -> JSON:
    """An object nested `depth` levels deep."""
    value: JSON = {"leaf": 1}
    for _ in range(depth):
        value = {"deeper": value}
    return value


MALFORMED: Final[dict[str, Callable[[JSON], object]]] = {
    "content_str": lambda call: message("hello"),
    "content_dict": lambda call: message({"type": "text", "text": "hi"}),
    "content_null": lambda call: message(None),
    "null_text": lambda call: message([text_block(None)]),
    "block_without_type": lambda call: message([{"text": "untyped"}]),
    "tool_use_without_id": lambda call: message([{k: v for k, v in call.items() if k != "id"}], "tool_use"),
    "tool_use_empty_id": lambda call: message([{**call, "id": ""}], "tool_use"),
    "duplicate_ids": lambda call: message([call, {**call, "input": {"order_id": "O-2"}}], "tool_use"),
    "tool_use_without_name": lambda call: message([{**call, "name": None}], "tool_use"),
    "input_not_object": lambda call: message([{**call, "input": "O-1"}], "tool_use"),
    "deep_nesting": lambda call: message([{**call, "input": nested(200)}], "tool_use"),
    "huge_input": lambda call: message([{**call, "input": {"x": list(range(20_000))}}], "tool_use"),
    "usage_missing": lambda call: {k: v for k, v in message([text_block("hi")]).items() if k != "usage"},
    "usage_null": lambda call: message([text_block("hi")], usage=None),
    "usage_negative": lambda call: message([text_block("hi")], input_tokens=-5),
    "usage_bool": lambda call: message([text_block("hi")], output_tokens=True),
    "usage_float": lambda call: message([text_block("hi")], input_tokens=1.5),
    "stop_reason_int": lambda call: message([text_block("hi")], 7),
    "stop_reason_list": lambda call: message([text_block("hi")], ["end_turn"]),
    "stop_reason_dict": lambda call: message([call], {"reason": "tool_use"}),
}
"""200 bodies the boundary must refuse (the run fails with the fault in state.errors), each
built around a valid tool_use block."""
MALFORMED_KINDS: Final = tuple(MALFORMED)


def malformed(kind: str, call_id: str) -> object:
    """The malformed body `kind`, around a tool_use with id `call_id`."""
    return MALFORMED[kind](tool_use_block(call_id, "read_order", {"order_id": "O-1"}))


VALID_BYTES: Final = json.dumps(message([text_block("a complete answer")])).encode()


GARBAGE: Final[dict[str, Reply]] = {
    "html": Raw(content=b"<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
    "truncated_json": Raw(content=VALID_BYTES[: len(VALID_BYTES) // 2]),
    "empty": Raw(content=b""),
    "json_array": Raw(content=b"[]"),
    "binary": Raw(content=bytes(range(256))),
    "error_shape_200": Body(json={"type": "error", "error": {"type": "api_error", "message": "x"}}),
    "cut_mid_body": Cut(sent=VALID_BYTES[: len(VALID_BYTES) // 3]),
}
"""200s that are not a Message at all: HTML, cut JSON, nothing, bytes, an error body, a body
that breaks off mid-stream."""
GARBAGE_KINDS: Final = tuple(GARBAGE)


# -- one run and what is checked after it --------------------------------------------------


@dataclasses.dataclass(slots=True)
class RunOutcome:
    """What one `loop.run` left behind, however it ended."""

    task_id: str
    cancel_mode: CancelMode
    result: LoopResult | None
    """None when the run was cancelled from outside (the cancellation was re-raised)."""
    unhandled: UnhandledStop | None
    cancelled_outside: bool
    events: list[Event]
    """Every trace event, as the run's `on_event` hook saw it."""
    stored: LoopState | None
    """The last checkpoint of the task."""
    tripped: bool
    """slow_lookup ran and set the cancel event or cancelled the caller."""
    served: list[Category]
    """What the fake answered each request of this run with."""
    requests: list[JSON]


def leak_paths(value: object, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The paths (keys only, list indices dropped) of every string in `value` holding a secret."""
    if isinstance(value, str):
        if leaks(value):
            yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from leak_paths(item, (*path, str(key)))
    elif isinstance(value, list):
        for item in value:
            yield from leak_paths(item, path)


def input_tokens_of(state: LoopState) -> list[tuple[int, int]]:
    """Per accepted response: (its input tokens, cache included; the loop's estimate of it)."""
    pairs: list[tuple[int, int]] = []
    estimate = 0  # the previous response's input and output: the next input is at least that
    for response in state.responses:
        usage = response.usage
        taken = (
            usage.input_tokens
            + (usage.cache_read_input_tokens or 0)
            + (usage.cache_creation_input_tokens or 0)
        )
        pairs.append((taken, estimate))
        estimate = taken + usage.output_tokens
    return pairs


class FaultCampaign(RuleBasedStateMachine):
    """Queue any replies on the fake API, run the loop, and check what must always hold."""

    backend: str = "asyncio"

    def __init__(self) -> None:
        super().__init__()
        self.api = FakeAPI()
        self.pending: deque[Category] = deque()
        self.registry = CollectorRegistry()
        self.store = YieldingStore()
        self.world = World()
        self.ids = 0
        self.runs = 0
        self.stop_reasons: Counter[str] = Counter()
        self.tool_calls: Counter[tuple[str, str]] = Counter()
        self.model_requests: Counter[str] = Counter()
        self.tokens: Counter[str] = Counter()
        self.loop: AgentLoop | None = None
        self.budget = Budget(max_steps=1)

    @initialize(
        max_steps=st.integers(1, 6),
        max_tool_calls=st.none() | st.integers(0, 8),
        max_total_tokens=st.none() | st.integers(40, 400) | st.integers(400, 3000),
        timeout_s=st.none() | st.sampled_from([0.02, 0.2, 5.0]),
        tool_timeout_s=st.none() | st.sampled_from([0.005, 1.0]),
        max_tool_retries=st.integers(0, 2),
        max_consecutive_tool_errors=st.integers(1, 4),
        max_repeated_calls=st.integers(0, 3),
        on_exhausted=st.sampled_from(["stop", "final_answer"]),
        on_forbidden=st.sampled_from(["stop", "report"]),
        on_max_tokens=st.sampled_from(["stop", "continue"]),
        on_tool_error=st.sampled_from(["report", "stop"]),
        max_tokens=st.sampled_from([16, 256, 4096]),
    )
    def build_loop(
        self,
        max_steps: int,
        max_tool_calls: int | None,
        max_total_tokens: int | None,
        timeout_s: float | None,
        tool_timeout_s: float | None,
        max_tool_retries: int,
        max_consecutive_tool_errors: int,
        max_repeated_calls: int,
        on_exhausted: Literal["stop", "final_answer"],
        on_forbidden: Literal["stop", "report"],
        on_max_tokens: Literal["stop", "continue"],
        on_tool_error: Literal["report", "stop"],
        max_tokens: int,
    ) -> None:
        """A fresh loop on a fresh fake API, registry, store and tools."""
        self.budget = Budget(
            max_steps=max_steps,
            max_tool_calls=max_tool_calls,
            max_total_tokens=max_total_tokens,
            timeout_s=timeout_s,
            tool_timeout_s=tool_timeout_s,
            max_tool_retries=max_tool_retries,
            retry_backoff_s=0.0,
            max_consecutive_tool_errors=max_consecutive_tool_errors,
            max_repeated_calls=max_repeated_calls,
            on_exhausted=on_exhausted,
        )
        self.loop = AgentLoop(
            self.api.client(),
            model=MODEL,
            tools=self.world.tools,
            budget=self.budget,
            policy=Policy(
                forbidden={"issue_refund"},
                on_forbidden=on_forbidden,
                on_max_tokens=on_max_tokens,
                on_tool_error=on_tool_error,
            ),
            max_tokens=max_tokens,
            name=LOOP_NAME,
            redaction=Redaction(hook=hide_fake_secret),
            observers=Observers(metrics=LoopMetrics(registry=self.registry)),
            store=self.store,
        )

    # -- replies -------------------------------------------------------------------------

    def queue(self, reply: Reply, category: Category) -> None:
        self.api.push(reply)
        self.pending.append(category)

    def new_id(self) -> str:
        self.ids += 1
        return f"toolu_{self.ids:04d}"

    def respond(self, content: object, stop_reason: object, usage: JSON, delay: float, **fields: Any) -> None:
        body = message(content, stop_reason, usage=usage, n=self.ids, **fields)
        handled = isinstance(stop_reason, str) and stop_reason in API_STOP_REASONS
        # A null stop_reason is a malformed response (a fault: the run fails, recorded), not an
        # unknown one (`UnhandledStop`).
        category: Category = "message" if handled else "fault" if stop_reason is None else "unknown_stop"
        self.queue(Body(json=body, delay_s=delay), category)

    @rule(
        calls=st.lists(proposed_calls(), min_size=1, max_size=3),
        text=texts,
        usage=usages,
        delay=delays,
        secret_id=st.none() | api_keys,
    )
    def queue_tool_use(
        self,
        calls: list[tuple[str, JSON]],
        text: str | None,
        usage: JSON,
        delay: float,
        secret_id: str | None,
    ) -> None:
        """A valid tool_use batch of 1-3 calls: sometimes the forbidden tool, unknown names, a secret
        in a tool name, in the text or (rarely) in the first tool_use id, odd inputs."""
        blocks = [] if text is None else [text_block(text)]
        for index, (name, tool_input) in enumerate(calls):
            call_id = self.new_id() if secret_id is None or index else f"toolu_{secret_id}"
            blocks.append(tool_use_block(call_id, name, tool_input))
        self.respond(blocks, "tool_use", usage, delay)

    @rule(
        kind=st.sampled_from(
            [
                "end_turn",
                "stop_sequence",
                "pause_turn",
                "max_tokens",
                "refusal",
                "context_exceeded",
                "unknown",
            ]
        ),
        text=texts,
        usage=usages,
        delay=delays,
        data=st.data(),
    )
    def queue_turn_end(
        self, kind: str, text: str | None, usage: JSON, delay: float, data: st.DataObject
    ) -> None:
        """A turn without tools to run: a final answer (end_turn, stop_sequence), a paused turn (sent
        back unchanged), output cut at max_tokens (sometimes inside a tool_use block), a refusal
        (its stop_details maybe holding a secret), a full context window, or a stop_reason no
        handler is declared for (the run raises UnhandledStop)."""
        blocks = [text_block(text or "done")]
        if kind == "max_tokens" and data.draw(st.booleans()):
            name = data.draw(st.sampled_from(["read_order", "ghost"]) | api_keys)
            blocks.append(tool_use_block(self.new_id(), name, {"order_id": "O-1"}))
        if kind == "refusal":
            details = {"type": "refusal", "category": "cyber", "explanation": text}
            self.respond(blocks, "refusal", usage, delay, stop_details=details)
        elif kind == "context_exceeded":
            self.respond(blocks, "model_context_window_exceeded", usage, delay)
        elif kind == "unknown":
            reason = data.draw(
                st.sampled_from(["brand_new_reason", None]) | api_keys.map(lambda key: f"new_{key}")
            )
            self.respond(blocks, reason, usage, delay)
        else:
            self.respond(blocks, kind, usage, delay)

    @rule(
        rounds=st.lists(
            st.lists(
                st.sampled_from(["read_order", "flaky", "slow_lookup", "apply_credit"]),
                min_size=1,
                max_size=3,
            ),
            min_size=1,
            max_size=3,
        ),
        data=st.data(),
    )
    def queue_well_formed_tool_use(self, rounds: list[list[str]], data: st.DataObject) -> None:
        """1-3 tool_use batches of registered, allowed tools with valid inputs: the model doing its job."""
        for calls in rounds:
            blocks = [tool_use_block(self.new_id(), name, data.draw(VALID_INPUTS[name])) for name in calls]
            self.respond(blocks, "tool_use", data.draw(usages), data.draw(delays))

    @rule(
        kind=st.sampled_from(["malformed", "http_error", "dropped", "garbage"]),
        delay=delays,
        data=st.data(),
    )
    def queue_fault(self, kind: str, delay: float, data: st.DataObject) -> None:
        """A fault the run must fail on: a malformed Message, an error status with the API's error
        JSON (its message sometimes holding a secret), a dropped connection, or garbage."""
        reply: Reply
        if kind == "malformed":
            reply = Body(
                json=malformed(data.draw(st.sampled_from(MALFORMED_KINDS)), self.new_id()), delay_s=delay
            )
        elif kind == "http_error":
            status = data.draw(st.sampled_from([400, 429, 500, 529]))
            text = f"bad key {TOOL_ERROR_KEY} / {FAKE_SECRET}" if data.draw(st.booleans()) else "try later"
            reply = ApiError(status=status, type=ERROR_TYPES[status], message=text, delay_s=delay)
        elif kind == "dropped":
            drop: DropKind = data.draw(st.sampled_from(["connect", "protocol", "read_timeout"]))
            reply = Drop(kind=drop, delay_s=delay)
        else:
            reply = GARBAGE[data.draw(st.sampled_from(GARBAGE_KINDS))]
        self.queue(reply, "fault")

    # -- runs ----------------------------------------------------------------------------

    @rule(
        cancel_mode=st.sampled_from(["none", "none", "event", "outer_from_tool", "outer_deadline"]),
        deadline=st.sampled_from([0.0, 0.002, 0.005, 0.02, 0.05]),
        close=st.sampled_from([True, True, False]),
    )
    def run(self, cancel_mode: CancelMode, deadline: float, close: bool) -> None:
        """Run the loop on what is queued, usually closed by a final answer (the fake answers 500
        once its queue is empty)."""
        if close:
            self.respond(
                [text_block("closing answer")], "end_turn", {"input_tokens": 8, "output_tokens": 4}, 0.0
            )
        self.runs += 1
        served_before = len(self.api.served)
        requests_before = len(self.api.requests)
        outcome = anyio.run(self.run_once, f"run-{self.runs}", cancel_mode, deadline, backend=self.backend)
        served: list[Category] = [
            "fault" if kind == "empty" else self.pending.popleft() for kind in self.api.served[served_before:]
        ]
        outcome.served = served
        outcome.requests = self.api.requests[requests_before:]
        self.api.clear()  # each run answers from what was queued for it
        self.pending.clear()
        self.check_run(outcome)

    def teardown(self) -> None:
        """Every example ends with a run of what is still queued: swarm testing may have disabled
        the `run` rule for the whole example."""
        if self.loop is None or sys.exc_info()[0] is not None:
            return  # a failure is on its way out: never mask it with another run
        if self.pending or self.runs == 0:
            self.run("none", 0.0, close=True)
            self.metrics_add_up()

    async def run_once(self, task_id: str, cancel_mode: CancelMode, deadline: float) -> RunOutcome:
        assert self.loop is not None
        events: list[Event] = []
        cancel = anyio.Event() if cancel_mode == "event" else None
        result: LoopResult | None = None
        unhandled: UnhandledStop | None = None
        self.world.tripped = False
        with anyio.CancelScope() as outer:
            if cancel_mode == "outer_deadline":
                outer.deadline = anyio.current_time() + deadline
            self.world.trip = (
                cancel.set
                if cancel is not None
                else outer.cancel
                if cancel_mode == "outer_from_tool"
                else None
            )
            try:
                result = await self.loop.run(GOAL, task_id=task_id, cancel=cancel, on_event=events.append)
            except UnhandledStop as exc:
                unhandled = exc
                result = exc.result
        self.world.trip = None
        return RunOutcome(
            task_id=task_id,
            cancel_mode=cancel_mode,
            result=result,
            unhandled=unhandled,
            cancelled_outside=outer.cancelled_caught,
            events=events,
            stored=await self.store.load(task_id),
            tripped=self.world.tripped,
            served=[],
            requests=[],
        )

    def check_run(self, outcome: RunOutcome) -> None:
        """Everything that holds after any run, whatever the API sent."""
        loop = self.loop
        assert loop is not None
        note(f"run {outcome.task_id}: cancel={outcome.cancel_mode} served={outcome.served}")
        # The forbidden tool never ran.
        assert "issue_refund" not in self.world.ran
        result = outcome.result
        if outcome.cancelled_outside:
            # Cancellation from outside is re-raised: the only way out without a result.
            assert result is None, "a run cancelled from outside returned instead of re-raising"
        else:
            # A run returns a LoopResult, or raises UnhandledStop for a stop_reason no handler takes.
            assert result is not None
            assert isinstance(result.stop_reason, StopReason)
            assert result.stop_reason is result.state.stop_reason
            assert list(result.events) == outcome.events
        state = result.state if result is not None else outcome.stored
        # Even a run cancelled from outside (in its first checkpoint included) saved its stop.
        assert state is not None, "a run cancelled from outside left no checkpoint"
        assert isinstance(state.stop_reason, StopReason)
        note(f"stop: {state.stop_reason} ({state.stop_detail}), errors={[e.kind for e in state.errors]}")
        event(f"stop_reason={state.stop_reason}")
        event(f"tool calls run: {min(state.tool_calls, 3)}{'+' if state.tool_calls >= 3 else ''}")
        self.check_ending(outcome, state)
        self.check_transcripts(outcome, state)
        self.check_budgets(state)
        self.check_idempotency(state)
        self.check_secrets(outcome, state)
        self.check_checkpoint(outcome, state)
        self.count(state)

    def check_ending(self, outcome: RunOutcome, state: LoopState) -> None:
        """One stop event, last; the stop reason is explained by what happened, never spurious."""
        stop_reason = state.stop_reason
        kinds = [e.kind for e in outcome.events]
        assert kinds.count("stop") == 1, kinds
        assert kinds[-1] == "stop", kinds
        last = outcome.served[-1] if outcome.served else None
        if outcome.unhandled is not None:
            assert last == "unknown_stop"
            assert outcome.unhandled.stop_reason not in API_STOP_REASONS
            assert stop_reason is StopReason.FAILED
        if outcome.cancelled_outside:
            assert stop_reason is StopReason.CANCELLED or "the final-answer call was interrupted" in (
                state.stop_detail or ""
            ), (stop_reason, state.stop_detail)
        if stop_reason is StopReason.CANCELLED:
            assert outcome.cancelled_outside or outcome.tripped
        if stop_reason is StopReason.TIMEOUT:
            assert self.budget.timeout_s is not None
        interrupted = outcome.cancelled_outside or stop_reason in (StopReason.CANCELLED, StopReason.TIMEOUT)
        if last == "fault" and not interrupted:
            # A fault the run got ends it as failed, recorded (or, on the final-answer call of a
            # spent budget, keeps the budget's reason and says the call failed).
            # (a ceiling's stop then says it is resumable after it).
            final_call_failed = "; the final-answer call failed" in (state.stop_detail or "")
            assert stop_reason is StopReason.FAILED or final_call_failed, (stop_reason, state.stop_detail)
            assert state.errors
            assert state.errors[-1].kind in ("model_api", "model_response")
        if stop_reason is StopReason.FAILED and outcome.unhandled is None:
            assert last == "fault", outcome.served
        # Every request but the last was answered by a response the loop recorded.
        assert len(state.responses) <= len(outcome.served) <= len(state.responses) + 1

    @staticmethod
    def check_transcripts(outcome: RunOutcome, state: LoopState) -> None:
        """Every request carried a valid transcript and asked for output; the final one is valid."""
        for request in outcome.requests:
            assert transcript_errors(request["messages"]) == [], request["messages"]
            assert request["max_tokens"] >= 1
        # Roles alternate, every tool_use answered exactly once.
        assert transcript_errors(state.messages) == []

    def check_budgets(self, state: LoopState) -> None:
        """Steps, tool calls and tokens stay within the budget (tokens: the documented bound)."""
        budget = self.budget
        assert state.step <= budget.max_steps
        if budget.max_tool_calls is not None:
            assert state.tool_calls <= budget.max_tool_calls
        pairs = input_tokens_of(state)
        usage = state.usage
        outputs = [r.usage.output_tokens for r in state.responses]
        assert usage.total_tokens == sum(taken for taken, _ in pairs) + sum(outputs)
        if budget.max_total_tokens is not None:
            # The documented bound (README, "Stop reasons and budgets"): before each call, its
            # worst case - the input estimated from the previous call's input and output, plus
            # max_tokens - must fit, and max_tokens is clamped to what is left. The fake API, like
            # the real one, never returns more output than max_tokens. So call i ends at most at
            # max_total_tokens + (input_i - estimate_i): over the budget by at most the part of
            # one call's input (cache tokens included) the estimate missed, and so at most by the
            # largest input of any single response.
            missed = max((taken - estimate for taken, estimate in pairs), default=0)
            largest_input = max((taken for taken, _ in pairs), default=0)
            assert usage.total_tokens <= budget.max_total_tokens + max(0, missed), pairs
            assert usage.total_tokens <= budget.max_total_tokens + largest_input

    def check_idempotency(self, state: LoopState) -> None:
        """At most one effect per idempotency key; every ok call had its effect; every effect of
        this run belongs to one of its answered calls."""
        effects = self.world.effects
        assert all(count <= 1 for count in effects.values()), effects
        credits = [o for o in state.observations if o.tool == "apply_credit"]
        keys = {f"{state.task_id}:{o.step}:{o.tool_use_id}": o.outcome for o in credits}
        assert {key for key, outcome in keys.items() if outcome == "ok"} <= set(effects)
        assert {key for key in effects if key.startswith(f"{state.task_id}:")} <= set(keys)

    @staticmethod
    def check_checkpoint(outcome: RunOutcome, state: LoopState) -> None:
        """The last checkpoint is the stopped run (saved at the stop, shielded from cancellation),
        and the state survives its own JSON round trip whatever the API sent."""
        stored = outcome.stored
        assert stored is not None
        assert stored.phase == "stopped"
        assert stored.to_dict() == state.to_dict()
        assert LoopState.from_json(state.to_json()).to_dict() == state.to_dict()

    @staticmethod
    def check_secrets(outcome: RunOutcome, state: LoopState) -> None:
        """No planted secret in the trace, the recorded errors or the stop detail."""
        assert not leaks(state.stop_detail or ""), state.stop_detail
        trace_json = json.dumps([e.to_dict() for e in outcome.events])
        errors = state.to_dict()["errors"]
        if leaks(trace_json) or leaks(json.dumps(errors)):
            found = {
                (e.kind, *path[1:])
                for e in outcome.events
                for path in leak_paths(e.to_dict()["data"], ("data",))
            }
            raise AssertionError(f"a secret reached {found | set(leak_paths(errors, ('errors',)))}")

    def count(self, state: LoopState) -> None:
        """Add the run to what the metrics must show."""
        assert self.loop is not None
        tools = self.loop.tools
        self.stop_reasons[str(state.stop_reason)] += 1
        for o in state.observations:
            self.tool_calls[(o.tool if o.tool in tools else UNKNOWN_LABEL, o.outcome)] += 1
        for r in state.responses:
            reason = r.stop_reason if r.stop_reason in API_STOP_REASONS else UNKNOWN_LABEL
            self.model_requests[str(reason)] += 1
            self.tokens["input"] += r.usage.input_tokens
            self.tokens["output"] += r.usage.output_tokens

    @invariant()
    def metrics_add_up(self) -> None:
        """Runs, tool calls, model requests and tokens on the registry match what the runs recorded."""
        if self.loop is None:
            return
        # One collection of the registry per check: `get_sample_value` collects all of it on every
        # call, which made this invariant most of the campaign's time. One lookup goes through
        # it, and the snapshot must agree with it.
        snapshot = {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in self.registry.collect()
            for sample in family.samples
        }

        def value(name: str, **labels: str) -> float:
            if name.startswith("boundloop_runs_"):  # the run families carry the loop's version ("")
                labels = {"version": "", **labels}
            if name.startswith("boundloop_model_"):  # the model families carry the platform
                labels = {"platform": "anthropic", **labels}
            return snapshot.get((name, frozenset({"loop": LOOP_NAME, **labels}.items())), 0.0)

        active = self.registry.get_sample_value("boundloop_runs_active", {"loop": LOOP_NAME, "version": ""})
        assert active == value("boundloop_runs_active")
        assert active == 0
        runs = {str(reason): value("boundloop_runs_total", stop_reason=str(reason)) for reason in StopReason}
        assert value("boundloop_runs_total", stop_reason=UNKNOWN_LABEL) == 0
        assert sum(runs.values()) == self.runs
        assert runs == {str(reason): float(self.stop_reasons[str(reason)]) for reason in StopReason}
        labels = [*sorted(self.loop.tools), UNKNOWN_LABEL]
        counted = {
            (name, outcome): value("boundloop_tool_calls_total", tool=name, outcome=outcome)
            for name in labels
            for outcome in OUTCOMES
        }
        assert counted == {key: float(self.tool_calls[key]) for key in counted}
        assert sum(counted.values()) == sum(self.tool_calls.values())  # every outcome is a documented one
        requests = {
            reason: value("boundloop_model_requests_total", stop_reason=reason)
            for reason in [*API_STOP_REASONS, UNKNOWN_LABEL]
        }
        assert requests == {reason: float(self.model_requests[reason]) for reason in requests}
        for kind in ("input", "output"):
            assert value("boundloop_model_tokens_total", kind=kind) == self.tokens[kind]


class AsyncioCampaign(FaultCampaign):
    """Whatever the API answers, on asyncio, every run ends explained, bounded, valid, redacted, counted."""

    backend = "asyncio"


class TrioCampaign(FaultCampaign):
    """Whatever the API answers, on trio, every run ends explained, bounded, valid, redacted, counted."""

    backend = "trio"


# The campaign, as unittest cases pytest collects (so --hypothesis-show-statistics reports it).
TestAsyncioCampaign = AsyncioCampaign.TestCase
TestAsyncioCampaign.settings = CAMPAIGN
TestTrioCampaign = TrioCampaign.TestCase
TestTrioCampaign.settings = CAMPAIGN


# -- regressions: single faults through the real SDK ---------------------------------------


def fault_loop(api: FakeAPI, world: World, **options: Any) -> AgentLoop:
    """A loop on the fake API with the campaign's tools and policy, metrics off."""
    settings_: dict[str, Any] = {
        "model": MODEL,
        "tools": world.tools,
        "budget": Budget(max_steps=4),
        "policy": Policy(forbidden={"issue_refund"}),
        "observers": Observers(metrics=None),
        "redaction": Redaction(hook=hide_fake_secret),
    }
    settings_.update(options)
    return AgentLoop(api.client(), **settings_)


async def test_a_200_whose_content_is_not_a_list_fails_the_run_with_the_reason() -> None:
    """content: "hello" in a 200 ends the run as failed, the fault in state.errors."""
    world = World()
    api = FakeAPI([Body(json=message("hello"))])
    result = await fault_loop(api, world).run(GOAL)
    assert result.stop_reason is StopReason.FAILED
    assert result.state.errors[-1].kind == "model_response"
    assert "content is str, not a list" in result.state.errors[-1].message
    assert transcript_errors(result.messages) == []


async def test_duplicate_tool_use_ids_fail_the_run_and_no_tool_runs() -> None:
    """Two tool_use blocks sharing an id: failed, and neither call runs."""
    world = World()
    call = tool_use_block("toolu_dup", "read_order", {"order_id": "O-1"})
    api = FakeAPI([Body(json=message([call, {**call, "input": {"order_id": "O-2"}}], "tool_use"))])
    result = await fault_loop(api, world).run(GOAL)
    assert result.stop_reason is StopReason.FAILED
    assert "repeats the tool_use id 'toolu_dup'" in result.state.errors[-1].message
    assert world.ran == []
    assert transcript_errors(result.messages) == []


@pytest.mark.parametrize("kind", ["connect", "protocol", "read_timeout"])
async def test_a_dropped_connection_fails_the_run(kind: DropKind) -> None:
    """A connection dropped before any response (no SDK retries) ends the run as failed, recorded."""
    world = World()
    api = FakeAPI([Drop(kind=kind)])
    result = await fault_loop(api, world).run(GOAL)
    assert result.stop_reason is StopReason.FAILED
    assert result.state.errors[-1].kind == "model_api"
    assert result.state.errors[-1].type in ("APIConnectionError", "APITimeoutError")
    assert len(api.requests) == 1


@pytest.mark.parametrize("kind", GARBAGE_KINDS)
async def test_a_garbage_body_fails_the_run(kind: str) -> None:
    """A 200 that is not a Message (HTML, cut JSON, nothing, a body that breaks off) fails the run."""
    world = World()
    api = FakeAPI([Body(json=message([tool_use_block("t1", "read_order", {"order_id": "O-1"})], "tool_use"))])
    api.push(GARBAGE[kind])
    result = await fault_loop(api, world).run(GOAL)
    assert result.stop_reason is StopReason.FAILED
    assert result.state.errors[-1].kind in ("model_api", "model_response")
    assert world.ran == ["read_order"]
    assert transcript_errors(result.messages) == []


@pytest.mark.parametrize("reply", ["hang", "long_delay"])
async def test_a_slow_response_under_timeout_s_stops_the_run_with_timeout(reply: str) -> None:
    """A response that never comes (or comes far too late) ends the run with timeout at timeout_s."""
    world = World()
    started = anyio.Event()
    api = FakeAPI(
        [Hang(started=started) if reply == "hang" else Body(json=message([text_block("late")]), delay_s=3600)]
    )
    loop = fault_loop(api, world, budget=Budget(max_steps=4, timeout_s=0.05))
    with anyio.fail_after(30):  # the run ends by its own timeout, not by waiting for the reply
        result = await loop.run(GOAL)
    assert result.stop_reason is StopReason.TIMEOUT
    assert result.state.exceeded is not None
    assert result.state.exceeded.limit == "timeout_s"
    assert api.served == ["Hang" if reply == "hang" else "Body"]
    assert started.is_set() or reply == "long_delay"
    assert result.state.responses == []
    assert transcript_errors(result.messages) == []


# -- known bugs, reproduced minimally (strict: they fail once the library is fixed) ---------


async def test_a_secret_in_a_tool_name_or_id_reaches_neither_the_trace_nor_the_errors() -> None:
    """An API key or a `Redaction.hook` secret in an invented tool name or a tool_use id is redacted in the
    trace and state.errors."""
    key = API_KEY_PREFIX + "A" * 20
    calls = [
        tool_use_block("toolu_1", key, {}),
        tool_use_block("toolu_2", f"x{FAKE_SECRET}", {}),
        tool_use_block(f"toolu_{key}", "read_order", {"order_id": "O-1"}),
    ]
    api = FakeAPI([Body(json=message(calls, "tool_use")), Body(json=message([text_block("done")]))])
    result = await fault_loop(api, World(), budget=Budget(max_steps=4, max_consecutive_tool_errors=5)).run(
        GOAL
    )
    assert result.stop_reason is StopReason.COMPLETED
    assert [e.kind for e in result.state.errors] == ["invalid_action", "invalid_action"]
    assert not leaks(json.dumps([e.to_dict() for e in result.events]))
    assert not leaks(json.dumps(result.state.to_dict()["errors"]))


@pytest.mark.parametrize("field", ["stop_reason", "stop_sequence"])
async def test_a_secret_in_the_stop_reason_or_stop_sequence_never_reaches_the_trace(field: str) -> None:
    """An API key in a response's unknown stop_reason or its stop_sequence is redacted in the trace."""
    key = API_KEY_PREFIX + "A" * 20
    api = FakeAPI(
        [
            Body(json=message([text_block("?")], f"new_{key}"))
            if field == "stop_reason"
            else Body(json=message([text_block("done")], "stop_sequence", stop_sequence=key))
        ]
    )
    loop = fault_loop(api, World())
    if field == "stop_reason":
        with pytest.raises(UnhandledStop) as caught:
            await loop.run(GOAL)
        assert caught.value.result is not None
        trace = caught.value.result.events
    else:
        trace = (await loop.run(GOAL)).events
    assert key not in json.dumps([e.to_dict() for e in trace])


@pytest.mark.parametrize("how", ["cancelled", "store_fails"])
async def test_a_run_stopped_in_its_first_checkpoint_is_recorded_and_counted(how: str) -> None:
    """A run cancelled, or failing, in its first checkpoint is counted once and leaves runs_active at 0."""
    registry = CollectorRegistry()
    store = YieldingStore(fail=how == "store_fails")
    api = FakeAPI([Body(json=message([text_block("done")]))])
    loop = fault_loop(
        api, World(), observers=Observers(metrics=LoopMetrics(registry=registry)), store=store, name=LOOP_NAME
    )
    if how == "cancelled":
        with anyio.move_on_after(0):  # already expired: the first checkpoint is where it lands
            await loop.run(GOAL, task_id="t-1")
    else:  # the store's error ends the run as failed, recorded; run() returns
        failed = await loop.run(GOAL, task_id="t-1")
        assert failed.stop_reason is StopReason.FAILED
        assert [(e.kind, e.type) for e in failed.state.errors] == [
            ("exception", "OSError"),
            ("checkpoint", "OSError"),
        ]
    stop_reason = StopReason.CANCELLED if how == "cancelled" else StopReason.FAILED
    runs = {
        reason: registry.get_sample_value(
            "boundloop_runs_total", {"loop": LOOP_NAME, "version": "", "stop_reason": str(reason)}
        )
        for reason in StopReason
    }
    assert registry.get_sample_value("boundloop_runs_active", {"loop": LOOP_NAME, "version": ""}) == 0
    assert {reason: count for reason, count in runs.items() if count} == {stop_reason: 1.0}
    assert api.requests == []
    saved = await store.load("t-1")
    if how == "cancelled":  # the stop is saved, shielded from the cancellation
        assert saved is not None
        assert saved.stop_reason is StopReason.CANCELLED
    else:
        assert saved is None
