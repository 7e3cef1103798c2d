"""`boundloop pools --store STORE`: the budget pools of a pool store, each pool's latest period.

STORE is a SQLite file (`SQLitePoolStore`) or a `postgresql://` URI (`PostgresPoolStore`), as
for the commands on stored runs. A SQLite file is opened read-only first to see whether any
pool has reserved in it: listing never writes the tables into a file that has none.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio

from ..pools.store import NANO, PoolStore, PoolUsage
from ._errors import EXIT_OK, CommandError
from ._store import is_postgres, store_errors


def pools_command(args: argparse.Namespace) -> int:
    """List the pools of `--store`: name, period, spent, reserved, ceiling.

    Args:
        args: the parsed arguments of `boundloop pools`.

    Returns:
        0.

    Raises:
        CommandError: no such file, not a SQLite database, the `postgres` extra missing, or
            the database cannot be reached or read.
    """
    path: str = args.store
    store = open_pool_store(path)
    now = dt.datetime.now(dt.UTC).timestamp()
    found: list[PoolUsage] = [] if store is None else anyio.run(_list, store, path, now)
    records = [record(usage) for usage in found]
    if args.json:
        print(json.dumps({"pools": records}, indent=2, ensure_ascii=False))
        return EXIT_OK
    if not records:
        print(f"no budget pool in {path} (a pool's first reservation writes it there)")
        return EXIT_OK
    rows = [("POOL", "PERIOD", "SPENT", "RESERVED", "CEILING")]
    rows.extend(
        (
            item["pool"],
            item["period"] or "-",
            _amount(item["spent_usd"], item["spent_tokens"]),
            _amount(item["reserved_usd"], item["reserved_tokens"], holds=item["holds"]),
            _ceiling(item["max_cost_usd"], item["max_total_tokens"]),
        )
        for item in records
    )
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    for row in rows:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return EXIT_OK


def record(usage: PoolUsage) -> dict[str, Any]:
    """A pool's period as `--json` gives it: dollars and tokens, the ceilings its latest
    reservation was held under (None: not limited)."""
    return {
        "pool": usage.pool,
        "period": usage.period,
        "spent_usd": usage.spent_nusd / NANO,
        "spent_tokens": usage.spent_tokens,
        "reserved_usd": usage.reserved_nusd / NANO,
        "reserved_tokens": usage.reserved_tokens,
        "holds": usage.holds,
        "max_cost_usd": None if usage.max_nusd is None else usage.max_nusd / NANO,
        "max_total_tokens": usage.max_tokens,
    }


def _amount(usd: float, tokens: int, *, holds: int | None = None) -> str:
    held = f" in {holds} call{'' if holds == 1 else 's'}" if holds else ""
    return f"${usd:.4f} ({tokens:,} tokens){held}"


def _ceiling(usd: float | None, tokens: int | None) -> str:
    parts = ([] if usd is None else [f"${usd:.4f}"]) + ([] if tokens is None else [f"{tokens:,} tokens"])
    return " and ".join(parts) or "-"


async def _list(store: PoolStore, path: str, now: float) -> list[PoolUsage]:
    try:
        return await store.list(now)
    except ConnectionError as exc:  # the PostgreSQL server not reached: its sentence says so
        raise CommandError(str(exc)) from exc
    except store_errors(path) as exc:
        where = getattr(store, "server", path)  # a DSN's password is never shown
        raise CommandError(f"cannot read the budget pools in {where}: {_first_line(exc)}") from exc
    finally:
        close = getattr(store, "aclose", None)
        if close is not None:
            await close()


def _first_line(exc: BaseException) -> str:
    return next(iter(str(exc).strip().splitlines()), "") or type(exc).__name__


def open_pool_store(path: str, option: str = "--store") -> PoolStore | None:
    """The pool store `option` (`--store`, or `serve --pools`) names: a `PostgresPoolStore` for a URI
    (connecting on first use), else the `SQLitePoolStore` of an existing file; None when the
    file holds no pool yet.

    Raises:
        CommandError: no such file, a directory, not a SQLite database, or the `postgres`
            extra missing.
    """
    return _postgres(path) if is_postgres(path) else _sqlite(path, option)


def _sqlite(path: str, option: str) -> PoolStore | None:
    """The SQLite pool store at `path`; None when the file holds no pool yet."""
    from ..pools.sqlite import SQLitePoolStore

    file = Path(path)
    if file.is_dir():
        raise CommandError(f"{option} {path} is a directory, not a SQLite file")
    if not file.exists():
        raise CommandError(f"{option} {path}: no such file (a pool's store is made by SQLitePoolStore(...))")
    try:
        with sqlite3.connect(f"{file.resolve().as_uri()}?mode=ro", uri=True) as db:
            has = db.execute("SELECT 1 FROM sqlite_master WHERE name = 'boundloop_pools'").fetchone()
    except sqlite3.Error as exc:
        raise CommandError(f"cannot read the budget pools in {path}: {exc}") from exc
    return None if has is None else SQLitePoolStore(file)


def _postgres(dsn: str) -> PoolStore:
    try:
        from ..pools.postgres import PostgresPoolStore
    except ModuleNotFoundError as exc:  # the extra is missing: the store names what to install
        raise CommandError(str(exc)) from exc
    except ImportError as exc:  # psycopg is there, but not libpq
        raise CommandError(f"cannot load psycopg for --store {dsn}: {exc}") from exc
    return PostgresPoolStore(dsn)
