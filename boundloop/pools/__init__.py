"""Budget pools: ceilings many runs share (a tenant's day, a team's month), and their stores.

`BudgetPool`, `PoolStatus`, `MemoryPoolStore` and `SQLitePoolStore` (in `pool.py`,
`store.py`, `sqlite.py`) are imported from `boundloop`; this package is the home of the store
interface (`PoolStore`, `Hold`, `PoolUsage`: `boundloop/pools/store.py` says what a store must
guarantee, and its tables) and of the ledger's values (`Claim`, `Grant`, `Shortfall`,
`Ledger`). docs/pools.md.

The package imports its names when imported (three small modules, no file read, nothing
of the stores' drivers): the core imports the ledger's values with the first run.
"""

from __future__ import annotations

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
