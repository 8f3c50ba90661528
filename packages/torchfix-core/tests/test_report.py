"""The per-run report: ``torchfix_core.report()``, ``TORCHFIX_REPORT`` files, ``doctor report``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from torchfix_core.tallies import Tally, tally, tally_and_log
from torchfix_core.testing import clean_environ

STEP = (
    "import json, torch, torch.utils.checkpoint as c\n"
    "x = torch.ones(2, requires_grad=True)\n"
    "for _ in range({n}):\n"
    "    c.detach_variable((x,))\n"
    "import torchfix_core\n"
    "row = next(r for r in torchfix_core.report()['fixes'] if r['id'] == 'demo-checkpoint')\n"
    "print(json.dumps(row))\n"
)


def run(code: str, **env: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=clean_environ(env), timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    return proc


def doctor_report(folder: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "torchfix_core", "report", str(folder), *options],
        capture_output=True,
        text=True,
        env=clean_environ(),
        timeout=300,
    )


def test_report_counts_what_the_fix_did() -> None:
    row = json.loads(run(STEP.format(n=3)).stdout.splitlines()[-1])
    assert row["state"] == "applied" and row["events"] == {"counted-call": 3} and row["acted"] == 3


def test_disabled_fix_reports_zero() -> None:
    row = json.loads(run(STEP.format(n=3), TORCHFIX_DISABLE="demo-checkpoint").stdout.splitlines()[-1])
    assert row["state"] == "disabled" and row["acted"] == 0


def test_every_rank_writes_a_file_and_doctor_summarises_them(tmp_path: Path) -> None:
    for rank, n in ((0, 2), (1, 0)):
        run(STEP.format(n=n), TORCHFIX_REPORT=str(tmp_path / "reports"), RANK=str(rank), WORLD_SIZE="2")
    files = sorted(p.name for p in (tmp_path / "reports").iterdir())
    assert [f.split("-pid")[0] for f in files] == ["torchfix-report-rank0", "torchfix-report-rank1"]
    proc = doctor_report(tmp_path / "reports", "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    fix = summary["fixes"]["demo-checkpoint"]
    assert (
        fix["states"] == {"applied": ["0", "1"]} and fix["acted_on"] == ["0"] and fix["events"] == {"counted-call": 2}
    )
    text = doctor_report(tmp_path / "reports").stdout
    assert "demo-checkpoint: applied on 0, 1; acted on 0; events: counted-call x2" in text


def test_unreadable_report_files_are_listed_and_exit_2(tmp_path: Path) -> None:
    folder = tmp_path / "reports"
    folder.mkdir()
    (folder / "torchfix-report-rank0-pid1.json").write_text("{truncated")
    (folder / "torchfix-report-rank1-pid2.json").write_text(json.dumps({"format": "other"}))
    proc = doctor_report(folder, "--json")
    summary = json.loads(proc.stdout)
    assert proc.returncode == 2 and len(summary["problems"]) == 2
    empty = doctor_report(tmp_path / "nowhere")
    assert empty.returncode == 2 and "not a directory" in empty.stdout


def test_report_directory_that_is_a_file_is_a_clear_problem(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    proc = run(STEP.format(n=1), TORCHFIX_REPORT=str(blocker))
    assert f"TORCHFIX_REPORT={str(blocker)!r} is not a directory" in proc.stderr


def test_tally_details_are_bounded_and_never_raise() -> None:
    t = Tally("t", ("a",))
    assert t.counts == {"a": 0} and t.acted == 0

    class Unprintable:
        def __str__(self) -> str:
            raise ValueError

    for i in range(30):
        t.note("b", f"kernel-{i}")
    t.note("b", Unprintable())
    data = t.as_dict()
    assert data["events"] == {"a": 0, "b": 31}
    assert len(data["details"]["b"]) == 21 and data["details"]["b"]["(more)"] == 11
    t.clear()
    assert t.acted == 0 and t.as_dict()["details"] == {}
    assert tally("same-id") is tally("same-id", "late-event") and "late-event" in tally("same-id").counts


def test_tally_and_log_name_the_tally_and_the_logger_from_one_id() -> None:
    import logging

    acted, log = tally_and_log("one-id", "kept")
    assert acted is tally("one-id") and acted.counts == {"kept": 0}
    assert log is logging.getLogger("torchfix.one-id") and log.parent is logging.getLogger("torchfix")


def test_counts_expression_reaches_the_counts_from_foreign_globals() -> None:
    """What a fix writes into a patched module's source: it evaluates in globals that know nothing
    of torchfix (empty here, with the builtins) and names only valid identifiers."""
    from torchfix_core import tallies

    expression = tallies.counts_expression("torchfix_core.tallies", "MAX_DETAILS")
    assert eval(expression, {}) == tallies.MAX_DETAILS  # noqa: S307 - the expression under test
    for module, attribute in (("torchfix_core; import os", "COUNTS"), ("torchfix_core", "COUNTS[0]")):
        with pytest.raises(ValueError, match="not a module / attribute name"):
            tallies.counts_expression(module, attribute)
