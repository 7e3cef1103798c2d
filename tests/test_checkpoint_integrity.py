"""A stored state is checked before a run continues from it, and can be signed.

Rows are edited as someone with write access to the store would: counters lowered, numbers
made negative or NaN, the turn's lists cut short, a waiting call renamed. Each is refused with
`CheckpointCorrupt` naming the field, on load and on resume, in a `MemoryStore` and a
`SQLiteStore`. With `AgentLoop(store=SignedStore(store, key))` any edit is refused (`signature`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from boundloop import (
    AgentLoop,
    Budget,
    CheckpointCorrupt,
    CheckpointStore,
    LoopState,
    MemoryStore,
    Observers,
    Policy,
    ScriptedClient,
    SQLiteStore,
    StopReason,
    ToolContext,
    tool,
)
from boundloop.checkpoint.signed import SignedStore
from boundloop.cli import main
from tests.helpers import text, tool_use
from tests.test_checkpoint import make_store

JSON = dict[str, Any]
Edit = Callable[[JSON], None]
ROOT = Path(__file__).resolve().parents[1]
KEY = b"a secret of the operators"

READS = tool_use(
    ("read_order", {"order_id": "O-1"}, "toolu_a"), ("read_order", {"order_id": "O-2"}, "toolu_b")
)
REFUND = tool_use(("issue_refund", {"order_id": "O-1"}, "toolu_refund"))


class Ledger:
    """What the tools did."""

    def __init__(self) -> None:
        self.reads: list[str] = []
        self.refunds: list[str] = []


def make_loop(
    ledger: Ledger,
    store: CheckpointStore,
    *,
    budget: Budget,
    script: list[JSON],
    key: bytes | str | None = None,
    **options: Any,
) -> AgentLoop:
    """Reads, and a refund that waits for a human's approval (its checkpoints signed with `key`)."""

    @tool
    async def read_order(order_id: str) -> str:
        """Read an order."""
        ledger.reads.append(order_id)
        return f"{order_id}: delivered late"

    @tool(side_effect=True, requires_approval=True)
    async def issue_refund(order_id: str, ctx: ToolContext) -> str:
        """Refund an order."""
        ledger.refunds.append(order_id)
        return f"refunded {order_id}"

    return AgentLoop(
        ScriptedClient(script),
        model="claude-sonnet-4-6",
        tools=[read_order, issue_refund],
        budget=budget,
        policy=Policy(escalation_tool="request_human"),
        store=store if key is None else SignedStore(store, key),
        observers=Observers(metrics=None),
        **options,
    )


@pytest.fixture(params=["memory", "sqlite"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def waiting_run(store: CheckpointStore, budget: Budget, **options: Any) -> tuple[Ledger, JSON]:
    """Two reads, then a refund waiting for approval: the stored row, as JSON."""
    ledger = Ledger()
    result = await make_loop(ledger, store, budget=budget, script=[READS, REFUND], **options).run(
        "Refund O-1?", task_id="t"
    )
    assert result.stop_reason is StopReason.NEEDS_HUMAN
    assert sorted(ledger.reads) == ["O-1", "O-2"]
    return ledger, json.loads(await stored_text(store))


async def stored_text(store: CheckpointStore) -> str:
    """The row of task `t` as stored (not through `load`)."""
    if isinstance(store, MemoryStore):
        return store._states["t"][1]  # pyright: ignore[reportPrivateUsage]
    assert isinstance(store, SQLiteStore)
    raw = await anyio.to_thread.run_sync(store._load, "t")  # pyright: ignore[reportPrivateUsage]
    assert raw is not None
    return raw


def set_field(path: str, value: object) -> Edit:
    def edit(row: JSON) -> None:
        *parents, last = path.split(".")
        target = row
        for name in parents:
            target = target[name]
        target[last] = value

    return edit


def shorten_answers(row: JSON) -> None:
    row["turn"]["answers"] = []


def rename_pending(row: JSON) -> None:
    row["pending_approvals"][0]["tool_use_id"] = "toolu_ghost"


def other_task(row: JSON) -> None:
    row["task_id"] = "t-other"


EDITS = [
    pytest.param(set_field("tool_calls", 0), "tool_calls", id="tool_calls-zeroed"),
    pytest.param(set_field("step", 0), "step", id="step-zeroed"),
    pytest.param(set_field("usage.input_tokens", 0), "usage.input_tokens", id="tokens-zeroed"),
    pytest.param(set_field("consecutive_tool_errors", -1), "consecutive_tool_errors", id="negative-count"),
    pytest.param(set_field("elapsed_s", -5.0), "elapsed_s", id="elapsed-negative"),
    pytest.param(set_field("elapsed_s", float("nan")), "elapsed_s", id="elapsed-nan"),
    pytest.param(set_field("usage.cost_usd", float("inf")), "usage.cost_usd", id="cost-infinite"),
    pytest.param(shorten_answers, "turn.answers", id="answers-shorter"),
    pytest.param(rename_pending, "pending_approvals", id="pending-matches-no-call"),
    pytest.param(other_task, "task_id", id="row-of-another-task"),
    pytest.param(set_field("stop_reason", None), "stop_reason", id="stopped-without-reason"),
    pytest.param(set_field("turn.decisions", ["execute"] * 9), "turn.decisions", id="decisions-longer"),
    pytest.param(set_field("turn.decisions", ["run_anyway"]), "turn.decisions[0]", id="not-a-decision"),
    pytest.param(set_field("turn.invoked", [7]), "turn.invoked", id="invoked-not-a-call"),
    pytest.param(set_field("turn.same_as", {"0": 5}), "turn.same_as", id="copy-of-no-call"),
    pytest.param(
        set_field("escalation", {"tool_use_id": "toolu_ghost", "reason": "?", "step": 1}),
        "escalation",
        id="escalation-no-call",
    ),
]


@pytest.mark.parametrize(("edit", "field"), EDITS)
async def test_an_edited_row_is_refused_naming_the_field(
    edit: Edit, field: str, kind: str, tmp_path: Path
) -> None:
    """On load and on resume: CheckpointCorrupt with `.field`; no tool runs, nothing is saved."""
    store, write_raw = make_store(kind, tmp_path)
    ledger, row = await waiting_run(store, Budget(max_steps=6, max_tool_calls=6))
    edit(row)
    await write_raw("t", json.dumps(row))  # Python's json writes NaN and Infinity as such
    with pytest.raises(CheckpointCorrupt) as loaded:
        await store.load("t")
    assert (loaded.value.task_id, loaded.value.field) == ("t", field), str(loaded.value)
    assert f"{field}: " in str(loaded.value)
    loop = make_loop(ledger, store, budget=Budget(max_steps=6, max_tool_calls=6), script=[text("done")])
    with pytest.raises(CheckpointCorrupt) as resumed:
        await loop.resume("t", approvals={row["pending_approvals"][0]["tool_use_id"]: True})
    assert resumed.value.field == field
    assert ledger.refunds == []
    assert await stored_text(store) == json.dumps(row)


@pytest.mark.parametrize(
    ("budget", "edit", "field", "stop"),
    [
        pytest.param(
            Budget(max_steps=6, max_tool_calls=2),
            set_field("tool_calls", 0),
            "tool_calls",
            StopReason.MAX_TOOL_CALLS,
            id="tools",
        ),
        pytest.param(
            Budget(max_steps=2, max_tool_calls=6),
            set_field("step", 0),
            "step",
            StopReason.MAX_STEPS,
            id="steps",
        ),
    ],
)
async def test_a_zeroed_counter_gives_no_fresh_budget(
    budget: Budget, edit: Edit, field: str, stop: StopReason, kind: str, tmp_path: Path
) -> None:
    """The run spent a budget before it waited. With the counter zeroed, the row is refused
    instead of running on a fresh budget; untouched, the resumed run still stops at the budget:
    the approved refund stops the run with `max_tool_calls` before it runs, or no model call
    follows it past `max_steps`."""
    store, write_raw = make_store(kind, tmp_path)
    ledger, row = await waiting_run(store, budget)
    original = json.dumps(row)
    edit(row)
    await write_raw("t", json.dumps(row))
    loop = make_loop(ledger, store, budget=budget, script=[text("done")] * 3)
    with pytest.raises(CheckpointCorrupt) as raised:
        await loop.resume("t", approvals={"toolu_refund": True})
    assert raised.value.field == field
    assert ledger.refunds == []
    await write_raw("t", original)
    result = await loop.resume("t", approvals={"toolu_refund": True})
    assert result.stop_reason is stop
    assert ledger.refunds == ([] if field == "tool_calls" else ["O-1"])
    assert result.state.step <= budget.max_steps
    assert budget.max_tool_calls is not None
    assert result.state.tool_calls <= budget.max_tool_calls


def test_state_json_refuses_nan_and_never_writes_it() -> None:
    """`from_json` refuses NaN (Python's json reads it); `to_json` refuses to write a number that
    would come back as null, so every row written can be read back."""
    state = LoopState(task_id="t", trace_id="r", goal="g", started_at=0.0)
    row = json.loads(state.to_json())
    row["elapsed_s"] = float("nan")
    with pytest.raises(ValueError, match="NaN at elapsed_s"):
        LoopState.from_json(json.dumps(row))
    state.elapsed_s = float("inf")
    with pytest.raises(ValueError, match=r"LoopState\.elapsed_s: inf is not a finite number"):
        state.to_json()


# -- signed checkpoints ---------------------------------------------------------------------


async def test_a_signed_run_round_trips_and_resumes(kind: str, tmp_path: Path) -> None:
    """Saved with a signature; loaded and resumed by a loop with the same key."""
    store, _ = make_store(kind, tmp_path)
    budget = Budget(max_steps=6, max_tool_calls=6)
    ledger, row = await waiting_run(store, budget, key=KEY)
    assert isinstance(row["signature"], str)
    loop = make_loop(ledger, store, budget=budget, script=[text("done")], key=KEY.decode())
    assert loop.store is not None
    loaded = await loop.store.load("t")
    assert loaded is not None
    assert loaded.signature is None  # verified, and not carried in the run
    assert loaded.tool_calls == 2
    result = await loop.resume("t", approvals={"toolu_refund": True})
    assert result.stop_reason is StopReason.COMPLETED
    assert ledger.refunds == ["O-1"]
    assert json.loads(await stored_text(store))["signature"] != row["signature"]
    assert await loop.store.load("t") is not None


@pytest.mark.parametrize(
    ("setup", "problem"),
    [
        pytest.param("elapsed", "does not match", id="elapsed-zeroed"),
        pytest.param("wrong-key", "does not match", id="wrong-key"),
        pytest.param("unsigned", "missing", id="unsigned-row"),
        pytest.param("garbage", "does not match", id="not-hex"),
    ],
)
async def test_a_signed_loop_refuses_what_it_did_not_sign(
    setup: str, problem: str, kind: str, tmp_path: Path
) -> None:
    """`elapsed_s` lowered (which nothing else can show), another key, no signature, a mangled one:
    `CheckpointCorrupt` with field `signature`, on load and on resume; nothing runs."""
    store, write_raw = make_store(kind, tmp_path)
    budget = Budget(max_steps=6, max_tool_calls=6, timeout_s=60)
    signing = None if setup == "unsigned" else b"another key" if setup == "wrong-key" else KEY
    ledger, row = await waiting_run(store, budget, key=signing)
    if setup == "elapsed":
        row["elapsed_s"] = 0.0
    elif setup == "garbage":
        row["signature"] = "é" * 64
    await write_raw("t", json.dumps(row))
    loop = make_loop(ledger, store, budget=budget, script=[text("done")], key=KEY)
    assert loop.store is not None
    with pytest.raises(CheckpointCorrupt, match=f"signature: {problem}") as loaded:
        await loop.store.load("t")
    assert loaded.value.field == "signature"
    with pytest.raises(CheckpointCorrupt, match=f"signature: {problem}"):
        await loop.resume("t", approvals={"toolu_refund": True})
    assert ledger.refunds == []


async def test_a_loop_without_a_key_ignores_signatures(kind: str, tmp_path: Path) -> None:
    """A signed row reads as any other without a key (checked as every row is)."""
    store, _ = make_store(kind, tmp_path)
    budget = Budget(max_steps=6, max_tool_calls=6)
    ledger, _ = await waiting_run(store, budget, key=KEY)
    result = await make_loop(ledger, store, budget=budget, script=[text("done")]).resume(
        "t", approvals={"toolu_refund": True}
    )
    assert result.stop_reason is StopReason.COMPLETED
    assert ledger.refunds == ["O-1"]


async def test_the_key_is_in_no_repr_contract_or_provenance() -> None:
    """The secret never leaves the loop's configuration."""
    loop = make_loop(Ledger(), MemoryStore(), budget=Budget(max_steps=2), script=[text("done")], key=KEY)
    result = await loop.run("goal")
    shown = [
        repr(loop),
        repr(loop.config),
        repr(loop.store),
        json.dumps(loop.to_contract().to_dict()),
        result.state.to_json(),
        result.to_json(),
    ]
    assert not [text for text in shown if KEY.decode() in text or KEY.hex() in text]
    twin = loop.with_store(MemoryStore())
    assert repr(twin.store).startswith("SignedStore(")


# -- the CLI --------------------------------------------------------------------------------


APP = ["--app-dir", str(ROOT)]
RESUME = ["resume", "tests.test_cli_store:finishing_loop", "t-approve"]
DECIDE = ["--approve", "toolu_r1", "--deny", "toolu_r2", *APP]


@pytest.fixture
def refunds() -> Iterator[dict[str, str]]:
    """What the CLI tests' `issue_refund` did, by idempotency key."""
    from tests import test_cli_store

    test_cli_store.REFUNDS.clear()
    yield test_cli_store.REFUNDS
    test_cli_store.REFUNDS.clear()


def cli_store(tmp_path: Path, *, key: bytes | None = None) -> Path:
    """A SQLite file holding `t-approve`, the CLI tests' run waiting for two refunds."""
    from tests.test_cli_store import TWO_REFUNDS, issue_refund, read_order

    path = tmp_path / "runs.db"
    store = SQLiteStore(path)
    loop = AgentLoop(
        ScriptedClient([TWO_REFUNDS]),
        model="claude-sonnet-4-6",
        tools=[read_order, issue_refund],
        budget=Budget(max_steps=6, max_tool_calls=6),
        policy=Policy(escalation_tool="request_human"),
        store=store if key is None else SignedStore(store, key),
        observers=Observers(metrics=None),
    )

    async def seed() -> None:
        await loop.run("Refund O-1 and O-2?", task_id="t-approve")

    anyio.run(seed)
    return path


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        pytest.param(shorten_answers, "turn.answers", id="answers-shorter"),
        pytest.param(rename_pending, "pending_approvals", id="pending-matches-no-call"),
        pytest.param(set_field("step", 0), "step", id="step-zeroed"),
    ],
)
@pytest.mark.parametrize("command", ["resume", "replay"])
def test_the_cli_exits_2_with_one_line_on_a_corrupt_row(
    edit: Edit,
    field: str,
    command: str,
    tmp_path: Path,
    refunds: dict[str, str],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`boundloop resume` and `replay` name the task and the field, exit 2, and run nothing."""
    path = cli_store(tmp_path)
    store = SQLiteStore(path)
    row = json.loads(store._load("t-approve") or "")  # pyright: ignore[reportPrivateUsage]
    edit(row)
    store.write_raw("t-approve", json.dumps(row))
    argv = (
        [*RESUME, "--store", str(path), *DECIDE]
        if command == "resume"
        else ["replay", "t-approve", "--store", str(path)]
    )
    assert main(argv) == 2
    captured = capsys.readouterr()
    line = one_line(captured.err)
    assert line.startswith(f"boundloop: error: the checkpoint of task 't-approve' cannot be read: {field}: ")
    assert refunds == {}


def test_the_cli_reads_the_key_from_the_environment(
    tmp_path: Path,
    refunds: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With `BOUNDLOOP_CHECKPOINT_KEY` a signed store resumes, and what it saves stays signed; with
    another key the row is refused (exit 2, one line); an empty key is a usage error."""
    path = cli_store(tmp_path, key=KEY)
    monkeypatch.setenv("BOUNDLOOP_CHECKPOINT_KEY", "another key")
    assert main([*RESUME, "--store", str(path), *DECIDE]) == 2
    assert "signature: does not match" in one_line(capsys.readouterr().err)
    assert refunds == {}
    monkeypatch.setenv("BOUNDLOOP_CHECKPOINT_KEY", "")
    assert main(["pending", "--store", str(path)]) == 2
    assert "BOUNDLOOP_CHECKPOINT_KEY is set but empty" in one_line(capsys.readouterr().err)
    monkeypatch.setenv("BOUNDLOOP_CHECKPOINT_KEY", KEY.decode())
    assert main([*RESUME, "--store", str(path), *DECIDE]) == 0
    assert refunds == {"t-approve:1:toolu_r1": "O-1"}
    loop = AgentLoop(
        ScriptedClient([]),
        model="claude-sonnet-4-6",
        budget=Budget(max_steps=1),
        observers=Observers(metrics=None),
        store=SignedStore(MemoryStore(), KEY),
    )

    async def load() -> LoopState | None:
        assert loop.with_store(SQLiteStore(path)).store is not None
        return await loop.with_store(SQLiteStore(path)).store.load("t-approve")  # type: ignore[union-attr]

    loaded = anyio.run(load)
    assert loaded is not None
    assert loaded.stop_reason is StopReason.COMPLETED
