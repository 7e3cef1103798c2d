"""Budget pools: ceilings many runs share (a tenant's day, a team's month), and their stores.

`BudgetPool`, `PoolStatus`, `MemoryPoolStore` and `SQLitePoolStore` (in `pool.py`, `store.py`,
`sqlite.py`) are imported from `boundloop`; this package is the home of the store interface
(`PoolStore`, `Hold`, `PoolUsage`: `boundloop/pools/store.py` says what a store must
guarantee, and its tables), of `PostgresPoolStore` (the `postgres` extra; `conformance.py`
holds the checks every store passes) and of the ledger's values (`Claim`, `Grant`,
`Shortfall`, `Ledger`). docs/pools.md.

The package imports its names when imported (three small modules, no file read, nothing
of the stores' drivers): the core imports the ledger's values with the first run.
"""

from __future__ import annotations

import typing

from .ledger import Claim as Claim
from .ledger import Grant as Grant
from .ledger import Ledger as Ledger
from .ledger import Shortfall as Shortfall
from .ledger import fit as fit
from .pool import Period as Period
from .pool import period_of as period_of
from .store import Hold as Hold
from .store import PoolStore as PoolStore
from .store import PoolUsage as PoolUsage

if typing.TYPE_CHECKING:
    from .postgres import PostgresPoolStore as PostgresPoolStore

# `PostgresPoolStore` is not in `__all__`, so `from boundloop.pools import *` works without the
# `postgres` extra; `from boundloop.pools import PostgresPoolStore` is how it is imported.
__all__ = [
    "Claim",
    "Grant",
    "Hold",
    "Ledger",
    "Period",
    "PoolStore",
    "PoolUsage",
    "Shortfall",
    "fit",
    "period_of",
]


def _postgres(name: str) -> object:
    """`PostgresPoolStore`, imported when first asked for (it needs the `postgres` extra)."""
    if name == "PostgresPoolStore":
        from .postgres import PostgresPoolStore

        return PostgresPoolStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if not typing.TYPE_CHECKING:  # type checkers see the import above
    __getattr__ = _postgres
