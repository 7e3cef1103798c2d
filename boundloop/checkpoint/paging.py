"""Pages of stored runs, newest first, for a list that stays fast however many runs a store holds.

A page ends at a cursor (the last row's save time and task id); the next page starts after it
(keyset pagination: the store's index is read from the cursor on, never counted from the top).
`SQLiteStore` and `PostgresStore` answer with one indexed query (`page`); any other store is
read whole with `list` and cut here.
"""

from __future__ import annotations

import builtins
import dataclasses
from collections.abc import Mapping, Sequence
from typing import Final, Protocol, final, runtime_checkable

from ..errors import ConfigurationError
from .store import CheckpointStore, Status, StoredRun

__all__ = [
    "Cursor",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "PagingStore",
    "RunPage",
    "after_cursor",
    "check_limit",
    "decode_cursor",
    "encode_cursor",
    "in_tree_order",
    "page_runs",
]

DEFAULT_LIMIT: Final = 50
"""Runs on a page unless asked otherwise."""

MAX_LIMIT: Final = 500
"""The most runs one page holds."""


@final
@dataclasses.dataclass(frozen=True, slots=True)
class RunPage:
    """One page of runs, newest save first, and the cursor of the next page (None: the last)."""

    runs: builtins.list[StoredRun]
    next_cursor: str | None


Cursor = tuple[float, str]
"""`(updated_at, task_id)` of the last row of a page: the next page holds the rows below it."""


def encode_cursor(row: StoredRun) -> str:
    """The cursor after `row`: its save time (exact, as `repr` writes a float) and its task id."""
    return f"{row.updated_at!r}:{row.task_id}"


def decode_cursor(cursor: str) -> Cursor:
    """`(updated_at, task_id)` from `encode_cursor`'s text.

    Raises:
        ConfigurationError: it is no cursor.
    """
    when, sep, task_id = cursor.partition(":")
    try:
        updated_at = float(when)
    except ValueError:
        updated_at = float("nan")
    if not sep or not task_id or updated_at != updated_at:  # NaN: unparsable
        raise ConfigurationError(f"{cursor!r} is not a page cursor")
    return updated_at, task_id


def check_limit(limit: int) -> int:
    """`limit` if it is a page size from 1 to `MAX_LIMIT`.

    Raises:
        ConfigurationError: it is not.
    """
    if isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise ConfigurationError(f"a page holds 1 to {MAX_LIMIT} runs, not {limit!r}")
    return limit


@runtime_checkable
class PagingStore(Protocol):
    """A store that answers a page of runs with one query on an index."""

    async def page(
        self,
        *,
        status: Status | None = None,
        stop_reason: str | None = None,
        limit: int = DEFAULT_LIMIT,
        cursor: str | None = None,
    ) -> RunPage:
        """The runs after `cursor` (from the newest without one), at most `limit`, filtered."""
        ...


def after_cursor(rows: builtins.list[StoredRun], limit: int, cursor: Cursor | None) -> RunPage:
    """The page of `rows` (at most `limit + 1` of them, already after the cursor and in order)."""
    if len(rows) > limit:
        return RunPage(rows[:limit], encode_cursor(rows[limit - 1]))
    return RunPage(rows, None)


async def page_runs(
    store: CheckpointStore,
    *,
    status: Status | None = None,
    stop_reason: str | None = None,
    limit: int = DEFAULT_LIMIT,
    cursor: str | None = None,
) -> RunPage:
    """A page of the store's runs: newest save first (then task id, descending), after `cursor`.

    Args:
        store: any store; one with `page` (SQLite, PostgreSQL) answers from its index.
        status: only runs with this status.
        stop_reason: only runs stopped for this reason.
        limit: runs on the page, 1 to `MAX_LIMIT`.
        cursor: `RunPage.next_cursor` of the page before; None: the first page.

    Returns:
        The page, and the next page's cursor (None when no run is left).

    Raises:
        ConfigurationError: the limit or the cursor is invalid.
    """
    check_limit(limit)
    after = None if cursor is None else decode_cursor(cursor)
    if isinstance(store, PagingStore):
        return await store.page(status=status, stop_reason=stop_reason, limit=limit, cursor=cursor)
    rows = sorted(
        await store.list(status=status, stop_reason=stop_reason),
        key=lambda row: (row.updated_at, row.task_id),
        reverse=True,
    )
    if after is not None:
        rows = [row for row in rows if (row.updated_at, row.task_id) < after]
    return after_cursor(rows[: limit + 1], limit, after)


def in_tree_order(
    task_ids: Sequence[str], parent_of: Mapping[str, str | None], children_of: Mapping[str, Sequence[str]]
) -> builtins.list[tuple[int, str]]:
    """A page's runs with their depth in their delegation tree: each delegated run right under
    its parent when its parent is on the page (in the order its parent started them), else where
    it falls, at depth 0. Each run once, also in a damaged store (a cycle)."""
    on_page = set(task_ids)
    ordered: builtins.list[tuple[int, str]] = []
    seen: set[str] = set()

    def add(task_id: str, depth: int) -> None:
        if task_id in seen:
            return
        seen.add(task_id)
        ordered.append((depth, task_id))
        for child in children_of.get(task_id, ()):
            if child in on_page:
                add(child, depth + 1)

    for task_id in task_ids:
        if parent_of.get(task_id) not in on_page:
            add(task_id, 0)
    for task_id in task_ids:  # only in a damaged store: runs whose parents' states do not name them
        add(task_id, 0)
    return ordered
