"""Signatures and report counts of fsdp-recompute-cast and fsdp-recompute-unshard, from real runs.

Each fix's red reproduction (``reproduction.py``'s ``cast`` / ``unshard``, one spawned gloo rank, the fix
disabled, on the real unpatched torch) raises its error; that error, as the scenario captured it, is
fed to ``torchfix-doctor explain`` with its traceback, which must name the fix as ``not-installed``
where only the core and the family catalog are importable and as ``disabled`` with the fix turned off; the same message
without the checkpoint recompute frames (an ordinary mismatch) is not claimed. The disabled run
counts nothing.
The same scenario with the fix on counts the recompute casts / unshards where the bug exists
(``applied``), and nothing where torch carries upstream's fix (``not-needed``).

Each red and green run happens once per module (module-scoped fixtures): they are the expensive
runs of this package.
"""

from __future__ import annotations

from typing import Any

import pytest
from _util import CAST, REPRODUCTIONS, UNSHARD, UPSTREAM_PR, alone, assert_fails, carries_upstream_fix, run
from torchfix_core.testing import assert_explained_both_ways, explain_json, failure_text, state_to_expect

FIXES = (CAST, UNSHARD)


def _needs_bug(fix_id: str) -> None:
    if carries_upstream_fix(fix_id):
        pytest.skip(f"torch carries upstream PR {UPSTREAM_PR[fix_id]}: no red run of {fix_id} here")


@pytest.fixture(scope="module")
def red() -> dict[str, dict[str, Any]]:
    """fix id -> its red run (only for the fixes whose bug this torch has)."""
    runs = {}
    for fix_id in FIXES:
        if not carries_upstream_fix(fix_id):
            r = run(REPRODUCTIONS[fix_id].scenario, 1, alone(fix_id, False))
            assert_fails(r, REPRODUCTIONS[fix_id].error)
            runs[fix_id] = r
    return runs


@pytest.fixture(scope="module")
def green() -> dict[str, dict[str, Any]]:
    """fix id -> its scenario with the fix on (green where the bug exists, torch's own code elsewhere)."""
    runs = {}
    for fix_id in FIXES:
        r = run(REPRODUCTIONS[fix_id].scenario, 1, alone(fix_id, True))
        assert r["ok"] is True and r["grads_equal"] is True, r
        runs[fix_id] = r
    return runs


@pytest.mark.parametrize("fix_id", FIXES)
def test_red_run_is_explained_not_installed_and_disabled(red: dict[str, dict[str, Any]], fix_id: str) -> None:
    _needs_bug(fix_id)
    text = failure_text(red[fix_id])
    print(text)  # the real red output (pytest -s shows it)
    match = assert_explained_both_ways(text, fix_id, off=alone(fix_id, False))
    assert "recompute" in match["signature"]["when"], match


@pytest.mark.parametrize("fix_id", FIXES)
def test_red_message_without_its_recompute_frames_is_not_claimed(red: dict[str, dict[str, Any]], fix_id: str) -> None:
    """The same message without the traceback (what an ordinary mismatch in user code prints, minus
    the checkpoint recompute frames): the signature's context is not there, so explain claims nothing."""
    _needs_bug(fix_id)
    bare = failure_text({"error_type": red[fix_id]["error_type"], "error": red[fix_id]["error"]})
    report = explain_json(bare, isolated=True)
    assert fix_id not in {m["id"] for m in report["matches"]}, report


@pytest.mark.parametrize("fix_id", FIXES)
def test_disabled_run_counts_nothing(red: dict[str, dict[str, Any]], fix_id: str) -> None:
    _needs_bug(fix_id)
    report = red[fix_id]["report"][fix_id]
    assert report["state"] == "disabled" and report["acted"] == 0, report


def test_cast_green_run_counts_input_casts(green: dict[str, dict[str, Any]]) -> None:
    _needs_bug(CAST)
    report = green[CAST]["report"][CAST]
    assert report["state"] == "applied" and report["acted"] > 0, report
    # 2 blocks x 3 steps recomputed; no output_dtype in this policy: no output cast
    assert report["events"] == {"cast-inputs-in-recompute": 6, "cast-output-in-recompute": 0}, report


def test_unshard_green_run_counts_unshards(green: dict[str, dict[str, Any]]) -> None:
    _needs_bug(UNSHARD)
    report = green[UNSHARD]["report"][UNSHARD]
    assert report["state"] == "applied" and report["acted"] > 0, report
    # one resharded recompute (the first forward's) per step
    assert report["events"] == {"unshard-in-recompute": 3}, report


@pytest.mark.parametrize("fix_id", FIXES)
def test_not_needed_counts_nothing(green: dict[str, dict[str, Any]], fix_id: str) -> None:
    if not carries_upstream_fix(fix_id):
        pytest.skip(f"torch lacks upstream PR {UPSTREAM_PR[fix_id]}: the fix is needed here")
    report = green[fix_id]["report"][fix_id]
    # not-needed inside the validated range, out-of-range past it (the range check answers first)
    assert report["state"] == state_to_expect(fix_id, bug_present=False) and report["acted"] == 0, report


def test_the_compiled_layer_signature_quotes_every_mixed_dtype_message() -> None:
    """``MIXED_DTYPE_ANY`` (written out in package.py, which holds declarations only) is the
    alternation of ``MIXED_DTYPE_MESSAGES``: Dynamo's wrapper is matched for each real-model wording."""
    from torchfix_fsdp_recompute import package

    assert package.MIXED_DTYPE_ANY == "(?:" + "|".join(package.MIXED_DTYPE_MESSAGES) + ")"
