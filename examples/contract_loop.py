"""A loop declared as a contract, checked, built and run; then the contract of a loop built in code.

`examples/contracts/refund_investigation.json` declares the refund investigation of
`boundloop demo` as data: model, system prompt (a file), tools with their schemas, the
stop_reason -> handler map, budget, policy (a file) and metrics. The code supplies only what
data cannot: the tool handlers and the client.

    python examples/contract_loop.py
    boundloop check examples/contracts/refund_investigation.json
    boundloop compile examples/contracts/refund_investigation.json -o loop.py --report loop.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import anyio.to_thread

from boundloop import AgentLoop, Observers, ScriptedClient
from boundloop.cli import demo
from boundloop.contract import check_contract, load_contract

CONTRACT = Path(__file__).resolve().parent / "contracts" / "refund_investigation.json"


async def main() -> int:
    """Check the contract, build its loop with the demo's handlers, run it; print its contract back."""
    # Reading files blocks: inside async code, read the contract in a worker thread.
    problems = await anyio.to_thread.run_sync(check_contract, CONTRACT)
    print(f"check: {len(problems)} problem(s)")
    contract = await anyio.to_thread.run_sync(load_contract, CONTRACT)
    handlers = {name: registered.handler for name, registered in demo.demo_loop().tools.items()}
    loop = AgentLoop.from_contract(
        contract, handlers=handlers, client=ScriptedClient(demo.SCRIPT), observers=Observers(metrics=None)
    )
    result = await loop.run(demo.GOAL)
    print(f"stop reason: {result.stop_reason}")
    print(f"tools run: {[o.tool for o in result.state.observations if o.attempts]}")
    written = loop.to_contract().to_dict()
    print(f"its contract: {len(written['tools'])} tools, signals {sorted(written['signals'])}")
    print(f"round trip checks: {len(check_contract(json.loads(json.dumps(written))))} problem(s)")
    return 0 if not problems and result.stop_reason == "completed" else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
