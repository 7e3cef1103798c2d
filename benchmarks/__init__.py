"""boundloop's benchmark suite: the loop's own overhead against hand-written floors, in one process.

Run by hand, never by the test command::

    .venv/bin/python -m benchmarks [--quick] [--write]     # or: .venv/bin/python benchmarks/run.py

`--write` also writes `benchmarks/RESULTS.md`. Every figure is a median with min and max over
repeats, in CPU time (`time.thread_time`) and wall time (`time.perf_counter`), next to two
hand-written floors measured in the same run: a minimal loop with `asyncio.gather` and the same
loop with an anyio task group. `benchmarks/peers.py` (separate, optional) runs the per-turn
workload on other agent frameworks in a venv of their own.
"""
