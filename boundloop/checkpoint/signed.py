"""Signed checkpoints: `AgentLoop(store=SignedStore(store, key))`, for a store others can write to.

Every save and load of the loop goes through the `SignedStore` it is given: `run`, `resume`,
the driver's checkpoints, the DBOS integration, `loop.store`. A save puts an HMAC-SHA256 of
the state (canonical JSON: sorted keys, no whitespace) in the state's `signature` field; a load
recomputes it and refuses a row whose signature is missing or does not match with
`CheckpointCorrupt` (field `signature`). A loop without a `SignedStore` ignores signatures: a
signed row reads as any other.

The signature proves the row was written by a holder of the key; it does not prove it is the
newest row of its run (an older signed row of the same task, put back, verifies).
"""

from __future__ import annotations

import builtins
import dataclasses
import hashlib
import hmac
import json
from contextlib import AbstractAsyncContextManager
from typing import Final, cast, final

from ..errors import CheckpointCorrupt, ConfigurationError
from ..state import LoopState
from .paging import DEFAULT_LIMIT, RunPage, page_runs
from .store import CheckpointStore, Status, StoredRun, lease_of

__all__ = [
    "SignedStore",
    "checkpoint_key",
    "resigned",
    "signature",
]

_DOMAIN: Final = b"boundloop checkpoint v1\n"
"""Prefixed to the signed text, so a key shared with other uses signs nothing else alike."""


def checkpoint_key(key: bytes | str | None) -> bytes | None:
    """The key as bytes (a str is UTF-8 encoded), or None.

    Raises:
        ConfigurationError: the key is empty, or neither bytes nor str.
    """
    if key is None:
        return None
    if isinstance(cast(object, key), str):
        key = cast(str, key).encode()
    if not isinstance(cast(object, key), bytes) or not key:
        raise ConfigurationError("a SignedStore key must be a non-empty bytes or str secret")
    return cast(bytes, key)


_LATER_FIELDS: Final[tuple[tuple[str, object], ...]] = (
    ("parent_task_id", None),
    ("children", []),
    ("waiting_on", {}),
    ("below", {}),
)
"""`LoopState` fields added since signing began, with their unset values."""


def signature(state: LoopState, key: bytes) -> str:
    """The HMAC-SHA256 (hex) of the state without its `signature`."""
    body = state.to_dict()
    body.pop("signature", None)
    # Fields added after the first signed checkpoints are signed only when set: a checkpoint
    # signed before they existed still verifies.
    for name, unset in _LATER_FIELDS:
        if body.get(name, unset) == unset:
            body.pop(name, None)
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hmac.new(key, _DOMAIN + text.encode(), hashlib.sha256).hexdigest()


def resigned(store: CheckpointStore | None, old: CheckpointStore | None) -> CheckpointStore | None:
    """`store` signing with `old`'s key when `old` is a `SignedStore` (a signed one stays signed)."""
    if store is None or not isinstance(old, SignedStore):
        return store
    return old.over(store)


@final
class SignedStore:
    """A store whose states are signed on save and verified on load (see the module).

    It leases as its inner store does (a store that does not lease: a no-op lease).
    """

    __slots__ = ("_key", "inner")

    def __init__(self, inner: CheckpointStore, key: bytes | str) -> None:
        """Sign `inner`'s states with `key` (a str is UTF-8 encoded).

        Raises:
            ConfigurationError: the key is empty, or neither bytes nor str.
        """
        self.inner: CheckpointStore = inner.inner if isinstance(inner, SignedStore) else inner
        self._key = cast(bytes, checkpoint_key(key))

    def over(self, store: CheckpointStore) -> SignedStore:
        """`store`, signed with this store's key."""
        return SignedStore(store, self._key)

    def __repr__(self) -> str:
        return f"SignedStore({self.inner!r})"

    async def save(self, state: LoopState) -> None:
        """Save the state with its signature."""
        await self.inner.save(dataclasses.replace(state, signature=signature(state, self._key)))

    async def load(self, task_id: str) -> LoopState | None:
        """The last saved state of `task_id`, its signature verified (and cleared), or None.

        Raises:
            CheckpointCorrupt: the row cannot be read, or its signature is missing or wrong.
        """
        state = await self.inner.load(task_id)
        if state is None:
            return None
        found = state.signature
        if found is None:
            raise CheckpointCorrupt(
                task_id, "missing: this loop reads only signed checkpoints", field="signature"
            )
        if not hmac.compare_digest(found.encode(), signature(state, self._key).encode()):
            raise CheckpointCorrupt(
                task_id,
                "does not match: the row was changed outside the loop, or signed with another key",
                field="signature",
            )
        state.signature = None
        return state

    async def list(
        self, *, status: Status | None = None, stop_reason: str | None = None
    ) -> builtins.list[StoredRun]:
        """The inner store's runs (`list` reads no state, so verifies nothing)."""
        return await self.inner.list(status=status, stop_reason=stop_reason)

    async def page(
        self,
        *,
        status: Status | None = None,
        stop_reason: str | None = None,
        limit: int = DEFAULT_LIMIT,
        cursor: str | None = None,
    ) -> RunPage:
        """A page of the inner store's runs: from its index when it pages (`PagingStore`), else
        its list cut. Like `list`, a page reads no state, so it verifies nothing: a run's state
        is verified when it is loaded.

        Raises:
            ConfigurationError: the limit or the cursor is invalid.
        """
        return await page_runs(self.inner, status=status, stop_reason=stop_reason, limit=limit, cursor=cursor)

    async def delete(self, task_id: str) -> bool:
        """Forget a task; True if it was there."""
        return await self.inner.delete(task_id)

    def lease(self, task_id: str) -> AbstractAsyncContextManager[None]:
        """The inner store's lease of `task_id`, or a no-op for a store that does not lease."""
        return lease_of(self.inner, task_id)

    async def aclose(self) -> None:
        """Close the inner store, if it closes (a `PostgresStore`)."""
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()
