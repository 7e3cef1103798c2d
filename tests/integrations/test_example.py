"""examples/dbos_workers.py runs: two workers, four runs through the queue, each reported with its
worker. (Meant for tests/test_examples.py, which lists every example.)"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "dbos_workers.py"
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "ANTHROPIC_API_KEY": ""}


def test_the_dbos_example_runs_two_workers_fed_by_a_queue(postgres_dsn: str) -> None:
    ran = subprocess.run(
        [sys.executable, str(EXAMPLE), "--dsn", postgres_dsn],
        capture_output=True,
        text=True,
        timeout=120,
        env=ENV,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr
    runs = re.findall(r"^(O-\d+): run by (worker-[12]): (.*)$", ran.stdout, re.MULTILINE)
    assert [order for order, _, _ in runs] == ["O-101", "O-102", "O-103", "O-104"]
    assert [answer for _, _, answer in runs][2] == "O-103: refund"


def test_the_dbos_example_says_it_needs_a_database() -> None:
    env = {key: value for key, value in ENV.items() if key != "BOUNDLOOP_DBOS_DSN"}
    ran = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60, env=env, check=False
    )
    assert ran.returncode == 2
    assert ran.stdout == ""
    assert ran.stderr.strip().endswith("or set BOUNDLOOP_DBOS_DSN.")
    assert ran.stderr.count("\n") == 1
