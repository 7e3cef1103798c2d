"""PostgresStore on a real, throwaway PostgreSQL: the conformance suite, migrations, leases.

Each test gets a new empty database on the session's server (`postgres_dsn`); the server
skips the tests locally, and fails them in CI, when PostgreSQL is not installed. The store
runs psycopg in worker threads, so these run on trio as well as asyncio.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import anyio.to_thread
import psycopg
import pytest
import sniffio

from boundloop import StopReason, tool
from boundloop.checkpoint import LeasingStore, PostgresStore
from boundloop.checkpoint import postgres as pg
from boundloop.checkpoint.conformance import (
    CHECKS,
    EVENT_LOG_CHECKS,
    LEASE_CHECKS,
    Check,
    LeaseCheck,
    LogCheck,
    sample_state,
)
from boundloop.errors import CheckpointCorrupt, ConfigurationError, InvalidTaskId, TaskBusy
from boundloop.statemachine.table import Phase
from tests.helpers import scripted_loop, text, tool_use


@pytest.fixture
async def store(postgres_dsn: str) -> AsyncIterator[PostgresStore]:
    """A store on a new empty database, closed afterwards."""
    async with PostgresStore(postgres_dsn) as opened:
        yield opened


def sql(dsn: str, query: Any, *params: object) -> list[tuple[Any, ...]]:
    """Run one statement on its own connection; its rows (blocking)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        cursor = conn.execute(query, params or None)
        return cursor.fetchall() if cursor.description is not None else []


async def query(dsn: str, statement: Any, *params: object) -> list[tuple[Any, ...]]:
    """`sql` in a worker thread."""
    return await anyio.to_thread.run_sync(lambda: sql(dsn, statement, *params))


# -- the conformance suite -----------------------------------------------------------------


@pytest.mark.parametrize("check", CHECKS, ids=lambda check: check.__name__)
async def test_postgres_store_conformance(check: Check, store: PostgresStore) -> None:
    """PostgresStore passes every check of `boundloop.checkpoint.conformance`."""

    async def write_raw(task_id: str, raw: str) -> None:
        await anyio.to_thread.run_sync(store.write_raw, task_id, raw)

    await check(store, write_raw)


@pytest.mark.parametrize("check", LEASE_CHECKS, ids=lambda check: check.__name__)
async def test_postgres_store_passes_the_lease_checks(check: LeaseCheck, store: PostgresStore) -> None:
    """PostgresStore passes every lease check of the conformance suite."""
    assert isinstance(store, LeasingStore)
    await check(store)


@pytest.mark.parametrize("check", EVENT_LOG_CHECKS, ids=lambda check: check.__name__)
async def test_postgres_store_passes_the_event_log_checks(check: LogCheck, store: PostgresStore) -> None:
    """PostgresStore's event log passes every event-log check of the conformance suite."""
    await check(store)


@tool
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value-{key}"


async def test_a_run_checkpointed_to_postgres_reads_back_from_another_store(postgres_dsn: str) -> None:
    """A whole run saved through one store loads back equal, to the byte, through another."""
    async with PostgresStore(postgres_dsn) as first:
        loop = scripted_loop([tool_use(("lookup", {"key": "a"})), text("done")], [lookup], store=first)
        result = await loop.run("goal", task_id="task-pg")
    async with PostgresStore(postgres_dsn) as second:
        loaded = await second.load("task-pg")
        [row] = await second.list(status="stopped")
    assert loaded is not None
    assert loaded.stop_reason is StopReason.COMPLETED
    assert loaded.to_json() == result.state.to_json()
    assert (row.task_id, row.step, row.phase, row.stop_reason) == ("task-pg", 2, "stopped", "completed")


async def test_text_the_json_escapes_round_trips(store: PostgresStore) -> None:
    """A state with a NUL, other control characters and non-BMP text is stored as JSON text
    (escaped, so PostgreSQL's text takes it) and reads back identical."""
    state = sample_state("t-text")
    state.goal = 'nul \x00 bell \x07 tab \t emoji \U0001f600 rtl \u202e quote " backslash \\'
    await store.save(state)
    loaded = await store.load("t-text")
    assert loaded is not None
    assert loaded.goal == state.goal
    assert loaded.to_json() == state.to_json()


async def test_no_io_before_first_use_and_the_store_reopens_after_aclose(postgres_dsn: str) -> None:
    """Building a store touches nothing (an unreachable DSN is fine until used); a closed
    store opens again when used."""
    PostgresStore("postgresql://nobody@127.0.0.1:1/none")  # no connection attempted
    store = PostgresStore(postgres_dsn)
    assert await query(postgres_dsn, "SELECT to_regclass('boundloop_checkpoints')") == [(None,)]
    await store.save(sample_state("t-1"))
    await store.aclose()
    await store.aclose()  # twice is fine
    assert await store.load("t-1") is not None  # reopened
    await store.aclose()


# -- schema and migrations -----------------------------------------------------------------


async def test_a_new_database_gets_the_layout_and_its_index(store: PostgresStore, postgres_dsn: str) -> None:
    """The first use creates the tables at the current schema version, with the status index."""
    await store.list()
    assert await query(postgres_dsn, "SELECT max(version), count(*) FROM boundloop_schema") == [
        (pg.SCHEMA_VERSION, pg.SCHEMA_VERSION)
    ]
    [(index,)] = await query(
        postgres_dsn, "SELECT indexdef FROM pg_indexes WHERE indexname = 'boundloop_checkpoints_status'"
    )
    assert "(status, updated_at DESC)" in index

    def explain() -> str:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            conn.execute("SET enable_seqscan = off")  # a tiny table: make the planner show its choice
            rows = conn.execute(
                "EXPLAIN SELECT task_id FROM boundloop_checkpoints WHERE status = 'waiting' "
                "ORDER BY updated_at DESC"
            ).fetchall()
        return " ".join(str(line) for (line,) in rows)

    plan = await anyio.to_thread.run_sync(explain)
    assert "boundloop_checkpoints_status" in plan


async def test_an_older_database_is_migrated_in_place(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A database at version 1 (no event log) is brought to the current version, then to a
    (test-only) next one; its runs are kept, its event log and its pages work."""
    state = sample_state("t-old", phase=Phase.STOPPED, stop_reason=StopReason.COMPLETED)
    with monkeypatch.context() as version_1:
        version_1.setattr(pg, "SCHEMA_VERSION", 1)
        async with PostgresStore(postgres_dsn) as old:
            await old.save(state)
    assert await query(postgres_dsn, "SELECT to_regclass('boundloop_events')") == [(None,)]
    async with PostgresStore(postgres_dsn) as current:
        assert await current.read("t-old") == []
        assert [row.task_id for row in (await current.page(status="stopped")).runs] == ["t-old"]
    following = pg.SCHEMA_VERSION + 1
    monkeypatch.setattr(pg, "SCHEMA_VERSION", following)
    monkeypatch.setattr(
        pg,
        "MIGRATIONS",
        {**pg.MIGRATIONS, following: ("ALTER TABLE boundloop_checkpoints ADD COLUMN worker text",)},
    )
    async with PostgresStore(postgres_dsn) as new:
        [row] = await new.list()
        loaded = await new.load("t-old")
    assert (row.task_id, row.status, row.stop_reason) == ("t-old", "stopped", "completed")
    assert loaded is not None
    assert loaded.to_json() == state.to_json()
    versions = await query(postgres_dsn, "SELECT version FROM boundloop_schema ORDER BY version")
    assert versions == [(version,) for version in range(1, following + 1)]
    columns = await query(
        postgres_dsn,
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'boundloop_checkpoints'",
    )
    assert ("worker",) in columns


async def test_a_database_of_a_newer_boundloop_is_refused(postgres_dsn: str) -> None:
    """A schema version newer than this boundloop's is refused with CheckpointCorrupt, untouched."""
    async with PostgresStore(postgres_dsn) as store:
        await store.list()
    await query(postgres_dsn, "INSERT INTO boundloop_schema (version) VALUES (%s)", pg.SCHEMA_VERSION + 1)
    async with PostgresStore(postgres_dsn) as newer:
        with pytest.raises(CheckpointCorrupt, match=f"has store schema {pg.SCHEMA_VERSION + 1}"):
            await newer.list()
        with pytest.raises(CheckpointCorrupt):  # still refused, never half-open
            await newer.save(sample_state("t-1"))
    assert await query(postgres_dsn, "SELECT count(*) FROM boundloop_checkpoints") == [(0,)]


async def test_workers_migrating_at_once_migrate_once(postgres_dsn: str) -> None:
    """Eight connections migrating an empty database at the same moment: the advisory lock
    lets the first migrate, and the other seven find it done (none fails, none migrates twice)."""
    barrier = threading.Barrier(8)

    def migrate() -> int:
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            barrier.wait()
            return pg.migrate(conn)

    found: list[int] = []

    async def one() -> None:
        found.append(await anyio.to_thread.run_sync(migrate))

    async with anyio.create_task_group() as group:
        for _ in range(8):
            group.start_soon(one)
    assert sorted(found) == [0] + [pg.SCHEMA_VERSION] * 7
    assert await query(postgres_dsn, "SELECT max(version), count(*) FROM boundloop_schema") == [
        (pg.SCHEMA_VERSION, pg.SCHEMA_VERSION)
    ]


async def test_stores_starting_together_all_work(postgres_dsn: str) -> None:
    """Eight stores whose first use is at once (eight workers starting) all save and list."""
    stores = [PostgresStore(postgres_dsn) for _ in range(8)]
    try:
        async with anyio.create_task_group() as group:
            for index, each in enumerate(stores):
                group.start_soon(each.save, sample_state(f"t-{index}"))
        assert len(await stores[0].list()) == 8
    finally:
        for each in stores:
            await each.aclose()


async def test_a_role_without_create_uses_a_migrated_database(
    store: PostgresStore, postgres_dsn: str
) -> None:
    """A database at the current layout is only read on first use: an application role that
    may use the tables but not create anything saves, loads, lists and leases."""
    await store.save(sample_state("t-admin"))  # the owner migrates
    role = f"app_{postgres_dsn.rsplit('/', 1)[1]}"  # roles are per server: one per test database
    await query(postgres_dsn, f"CREATE ROLE {role} LOGIN")
    await query(postgres_dsn, f"GRANT SELECT ON boundloop_schema TO {role}")
    await query(postgres_dsn, f"GRANT SELECT, INSERT, UPDATE, DELETE ON boundloop_checkpoints TO {role}")
    as_app = postgres_dsn.replace("postgresql://postgres@", f"postgresql://{role}@")
    assert as_app != postgres_dsn
    with pytest.raises(psycopg.errors.InsufficientPrivilege):  # the role really cannot create
        await query(as_app, "CREATE TABLE probe (x int)")
    async with PostgresStore(as_app) as app_store:
        await app_store.save(sample_state("t-app"))
        loaded = await app_store.load("t-admin")
        assert loaded is not None
        assert loaded.task_id == "t-admin"
        assert sorted(run.task_id for run in await app_store.list()) == ["t-admin", "t-app"]
        async with app_store.lease("t-app"):
            pass
    await query(postgres_dsn, f"DROP OWNED BY {role}")
    await query(postgres_dsn, f"DROP ROLE {role}")


async def test_a_schema_of_its_own_is_not_served_by_the_public_tables(
    store: PostgresStore, postgres_dsn: str
) -> None:
    """A store whose search path starts with its own schema gets its own tables there, even when
    `public` further down the path has boundloop's tables already: runs never mix."""
    await store.save(sample_state("t-public"))
    await query(postgres_dsn, "CREATE SCHEMA tenant_a")
    async with PostgresStore(postgres_dsn + "?options=-csearch_path%3Dtenant_a,public") as tenant:
        await tenant.save(sample_state("t-tenant"))
        assert [run.task_id for run in await tenant.list()] == ["t-tenant"]
    assert [run.task_id for run in await store.list()] == ["t-public"]
    tables = await query(
        postgres_dsn,
        "SELECT schemaname FROM pg_tables WHERE tablename = 'boundloop_checkpoints' ORDER BY 1",
    )
    assert tables == [("public",), ("tenant_a",)]


# -- leases across sessions ----------------------------------------------------------------


async def lease_session_pid(dsn: str, store: PostgresStore) -> int:
    """The backend pid of `store`'s lease session (the one holding a probe lease)."""
    async with store.lease("probe"):
        [(pid,)] = await query(
            dsn, "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND pid <> pg_backend_pid()"
        )
    return int(pid)


async def test_a_lease_excludes_other_stores_until_released(postgres_dsn: str) -> None:
    """Two stores (two workers' sessions): while one holds a task the other gets TaskBusy;
    after the release it gets in. The lock is visible in pg_locks while held."""
    async with PostgresStore(postgres_dsn) as one, PostgresStore(postgres_dsn) as two:
        async with one.lease("t-1"):
            with pytest.raises(TaskBusy, match="'t-1'"):
                async with two.lease("t-1"):
                    pass
            async with two.lease("t-2"):
                pass
            locks = await query(postgres_dsn, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'")
            assert locks == [(1,)]
        async with two.lease("t-1"):
            pass


async def test_a_dead_session_releases_its_leases_and_the_store_reconnects(postgres_dsn: str) -> None:
    """Terminating a store's lease session (what a dead worker's looks like) frees its tasks
    for other stores; the store itself takes leases again on a new session."""
    async with PostgresStore(postgres_dsn) as one, PostgresStore(postgres_dsn) as two:
        pid = await lease_session_pid(postgres_dsn, one)
        async with one.lease("t-1"):
            await query(postgres_dsn, "SELECT pg_terminate_backend(%s, 10000)", pid)
            async with two.lease("t-1"):  # the dead session's lease is gone
                with pytest.raises(TaskBusy):
                    async with one.lease("t-1"):  # in-process: still held by this store's run
                        pass
        # The release on the dead session was a no-op; the next lease reconnects.
        async with one.lease("t-1"):
            with pytest.raises(TaskBusy):
                async with two.lease("t-1"):
                    pass
        pid = await lease_session_pid(postgres_dsn, one)
        await query(postgres_dsn, "SELECT pg_terminate_backend(%s, 10000)", pid)
        async with one.lease("t-3"):  # the idle session died: reconnect on the first query
            pass


async def test_the_lease_session_is_kept_alive(postgres_dsn: str) -> None:
    """The lease session turns off the server's idle timeout and sets TCP keepalives, so an
    idle lease survives and a lost machine's leases are dropped within about 2 x 12 s."""

    def settings(session: psycopg.Connection[Any]) -> list[str]:
        names = (
            "idle_session_timeout",
            "tcp_keepalives_idle",
            "tcp_keepalives_interval",
            "tcp_keepalives_count",
        )
        return [str(session.execute(f"SHOW {name}").fetchone()[0]) for name in names]  # type: ignore[index]

    async with PostgresStore(postgres_dsn, lease_keepalive_s=12) as store:
        async with store.lease("t-1"):
            session = store._session  # the store's own lease connection
            assert session is not None
            assert await anyio.to_thread.run_sync(settings, session) == ["0", "12", "4", "3"]
            # and this side's own bounds, so a stalled server fails a lease call, not hangs it
            client = psycopg.conninfo.conninfo_to_dict(session.info.dsn)
            assert {k: client.get(k) for k in ("connect_timeout", "keepalives_idle", "tcp_user_timeout")} == {
                "connect_timeout": "10",
                "keepalives_idle": "12",
                "tcp_user_timeout": "24000",
            }
    async with PostgresStore(postgres_dsn + "?connect_timeout=3", lease_keepalive_s=12) as store:
        async with store.lease("t-2"):
            assert store._session is not None
            assert "connect_timeout=3" in store._session.info.dsn  # the DSN's own setting wins


async def test_a_lease_cancelled_while_it_is_being_taken_is_not_left_held(postgres_dsn: str) -> None:
    """A native asyncio cancellation (`asyncio.wait_for`) does not wait for the worker thread
    taking the lock: the lock it takes afterwards is given back, so the task is free."""
    if sniffio.current_async_library() != "asyncio":
        pytest.skip("a native asyncio cancellation; trio's always waits for the thread")
    async with PostgresStore(postgres_dsn) as first, PostgresStore(postgres_dsn) as second:
        async with first.lease("warm"):  # the lease session exists
            pass
        holding, release = threading.Event(), threading.Event()

        def slow_round_trip() -> None:  # holds the store's lease lock, as a slow server would
            with first._leases:
                holding.set()
                release.wait(10)

        async def take() -> None:
            async with first.lease("t-x"):
                pass

        async with anyio.create_task_group() as group:
            group.start_soon(anyio.to_thread.run_sync, slow_round_trip)
            await anyio.to_thread.run_sync(holding.wait, 10)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(take(), 0.05)  # noqa: TID251  (the native cancellation under test)
            release.set()
        async with second.lease("t-x"):  # free: taken by nobody
            pass
        assert first._held == {}


async def test_closing_a_store_releases_its_leases(postgres_dsn: str) -> None:
    """`aclose` ends the lease session: the tasks it held are free for other workers at once,
    and the blocks still holding them exit cleanly. Without keepalives the server's are kept."""
    async with PostgresStore(postgres_dsn) as one, PostgresStore(postgres_dsn, lease_keepalive_s=None) as two:
        async with one.lease("t-1"):
            await one.aclose()
            async with two.lease("t-1"):
                pass


def test_importing_boundloop_checkpoint_does_not_import_psycopg() -> None:
    """`import boundloop.checkpoint` leaves psycopg unloaded; PostgresStore loads it."""
    program = (
        "import sys, boundloop.checkpoint as c; assert 'psycopg' not in sys.modules; "
        "c.PostgresStore; assert 'psycopg' in sys.modules; c.Nope"
    )
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=False)
    assert "AttributeError: module 'boundloop.checkpoint' has no attribute 'Nope'" in done.stderr
    import boundloop.checkpoint

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        boundloop.checkpoint.Nope  # type: ignore[attr-defined]  # noqa: B018


def test_without_psycopg_the_error_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the extra, using PostgresStore names the missing package and the pip command."""
    monkeypatch.setitem(sys.modules, "psycopg", None)
    monkeypatch.delitem(sys.modules, "boundloop.checkpoint.postgres")
    import boundloop.checkpoint

    with pytest.raises(ModuleNotFoundError, match=r"pip install 'boundloop\[postgres\]'") as caught:
        boundloop.checkpoint.PostgresStore  # noqa: B018
    assert caught.value.name == "psycopg"


@pytest.mark.parametrize("task_id", ["nul\x00inside", "", "x" * 201, "tab\tinside"])
async def test_a_bad_task_id_is_refused_before_postgres_sees_it(store: PostgresStore, task_id: str) -> None:
    """A task id with a NUL (PostgreSQL text cannot hold one), or otherwise invalid, is refused
    by run() and resume() with InvalidTaskId, a ConfigurationError, before anything runs or
    is stored; no psycopg error escapes."""
    calls: list[str] = []

    @tool
    async def record(key: str) -> str:
        """Record a call."""
        calls.append(key)
        return key

    loop = scripted_loop([tool_use(("record", {"key": "a"})), text("done")], [record], store=store)
    with pytest.raises(InvalidTaskId) as raised:
        await loop.run("goal", task_id=task_id)
    assert raised.value.task_id == task_id
    assert isinstance(raised.value, ConfigurationError)
    with pytest.raises(InvalidTaskId, match="is invalid"):
        await loop.resume(task_id)
    assert calls == []
    assert await store.list() == []
