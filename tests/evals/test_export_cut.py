"""A run cut short from outside (cancelled, or out of time) while it waited for the model or while a
tool ran, exported with `boundloop eval --export`, is a case `boundloop eval` runs and passes: the
case is cut where the recording ends (its `cut`), as the recorded run was."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from boundloop import SQLiteStore, StopReason
from boundloop.errors import FixtureError
from boundloop.evals import export_case, parse_case, run_case
from tests.test_replay_cut import CUTS, cut_run

ROOT = Path(__file__).resolve().parents[2]
EVERY_CUT = [pytest.param(StopReason.CANCELLED, "model", id="cancelled-waiting-for-the-model"), *CUTS]


@pytest.mark.parametrize(("stop", "where"), EVERY_CUT)
async def test_an_exported_cut_run_passes_as_a_case_on_the_recorded_path(
    stop: StopReason, where: str
) -> None:
    """The case says where the cut falls and how; it runs to the recorded stop, the same tools run
    (the one cut while it ran is not among them), and it replays identically."""
    result = await cut_run(stop, where)
    exported = export_case(result.state)
    assert exported["cut"] == str(stop)
    outcome = await run_case(parse_case(json.loads(json.dumps(exported))))
    outcome.check()
    assert outcome.stop_reason is stop
    assert outcome.tools_run == ("read_order",)
    assert outcome.replay_identical


async def test_a_case_without_its_cut_still_reports_the_script_too_short() -> None:
    """Without `cut`, a script that ends before the run does is the fixture's error, as before."""
    result = await cut_run(StopReason.TIMEOUT, "model")
    exported = export_case(result.state)
    del exported["cut"]
    outcome = await run_case(parse_case(exported))
    assert outcome.status == "error"
    assert outcome.failures == ("model: the run asked for turn 2; the script has 1",)


def boundloop(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "boundloop", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )


@pytest.mark.parametrize(("stop", "where"), EVERY_CUT)
def test_boundloop_eval_export_of_a_cut_run_then_eval_passes(
    tmp_path: Path, stop: StopReason, where: str
) -> None:
    """`boundloop eval --export cut-run --store runs.db`, then `boundloop eval case.json`: PASS, exit 0."""
    store = tmp_path / "runs.db"
    anyio.run(cut_run, stop, where, SQLiteStore(store))
    exported = boundloop("eval", "--export", "cut-run", "--store", str(store))
    assert exported.returncode == 0, exported.stdout + exported.stderr
    case = tmp_path / "case.json"
    case.write_text(exported.stdout, encoding="utf-8")
    ran = boundloop("eval", str(case))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"PASS  cut-run  {stop}" in ran.stdout


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        pytest.param(
            {"state": "run.state.json"},
            "cut: a `state` case replays the recorded results and decisions; cut is not used",
            id="with-a-state",
        ),
        pytest.param(
            {"model": [{"text": "ok"}], "cut": "deadline"},
            "cut: 'deadline' is not one of ['cancelled', 'timeout']",
            id="unknown-stop",
        ),
    ],
)
def test_a_cut_the_case_cannot_use_is_named(fields: dict[str, object], problem: str) -> None:
    """`cut` is `cancelled` or `timeout`, on a scripted case (a saved state replays its own cut)."""
    raw = {"case_id": "c", "goal": "g", "cut": "timeout", "expected": {"stop_reason": "timeout"}, **fields}
    with pytest.raises(FixtureError) as raised:
        parse_case(raw)
    assert problem in raised.value.problems


async def test_a_cut_case_stops_where_its_recording_was_cut_however_slow_the_machine() -> None:
    """The recorded cut owns the stop: the budget's wall-clock deadline, which a loaded machine
    could reach earlier than the recording did, does not run beside it (a deadline shorter than
    the case's first turn stands for such a machine)."""
    result = await cut_run(StopReason.TIMEOUT, "tool")
    exported = export_case(result.state)
    exported["budget"]["timeout_s"] = 1e-9
    outcome = await run_case(parse_case(json.loads(json.dumps(exported))))
    outcome.check()
    assert outcome.stop_reason is StopReason.TIMEOUT
    assert outcome.tools_run == ("read_order",)
    assert outcome.replay_identical
