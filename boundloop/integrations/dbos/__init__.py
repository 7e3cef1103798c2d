"""Durable execution on DBOS: an `AgentLoop` run as a DBOS workflow (docs/dbos.md).

```python
from boundloop.integrations.dbos import DurableLoop

durable = DurableLoop(loop)            # before DBOS.launch(), in every worker
DBOS(config={"name": "agents", "system_database_url": dsn})
DBOS.launch()
result = await durable.run(goal, task_id="order-104")     # a LoopResult
```

Each model call and each tool call is a DBOS step: a workflow recovered after a crash replays
what DBOS recorded and runs the rest; a call in flight at the crash runs again under the same
idempotency key. Needs `pip install 'boundloop[dbos]'`; `import boundloop` never imports DBOS.
"""

from __future__ import annotations

import importlib

try:  # the extra's check, before any module that needs it
    importlib.import_module("dbos")
except ImportError as exc:
    raise ImportError(
        "boundloop.integrations.dbos needs DBOS, which is not installed: pip install 'boundloop[dbos]'"
    ) from exc

from ..._lazy import claim as _claim
from ._failures import ReplayedError as ReplayedError
from ._failures import StepFailure as StepFailure
from ._loop import DurableLoop as DurableLoop
from ._loop import DurableRun as DurableRun
from ._loop import decide as decide
from ._loop import result_of as result_of
from ._loop import retrieve as retrieve
from ._loop import submit as submit

__all__ = [
    "DurableLoop",
    "DurableRun",
    "ReplayedError",
    "StepFailure",
    "decide",
    "result_of",
    "retrieve",
    "submit",
]

_claim(__name__, *(globals()[name] for name in __all__))
