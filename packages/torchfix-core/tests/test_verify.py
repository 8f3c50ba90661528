"""``torchfix-doctor verify``: each fix's declared reproduction, run here without and with the fix.

The test fix ``demo-checkpoint`` declares a reproduction (its "bug": a ``detach_variable`` call
nobody counted); ``DEMO_REPRODUCTION`` makes it break, find the bug with the fix too, find no bug
at all, or say it cannot run. ``demo-dynamo`` declares none. Every run is ``python -m torchfix_core verify`` in a
fresh interpreter, as a user runs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from torchfix_core.testing import clean_environ, reproduce
from torchfix_core.testing._scenario import ScenarioFailed

DEMO = "demo-checkpoint"


def _verify(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "torchfix_core", "verify", *args]
    return subprocess.run(command, capture_output=True, text=True, env=clean_environ(env), timeout=300)


def _rows(proc: subprocess.CompletedProcess) -> dict[str, dict[str, Any]]:
    return {row["id"]: row for row in json.loads(proc.stdout)["rows"]}


def test_a_fix_is_reproduced_without_and_repaired_with_it() -> None:
    proc = _verify(DEMO, "--json")
    assert proc.returncode == 0, proc.stderr
    row = _rows(proc)[DEMO]
    assert row["without"]["outcome"] == {
        "result": "observed",
        "measure": "1 detach_variable call, 0 counted",
        "detail": "",
    }
    assert row["with"]["outcome"]["result"] == "not-observed" and row["with"]["state"] == "applied", row
    assert row["without"]["state"] == "disabled", row  # the first run had the fix off
    assert row["verdict"].startswith("repaired") and row["exit"] == 0 and row["seconds"] > 0, row
    # progress on stderr while it runs, the table (here JSON) on stdout
    assert f"verify: {DEMO}: without the fix" in proc.stderr and "repaired" in proc.stderr


def test_the_table_names_the_measure_of_each_run() -> None:
    proc = _verify(DEMO)
    assert proc.returncode == 0, proc.stderr
    assert "without the fix: 1 detach_variable call, 0 counted" in proc.stdout
    assert "with the fix: 1 detach_variable call, 1 counted" in proc.stdout


def test_a_bug_the_fix_does_not_repair_exits_1_and_says_to_report_it() -> None:
    proc = _verify(DEMO, "--json", env={"DEMO_REPRODUCTION": "always"})
    assert proc.returncode == 1, proc.stderr
    row = _rows(proc)[DEMO]
    assert row["verdict"].startswith("NOT REPAIRED") and "new variant" in row["verdict"], row
    assert "torchfix-doctor --json" in row["verdict"] and "docs/diagnosis.md" in row["verdict"], row


def test_a_reproduction_that_breaks_exits_2_and_says_why() -> None:
    proc = _verify(DEMO, env={"DEMO_REPRODUCTION": "raise"})
    assert proc.returncode == 2, proc.stderr
    assert "reproduction broke: RuntimeError: the demo reproduction broke on purpose" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr


def test_a_reproduction_this_machine_cannot_run_is_skipped_not_failed() -> None:
    proc = _verify(DEMO, "--json", env={"DEMO_REPRODUCTION": "cannot"})
    assert proc.returncode == 0, proc.stderr
    assert _rows(proc)[DEMO]["verdict"] == "skipped: cannot run here (needs the demo's imaginary accelerator)"


def test_a_fix_without_a_reproduction_is_listed_as_such() -> None:
    proc = _verify("demo-dynamo", "--json")
    assert proc.returncode == 0, proc.stderr
    assert _rows(proc)["demo-dynamo"]["verdict"] == "skipped: the fix declares no reproduction"


def test_a_budget_skips_what_would_not_fit_and_says_so() -> None:
    proc = _verify(DEMO, "--json", "--budget", "3")  # the demo declares about 5 s a run, two runs
    assert proc.returncode == 0, proc.stderr
    row = _rows(proc)[DEMO]
    assert row["verdict"] == "skipped: would not fit the budget (about 10 s, 3 s left)" and row["without"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-fix"], "unknown fix id(s) no-such-fix; installed: "),
        (["--budget", "ten"], "--budget takes a number of seconds, got 'ten'"),
        (["--budget", "-1"], "--budget takes a number of seconds >= 0, got '-1'"),
    ],
    ids=["unknown-id", "budget-not-a-number", "budget-negative"],
)
def test_bad_input_gets_a_clear_message_not_a_traceback(args: list[str], message: str) -> None:
    proc = _verify(*args)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_kit_runs_the_same_declared_reproduction() -> None:
    """``torchfix_core.testing.reproduce`` is what a fix's tests call: the same child as verify's."""
    off, on = reproduce(DEMO, False), reproduce(DEMO, True)
    assert (off["outcome"]["result"], off["state"]) == ("observed", "disabled"), off
    assert (on["outcome"]["result"], on["state"]) == ("not-observed", "applied"), on
    with pytest.raises(ScenarioFailed, match="broke on purpose"):
        reproduce(DEMO, True, env={"DEMO_REPRODUCTION": "raise"})


def test_the_kit_reads_the_report_the_reproduction_wrote() -> None:
    """``reproduce(..., with_report=True)``: the fix's row of the report its interpreter wrote at exit."""
    on = reproduce(DEMO, True, with_report=True)
    assert on["report"]["id"] == DEMO and on["report"]["state"] == "applied", on["report"]
    assert on["outcome"]["result"] == "not-observed", on


@pytest.mark.parametrize(
    ("mode", "verdict", "status"),
    [
        ("always", "the bug reproduces although the probe says not-needed: torchfix does not repair it here", 1),
        ("absent", "the bug does not reproduce: upstream's fix (or this release) holds", 0),
    ],
    ids=["bug-shows", "upstream-fix-holds"],
)
def test_a_not_needed_fix_runs_once_and_the_bug_showing_exits_1(
    monkeypatch: pytest.MonkeyPatch, mode: str, verdict: str, status: int
) -> None:
    """Where the probe says ``not-needed`` the fix applies nothing: one run, without it. The rows
    are judged from doctor's report; here one that says ``not-needed`` for the demo fix."""
    from torchfix_core import _verify

    monkeypatch.setenv("DEMO_REPRODUCTION", mode)
    report = {"fixes": [{"id": DEMO, "state": "not-needed", "reason": "the probe found the bug absent"}]}
    (row,) = _verify.verify(report, [], include_all=True)
    assert row["with"] is None and row["without"]["state"] == "disabled", row
    assert row["verdict"].startswith(verdict) and row["exit"] == status, row
    (skipped,) = _verify.verify(report, [])  # without --all or its id: listed, not run
    assert skipped["verdict"] == "skipped: not-needed here (name its id or pass --all to run it)", skipped


def test_a_bug_outside_the_validated_range_is_reported_not_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    """``out-of-range`` records where the fix was validated, not that the bug is absent (recompute-cache
    on torch 2.8: the bug, but not the switch the fix needs): the row says so; exit 0."""
    from torchfix_core import _verify

    monkeypatch.setenv("DEMO_REPRODUCTION", "always")
    report = {"fixes": [{"id": DEMO, "state": "out-of-range", "reason": "torch 2.5 not in >=9"}]}
    (row,) = _verify.verify(report, [DEMO])
    assert row["with"] is None and row["exit"] == 0, row
    assert row["verdict"].startswith("the bug reproduces here, outside the fix's validated range"), row
    assert "TORCHFIX_FORCE" in row["verdict"], row
