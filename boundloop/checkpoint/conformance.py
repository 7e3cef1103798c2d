"""The store conformance suite: the behaviour every `CheckpointStore` must have.

Each check is an async function of a fresh, empty store and a way to write a raw row into
it; it raises `AssertionError` on a failure. Run them for your own store:

```python
@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
async def test_my_store(check: Check) -> None:
    store = MyStore(...)
    await check(store, store_raw_writer)
```

A store that keeps an event log (`EventLog`) passes `EVENT_LOG_CHECKS` too
(`boundloop.checkpoint._log_checks`), each an async function of a fresh store, as the lease
checks are.

A store that leases tasks (`LeasingStore`) passes `LEASE_CHECKS` too, each an async function
of a fresh store:

```python
@pytest.mark.parametrize("check", LEASE_CHECKS, ids=lambda check: check.__name__)
async def test_my_store_leases(check: LeaseCheck) -> None:
    await check(MyStore(...))
```
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Final, TypeAlias, TypeVar

import anyio

from ..errors import CheckpointCorrupt, InvalidTaskId, TaskBusy
from ..records import Escalation, PendingApproval, StopReason, ToolCall, Turn
from ..state import LoopState
from ..statemachine.table import Phase
from ._log_checks import EVENT_LOG_CHECKS as EVENT_LOG_CHECKS
from ._log_checks import INVALID_TASK_IDS as INVALID_TASK_IDS
from ._log_checks import LogCheck as LogCheck
from .store import CheckpointStore, LeasingStore

__all__ = [
    "CHECKS",
    "Check",
    "EVENT_LOG_CHECKS",
    "INVALID_TASK_IDS",
    "LEASE_CHECKS",
    "LeaseCheck",
    "LogCheck",
    "RawWriter",
    "deletes_a_task",
    "gives_one_of_racing_leases_the_task",
    "holds_a_task_exclusively",
    "knows_nothing_of_an_unknown_task",
    "leases_regardless_of_stored_state",
    "leases_tasks_independently",
    "lists_by_status_and_stop_reason",
    "names_the_task_of_a_corrupt_row",
    "refuses_a_foreign_schema_version",
    "refuses_an_invalid_task_id",
    "refuses_to_lease_an_invalid_task_id",
    "releases_a_lease_however_the_block_exits",
    "replaces_the_state_of_a_task",
    "round_trips_a_state",
    "sample_state",
    "saves_concurrently",
]

RawWriter: TypeAlias = Callable[[str, str], Awaitable[None]]
"""`write_raw(task_id, text)`: store `text` as the task's state, unchecked."""
Check: TypeAlias = Callable[[CheckpointStore, RawWriter], Awaitable[None]]
_Arg = TypeVar("_Arg")
LeaseCheck: TypeAlias = Callable[[LeasingStore], Awaitable[None]]


def sample_state(
    task_id: str,
    *,
    phase: Phase = Phase.ACT,
    stop_reason: StopReason | None = None,
    step: int = 1,
    waiting: bool = False,
) -> LoopState:
    """A state with a transcript, usage and, for a waiting run, a call pending approval (and a
    call of the model's escalation tool, `toolu_9`, a human may be asked through)."""
    state = LoopState(
        task_id=task_id,
        trace_id=f"trace-{task_id}",
        goal="Decide for O-104.",
        started_at=time.time(),
        phase=phase,
        step=step,
        stop_reason=stop_reason,
        messages=[{"role": "user", "content": "Decide for O-104."}],
    )
    if waiting:
        refund = ToolCall(id="toolu_1", name="issue_refund", input={"order_id": "O-104"}, step=step)
        ask = ToolCall(id="toolu_9", name="ask_human", input={"reason": "unsure"}, step=step)
        state.turn = Turn(
            calls=[refund, ask],
            keys=["issue_refund:O-104", "ask_human:unsure"],
            answers=[None, None],
            decisions=["escalate", "deny"],
            answered=True,
            awaiting_human=True,
        )
        state.pending_approvals.append(
            PendingApproval(tool_use_id=refund.id, tool=refund.name, input=refund.input, step=step)
        )
    return state


async def round_trips_a_state(store: CheckpointStore, write_raw: RawWriter) -> None:
    """A saved state loads back equal, field for field."""
    state = sample_state(
        "t-round-trip", waiting=True, phase=Phase.STOPPED, stop_reason=StopReason.NEEDS_HUMAN
    )
    state.escalation = Escalation(tool_use_id="toolu_9", reason="unsure", step=1)
    await store.save(state)
    loaded = await store.load("t-round-trip")
    assert loaded is not None
    assert loaded.to_json() == state.to_json()


async def knows_nothing_of_an_unknown_task(store: CheckpointStore, write_raw: RawWriter) -> None:
    """Loading a task never saved gives None; deleting it gives False."""
    assert await store.load("t-unknown") is None
    assert await store.delete("t-unknown") is False


async def replaces_the_state_of_a_task(store: CheckpointStore, write_raw: RawWriter) -> None:
    """A second save of the same task replaces the first: one row, the later state."""
    await store.save(sample_state("t-replace", step=1))
    await store.save(sample_state("t-replace", step=2))
    loaded = await store.load("t-replace")
    assert loaded is not None
    assert loaded.step == 2
    assert [row.task_id for row in await store.list()] == ["t-replace"]


async def lists_by_status_and_stop_reason(store: CheckpointStore, write_raw: RawWriter) -> None:
    """`list` reports running, waiting and stopped runs, newest first, and filters them."""
    await store.save(sample_state("t-running", phase=Phase.ACT))
    await anyio.sleep(0.01)  # distinct save times, so the order is defined
    await store.save(
        sample_state("t-waiting", phase=Phase.STOPPED, stop_reason=StopReason.NEEDS_HUMAN, waiting=True)
    )
    await anyio.sleep(0.01)
    await store.save(sample_state("t-done", phase=Phase.STOPPED, stop_reason=StopReason.COMPLETED))
    assert [row.task_id for row in await store.list()] == ["t-done", "t-waiting", "t-running"]
    assert [row.task_id for row in await store.list(status="waiting")] == ["t-waiting"]
    assert [row.task_id for row in await store.list(status="running")] == ["t-running"]
    assert [row.task_id for row in await store.list(stop_reason="completed")] == ["t-done"]
    assert await store.list(status="stopped", stop_reason="needs_human") == []
    waiting = (await store.list(status="waiting"))[0]
    assert (waiting.phase, waiting.stop_reason, waiting.step) == ("stopped", "needs_human", 1)


async def deletes_a_task(store: CheckpointStore, write_raw: RawWriter) -> None:
    """A deleted task is gone from `load` and `list`."""
    await store.save(sample_state("t-delete"))
    assert await store.delete("t-delete") is True
    assert await store.load("t-delete") is None
    assert await store.list() == []


async def names_the_task_of_a_corrupt_row(store: CheckpointStore, write_raw: RawWriter) -> None:
    """A row that is not a state raises `CheckpointCorrupt` naming the task, not a parse error."""
    await write_raw("t-corrupt", '{"task_id": "t-corrupt", "half a sta')
    error = await _load_error(store, "t-corrupt")
    assert error.task_id == "t-corrupt"
    assert "t-corrupt" in str(error)


async def refuses_a_foreign_schema_version(store: CheckpointStore, write_raw: RawWriter) -> None:
    """A state written with another schema version raises `CheckpointCorrupt` saying so."""
    raw = sample_state("t-future").to_json().replace('"schema_version":1', '"schema_version":99')
    await write_raw("t-future", raw)
    assert "schema_version 99" in str(await _load_error(store, "t-future"))


async def _load_error(store: CheckpointStore, task_id: str) -> CheckpointCorrupt:
    """The error loading `task_id` raises; a failure if it loads."""
    try:
        await store.load(task_id)
    except CheckpointCorrupt as exc:
        return exc
    raise AssertionError(f"the unreadable row of {task_id} loaded")


async def saves_concurrently(store: CheckpointStore, write_raw: RawWriter) -> None:
    """Twenty concurrent saves of different tasks are all kept."""
    async with anyio.create_task_group() as group:
        for index in range(20):
            group.start_soon(store.save, sample_state(f"t-many-{index}", step=index))
    assert len(await store.list()) == 20
    loaded = await store.load("t-many-7")
    assert loaded is not None
    assert loaded.step == 7


async def refuses_an_invalid_task_id(store: CheckpointStore, write_raw: RawWriter) -> None:
    """`save`, `load` and `delete` refuse a bad task id with `InvalidTaskId` (a
    `ConfigurationError`) before touching the store, whatever the backend would make of it."""
    for task_id in INVALID_TASK_IDS:
        await _refuses(task_id, store.save, sample_state(task_id))
        await _refuses(task_id, store.load, task_id)
        await _refuses(task_id, store.delete, task_id)
    assert await store.list() == []
    longest = "x" * 200
    await store.save(sample_state(longest))
    assert await store.load(longest) is not None


async def _refuses(task_id: str, method: Callable[[_Arg], Awaitable[object]], argument: _Arg) -> None:
    """`method(argument)` raises `InvalidTaskId` naming `task_id`; a failure if it does not."""
    refusal: InvalidTaskId | None = None
    try:
        await method(argument)
    except InvalidTaskId as exc:
        refusal = exc
    assert refusal is not None, f"{method.__name__} took the task id {task_id!r}"
    assert refusal.task_id == task_id, refusal.task_id


CHECKS: Final[tuple[Check, ...]] = (
    round_trips_a_state,
    knows_nothing_of_an_unknown_task,
    replaces_the_state_of_a_task,
    lists_by_status_and_stop_reason,
    deletes_a_task,
    names_the_task_of_a_corrupt_row,
    refuses_a_foreign_schema_version,
    saves_concurrently,
    refuses_an_invalid_task_id,
)
"""Every check of the suite, in order."""


async def _busy(store: LeasingStore, task_id: str) -> bool:
    """Whether a lease of `task_id` is refused with `TaskBusy` naming it."""
    refusal: TaskBusy | None = None
    try:
        async with store.lease(task_id):
            pass
    except TaskBusy as exc:
        refusal = exc
    if refusal is None:
        return False
    assert refusal.task_id == task_id, refusal.task_id
    assert task_id in str(refusal)
    return True


async def holds_a_task_exclusively(store: LeasingStore) -> None:
    """A second lease of a held task raises `TaskBusy` at once, however often it is tried."""
    async with store.lease("t-held"):
        with anyio.fail_after(10):
            assert await _busy(store, "t-held")
            assert await _busy(store, "t-held")


async def releases_a_lease_however_the_block_exits(store: LeasingStore) -> None:
    """A lease is released when its block ends, raises or is cancelled: the next one gets in."""
    async with store.lease("t-next"):
        pass
    assert not await _busy(store, "t-next")
    try:
        async with store.lease("t-next"):
            raise LookupError("the run failed")
    except LookupError:
        pass
    assert not await _busy(store, "t-next")
    with anyio.CancelScope() as scope:
        async with store.lease("t-next"):
            scope.cancel()
            await anyio.sleep_forever()
    assert not await _busy(store, "t-next")
    with anyio.move_on_after(0):  # cancelled while taking the lease
        async with store.lease("t-next"):
            await anyio.sleep_forever()
    assert not await _busy(store, "t-next")


async def leases_tasks_independently(store: LeasingStore) -> None:
    """Holding one task blocks no other: twenty leases are held at once."""
    async with contextlib.AsyncExitStack() as held:
        for index in range(20):
            await held.enter_async_context(store.lease(f"t-lease-{index}"))
        assert await _busy(store, "t-lease-7")
        assert not await _busy(store, "t-other")
    assert not await _busy(store, "t-lease-7")


async def leases_regardless_of_stored_state(store: LeasingStore) -> None:
    """A lease is about who runs a task, not whether it is stored: saving, loading and deleting
    work under it, and it outlives the task's row."""
    async with store.lease("t-stored"):
        await store.save(sample_state("t-stored"))
        assert await store.load("t-stored") is not None
        assert await store.delete("t-stored") is True
        assert await _busy(store, "t-stored")
    assert not await _busy(store, "t-stored")


async def gives_one_of_racing_leases_the_task(store: LeasingStore) -> None:
    """Of twenty leases of one task taken at once, one holds it and nineteen get `TaskBusy`."""
    holders: list[int] = []
    refused: list[int] = []
    settled = anyio.Event()

    def settle() -> None:
        if len(holders) + len(refused) == 20:
            settled.set()

    async def take(index: int) -> None:
        try:
            async with store.lease("t-race"):
                holders.append(index)
                settle()
                await settled.wait()  # held until every attempt got in or was refused
        except TaskBusy:
            refused.append(index)
            settle()

    with anyio.fail_after(20):
        async with anyio.create_task_group() as group:
            for index in range(20):
                group.start_soon(take, index)
    assert (len(holders), len(refused)) == (1, 19)
    assert not await _busy(store, "t-race")


async def refuses_to_lease_an_invalid_task_id(store: LeasingStore) -> None:
    """`lease` refuses a bad task id with `InvalidTaskId`, holding nothing."""
    for task_id in INVALID_TASK_IDS:
        refusal: InvalidTaskId | None = None
        try:
            async with store.lease(task_id):
                pass
        except InvalidTaskId as exc:
            refusal = exc
        assert refusal is not None, f"the task id {task_id!r} was leased"
        assert refusal.task_id == task_id


LEASE_CHECKS: Final[tuple[LeaseCheck, ...]] = (
    holds_a_task_exclusively,
    releases_a_lease_however_the_block_exits,
    leases_tasks_independently,
    leases_regardless_of_stored_state,
    gives_one_of_racing_leases_the_task,
    refuses_to_lease_an_invalid_task_id,
)
"""Every check of a store that leases tasks, in order."""
