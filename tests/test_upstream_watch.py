"""The upstream watch's judgement (scripts/upstream_watch.py): synthetic doctor rows for every signal,
and a real collection on the torch of this environment."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import family  # noqa: E402
import upstream_watch as watch  # noqa: E402

sys.path.remove(str(ROOT / "scripts"))

TORCH_RANGE = {"torch": ">=2.11,<2.16"}


def fix_row(state: str, reason: str = "r", targets: dict[str, str] = TORCH_RANGE) -> dict[str, object]:
    return {
        "id": "demo",
        "distribution": "torchfix-autotune",
        "version": "0.1.0",
        "state": state,
        "reason": reason,
        "targets": targets,
    }


def test_the_watch_runs_every_installed_fix_s_declared_reproduction() -> None:
    """The watch reads the installed specs: every fix of the family here that declares a
    reproduction, by its ``module:function``."""
    table = watch.reproductions()
    assert set(table) <= set(family.family_members())
    assert table and all(":" in target for target in table.values()), table


@pytest.mark.parametrize(
    ("result", "probe", "outcome"),
    [
        ("observed", "applied", "passed"),
        ("not-observed", "not-needed", "passed"),
        ("not-observed", "applied", "failed"),  # the probe says present, the bug did not show
        ("observed", "not-needed", "failed"),  # the probe says gone, the bug showed
        ("cannot-run", "applied", "skipped"),
        ("observed", "failed", "skipped"),
        (None, "applied", "error"),
    ],
)
def test_agreement_of_a_reproduction_with_the_probe(result: str | None, probe: str, outcome: str) -> None:
    assert watch.agreement(result, probe) == outcome


@pytest.mark.parametrize(
    ("version", "spec", "position"),
    [
        ("2.13.0", ">=2.11,<2.16", "inside"),
        ("2.13.0+cpu", ">=2.11,<2.16", "inside"),
        ("2.16.0", ">=2.11,<2.16", "above"),
        ("2.17.0.dev20260301+cpu", ">=2.11,<2.16", "above"),  # a nightly counts as its release
        ("2.16.0a0+git1234abc", ">=2.11,<2.16", "above"),
        ("2.10.0", ">=2.11,<2.16", "below"),
        ("2.19.0", ">=1.13,<2.21", "inside"),
        ("2.21.0", ">=1.13,<=2.20", "above"),
        (None, ">=2.11,<2.16", "unknown"),
        ("not-a-version", ">=2.11,<2.16", "unknown"),
    ],
)
def test_range_position(version: str | None, spec: str, position: str) -> None:
    assert watch.range_position(version, spec) == position


@pytest.mark.parametrize(
    ("forced", "repro", "torch", "signal", "bug", "applies", "in_range"),
    [
        (
            "applied",
            "passed",
            "2.13.0",
            "bug present inside the validated range: fix needed and applies",
            True,
            True,
            True,
        ),
        ("applied", "passed", "2.16.0", watch.SIGNAL_EXTEND, True, True, False),
        ("applied", "not-run", "2.17.0.dev20260301", watch.SIGNAL_EXTEND, True, True, False),
        ("not-needed", "passed", "2.16.0", watch.SIGNAL_RETIRE, False, None, False),
        ("not-needed", "passed", "2.14.1", watch.SIGNAL_RETIRE, False, None, True),
        (
            "applied",
            "passed",
            "2.10.0",
            "bug present below the validated range: not validated there",
            True,
            True,
            False,
        ),
    ],
)
def test_judge_signals(
    forced: str, repro: str, torch: str, signal: str, bug: bool, applies: bool | None, in_range: bool
) -> None:
    plain_state = "out-of-range" if watch.range_position(torch, TORCH_RANGE["torch"]) != "inside" else forced
    verdict = watch.judge("demo", fix_row(forced), fix_row(plain_state), {"outcome": repro}, {"torch": torch})
    assert (verdict.signal, verdict.bug_present, verdict.applies_cleanly, verdict.in_range) == (
        signal,
        bug,
        applies,
        in_range,
    )


def test_judge_says_when_the_fix_no_longer_applies_cleanly() -> None:
    reason = (
        "refused: CachingAutotuner.bench has parameters (self, launcher, *args, grid), expected (self, launcher, *args)"
    )
    verdict = watch.judge("demo", fix_row("failed", reason), fix_row("out-of-range"), None, {"torch": "2.16.0"})
    assert verdict.applies_cleanly is False and verdict.bug_present is None
    assert verdict.signal == f"fix does not apply cleanly: {reason}; update its patch points"


def test_judge_flags_a_reproduction_that_contradicts_the_probe() -> None:
    verdict = watch.judge(
        "demo", fix_row("not-needed"), fix_row("not-needed"), {"outcome": "failed"}, {"torch": "2.13.0"}
    )
    assert verdict.signal == "reproduction failed while the probe says the bug is gone: investigate"


def test_judge_does_not_guess_without_the_target_library_or_the_package() -> None:
    te = {"transformer_engine": ">=1.13,<2.21"}
    row = fix_row("not-installed", "transformer_engine is not installed", te)
    verdict = watch.judge("demo", row, row, {"outcome": "skipped"}, {"torch": "2.13.0", "transformer_engine": None})
    assert verdict.signal == "not checked: transformer_engine is not installed here"
    assert (verdict.bug_present, verdict.applies_cleanly, verdict.in_range) == (None, None, None)
    absent = {"id": "demo", "version": None, "state": "not-installed", "reason": "x", "targets": {}}
    assert watch.judge("demo", absent, absent, None, {}).signal.startswith("not checked: the fix package")


def test_report_renders_one_line_per_fix_and_the_notes() -> None:
    result = {
        "label": "newest release",
        "versions": {"torch": "2.16.0", "transformer_engine": "2.21.0"},
        "forced": {"fixes": [dict(fix_row("applied"), id="sac-replay"), dict(fix_row("not-needed"), id="autotune")]},
        "plain": {
            "fixes": [dict(fix_row("out-of-range"), id="sac-replay"), dict(fix_row("out-of-range"), id="autotune")]
        },
        "reproductions": {"sac-replay": {"outcome": "passed"}, "autotune": {"outcome": "passed"}},
    }
    page = watch.render([result], ["the nightly index could not be reached: ran on the newest release only"])
    assert "- the nightly index could not be reached: ran on the newest release only" in page
    assert "## newest release: torch 2.16.0, transformer_engine 2.21.0" in page
    assert f"| sac-replay | yes | yes | no (above) | passed | {watch.SIGNAL_EXTEND} |" in page
    assert f"| autotune | no | ? | no (above) | passed | {watch.SIGNAL_RETIRE} |" in page


def test_collect_on_this_torch_agrees_with_doctor(tmp_path: Path) -> None:
    """The real probes on the installed torch (doctor rows only; the reproductions are each package's
    own tests, run by `nox -s tests`): forcing changes no decision inside the range, and every fix
    that doctor applies here is reported as present, applying cleanly and inside its range. (Outside
    the range a forced probe may refuse the layout: that is a finding, not an error.)"""
    out = tmp_path / "here.json"
    cmd = [sys.executable, str(ROOT / "scripts" / "upstream_watch.py"), "collect", "--label", "here"]
    done = subprocess.run([*cmd, "--out", str(out), "--no-reproductions"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["versions"]["torch"] is not None
    plain = {row["id"]: row for row in result["plain"]["fixes"]}
    forced = {row["id"]: row for row in result["forced"]["fixes"]}
    verdicts = {v.fix: v for v in watch.judge_environment(result)}
    assert set(watch.reproductions()) <= set(verdicts)  # every family fix (a package may hold several)
    assert all(plain[fix]["distribution"].startswith("torchfix-") for fix in verdicts)
    for fix, verdict in verdicts.items():
        state = plain[fix]["state"]
        assert state != "failed", plain[fix]
        if state in ("applied", "not-needed"):
            assert forced[fix]["state"] == state, (plain[fix], forced[fix])
            assert verdict.in_range is True
        if state == "applied":
            assert verdict.signal == "bug present inside the validated range: fix needed and applies", verdict
        if state == "out-of-range":
            assert verdict.in_range is False
        if state == "not-installed":
            assert verdict.signal.startswith("not checked:"), verdict
    assert "| fix | bug present | applies cleanly |" in done.stdout
