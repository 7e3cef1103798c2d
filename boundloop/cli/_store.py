"""`--store PATH`: a SQLite file or a PostgreSQL URI, for the commands on stored runs.

A URI (`postgresql://...`, `postgres://...`) opens a `PostgresStore`; psycopg is imported then
only, so `boundloop --help` and the SQLite path never load it. Anything else is a SQLite file.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

from .. import CheckpointCorrupt, CheckpointStore, LoopState, SQLiteStore
from ..checkpoint.signed import SignedStore
from ._errors import CommandError

KEY_ENV: Final = "BOUNDLOOP_CHECKPOINT_KEY"
"""The environment variable holding the key of a signed store (`SignedStore`): set, every row the
command reads is verified, and a resumed run signs what it saves."""

URI_SCHEMES: Final = ("postgresql://", "postgres://")
"""The `--store` prefixes that name a PostgreSQL database rather than a SQLite file."""


def is_postgres(store: str) -> bool:
    """Whether `--store` is a PostgreSQL URI."""
    return store.startswith(URI_SCHEMES)


def open_store(store: str) -> CheckpointStore:
    """The store `--store` names: a SQLite file, which must exist (a command never creates an
    empty one), or a PostgreSQL database (`PostgresStore`, which connects on first use).

    Args:
        store: the `--store` argument, a file or a `postgresql://` URI.

    Returns:
        The store (nothing is read yet), signing and verifying with `$BOUNDLOOP_CHECKPOINT_KEY`
        when it is set; close it with `close_store`.

    Raises:
        CommandError: there is no such file, it is a directory, the `postgres` extra is
            missing for a URI, or `$BOUNDLOOP_CHECKPOINT_KEY` is set but empty.
    """
    value = os.environ.get(KEY_ENV)
    if value == "":
        raise CommandError(f"{KEY_ENV} is set but empty: unset it, or set it to the store's key")
    opened = _postgres(store) if is_postgres(store) else _sqlite(store)
    return opened if value is None else SignedStore(opened, value.encode())


def _sqlite(store: str) -> CheckpointStore:
    file = Path(store)
    if file.is_dir():
        raise CommandError(f"--store {store} is a directory, not a SQLite store")
    if not file.exists():
        raise CommandError(
            f"--store {store}: no such file (a store is made by a loop with store=SQLiteStore(...))"
        )
    return SQLiteStore(file)


def _postgres(dsn: str) -> CheckpointStore:
    try:
        from ..checkpoint import PostgresStore
    except ModuleNotFoundError as exc:  # the extra is missing: the store names what to install
        raise CommandError(str(exc)) from exc
    except ImportError as exc:  # psycopg is there, but not libpq
        raise CommandError(f"cannot load psycopg for --store {dsn}: {exc}") from exc
    return PostgresStore(dsn)


@runtime_checkable
class _Closable(Protocol):
    async def aclose(self) -> None: ...


async def close_store(store: CheckpointStore) -> None:
    """Release what the store holds open (a `PostgresStore`'s pool and lease session)."""
    if isinstance(store, _Closable):
        await store.aclose()


@contextlib.asynccontextmanager
async def closing(store: CheckpointStore | None) -> AsyncGenerator[None]:
    """Close `store` (if any) when the block exits, however it exits."""
    try:
        yield
    finally:
        if store is not None:
            await close_store(store)


def store_errors(store: str) -> tuple[type[Exception], ...]:
    """What reading `--store` raises when the store cannot be read at all (besides
    `CheckpointCorrupt`): sqlite3's or psycopg's errors, and `OSError`."""
    if is_postgres(store):
        import psycopg  # loaded already: `open_store` imported PostgresStore

        return (psycopg.Error, OSError)
    return (sqlite3.Error, OSError)


def store_failure(store: str, exc: Exception) -> CommandError:
    """The one-line error for a store that cannot be read at all.

    Args:
        store: the `--store` argument.
        exc: what reading it raised (one of `store_errors(store)`, or `CheckpointCorrupt`).

    Returns:
        The error to raise.
    """
    if isinstance(exc, CheckpointCorrupt):
        return CommandError(str(exc))
    if is_postgres(store):
        import psycopg

        # libpq's message goes on with hints ("Is the server running ...?"): its first line says it.
        reason = next(iter(str(exc).strip().splitlines()), type(exc).__name__)
        if isinstance(exc, psycopg.OperationalError):  # refused, unknown host, auth, pool timeout
            return CommandError(f"cannot reach the store {store}: {reason}")
        return CommandError(f"cannot read the store {store}: {reason}")
    return CommandError(f"cannot read the store {store}: {exc}")


async def load_state(store: CheckpointStore, name: str, task_id: str, *, hint: str = "") -> LoopState:
    """The stored state of `task_id`.

    Args:
        store: the opened store.
        name: the `--store` argument, for the messages.
        task_id: the run to load.
        hint: appended to the message of a task that is not in the store.

    Raises:
        CommandError: the task is not in the store, its row cannot be read, or the store fails.
    """
    try:
        state = await store.load(task_id)
    except CheckpointCorrupt as exc:
        raise CommandError(str(exc)) from exc
    except store_errors(name) as exc:
        raise store_failure(name, exc) from exc
    if state is None:
        raise CommandError(f"task {task_id!r} is not in {name}{hint}")
    return state
