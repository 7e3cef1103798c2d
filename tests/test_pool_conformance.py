"""The pool store conformance suite (`boundloop.pools.conformance`) on every store boundloop has:
in memory, in a SQLite file, and in a real PostgreSQL (a new empty database for each check on
the session's server; missing PostgreSQL skips locally and fails in CI). The same checks, each
parametrized by store; the memory store's holds have no lease, so it skips `LEASE_CHECKS`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from boundloop import MemoryPoolStore, SQLitePoolStore
from boundloop.pools import PoolStore, PostgresPoolStore
from boundloop.pools.conformance import LEASE_CHECKS, POOL_CHECKS, PoolCheck

STORES = ("memory", "sqlite", "postgres")


@pytest.fixture(params=STORES)
async def pool_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[PoolStore]:
    """A fresh, empty store of each kind (PostgreSQL's closed afterwards)."""
    if request.param == "memory":
        yield MemoryPoolStore()
    elif request.param == "sqlite":
        yield SQLitePoolStore(tmp_path / "pools.db")
    else:
        async with PostgresPoolStore(request.getfixturevalue("postgres_dsn")) as store:
            yield store


@pytest.mark.parametrize("check", POOL_CHECKS, ids=lambda check: check.__name__)
async def test_pool_store_conformance(check: PoolCheck, pool_store: PoolStore) -> None:
    """Every store passes every check of the pool conformance suite (the memory store: but the
    lease checks)."""
    if isinstance(pool_store, MemoryPoolStore) and check in LEASE_CHECKS:
        return
    await check(pool_store)


@pytest.mark.parametrize("check", LEASE_CHECKS, ids=lambda check: check.__name__)
async def test_a_memory_store_has_no_lease(check: PoolCheck) -> None:
    """The memory store's holds die with the process, not with a lease: a hold counts until it is
    settled or released, so the lease checks fail on it."""
    with pytest.raises(AssertionError):
        await check(MemoryPoolStore())


def test_the_suite_lists_every_check() -> None:
    """`POOL_CHECKS` holds each check the module defines, once (a check written and not listed
    would never run)."""
    from boundloop.pools import conformance

    defined = {
        name
        for name in conformance.__all__
        if callable(getattr(conformance, name)) and name not in ("sample_hold", "PoolCheck", "LEASE_CHECKS")
    }
    assert sorted(check.__name__ for check in POOL_CHECKS) == sorted(defined)
