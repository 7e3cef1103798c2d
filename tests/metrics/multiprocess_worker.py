"""A worker process for the multiprocess test: one scripted run, metrics in `PROMETHEUS_MULTIPROC_DIR`.

Run as `python -m tests.metrics.multiprocess_worker LOOP_NAME [SCRIPT]` (SCRIPT: `refund`, the
default, or `search`) with the directory in the environment: prometheus_client picks its
mmap-backed values when it is first imported.
"""

from __future__ import annotations

import json
import os
import sys

import anyio

from boundloop import LoopMetrics
from boundloop.metrics import multiprocess_mode
from tests.metrics.scripts import edges_taken, refund_loop, search_loop


async def main(name: str, script: str = "refund") -> None:
    """Run the script once on the default registry and print what the run did, as JSON."""
    assert multiprocess_mode(), "PROMETHEUS_MULTIPROC_DIR must be set"
    metrics = LoopMetrics()
    loop = {"refund": refund_loop, "search": search_loop}[script](metrics, name=name)
    result = await loop.run("Decide on O-104.")
    report = {
        "pid": os.getpid(),
        "stop_reason": str(result.stop_reason),
        "exemplars": metrics.exemplars,
        "edges": [[source, dest, count] for (source, dest), count in edges_taken(result).items()],
        "server_tool_uses": result.state.usage.server_tool_uses,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "refund")
