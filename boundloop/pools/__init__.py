"""Budget pools: ceilings many runs share (a tenant's day, a team's month), and their stores.

`BudgetPool`, `PoolStatus`, `MemoryPoolStore` and `SQLitePoolStore` (in `pool.py`,
`store.py`, `sqlite.py`) are imported from `boundloop`; this package is the home of the store
interface (`PoolStore`, `Hold`, `PoolUsage`: `boundloop/pools/store.py` says what a store must
guarantee, and its tables) and of the ledger's values (`Claim`, `Grant`, `Shortfall`,
`Ledger`). docs/pools.md.

Each name is imported on first use, from its own module: the core's use of the ledger's
values does not load the stores.
"""

from __future__ import annotations

import typing

from .._lazy import lazy_getattr as _lazy_getattr
from .._lazy import public_names as _public_names

if typing.TYPE_CHECKING:
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

_SOURCES: typing.Final[dict[str, str]] = _public_names(__file__)
"""Where each public name is defined, relative to the package: what `__getattr__` imports."""

__all__ = sorted(_SOURCES)  # pyright: ignore[reportUnsupportedDunderAll]

if not typing.TYPE_CHECKING:  # type checkers see the imports above, and an unknown name stays an error
    __getattr__ = _lazy_getattr(__name__, globals(), _SOURCES)

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
