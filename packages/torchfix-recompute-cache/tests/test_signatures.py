"""Signatures and report counts of recompute-cache and budget-rng, from real runs.

recompute-cache: the error of its red reproduction (``reproduction.py``'s ``two_checkpointed_blocks``,
pytorch#166926's shape, fix disabled, on the real unpatched torch) is fed with its traceback to
``torchfix-doctor explain``, which must name the fix as ``not-installed`` where only the core and the family catalog
are importable and as ``disabled`` with the fix turned off; the same message without the compiled
code's backward frames (as an eager checkpoint whose recompute saves other tensors prints it) is not
claimed. Its green run counts ``lru-turned-off`` once; a disabled run and a process that never
checkpoints count nothing.

budget-rng is silent (wrong gradients, no error): its signature is a symptom, and the report is the
proof: the green suite (``reproduction_budget_rng.py``'s ``suite``) counts ``saved-random-outputs`` for the
partitions at budgets 0.5 and 0 only, not at budget 1 nor for a user checkpoint region (nothing to
fix there); a disabled run shows the wrong mask and counts nothing.

Every run is a fresh interpreter; each red/green run happens once per module (module-scoped fixtures).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from torchfix_core.testing import (
    assert_explained_both_ways,
    assert_silent_signatures,
    explain_json,
    failure_text,
    only_fix,
    outside_validated_range,
    run_json_script,
)
from torchfix_core.testing.fixtures import with_and_without_fix

#: the scenarios, shipped in the wheel with the declared reproductions (``python -m`` them)
RECOMPUTE_SCENARIOS = "torchfix_recompute_cache.reproduction"
BUDGET_SCENARIOS = "torchfix_recompute_cache.reproduction_budget_rng"
RECOMPUTE = "recompute-cache"
BUDGET = "budget-rng"
RECOMPUTE_IN_RANGE = outside_validated_range(RECOMPUTE) is None
BUDGET_IN_RANGE = outside_validated_range(BUDGET) is None

recompute_range = pytest.mark.skipif(not RECOMPUTE_IN_RANGE, reason=f"torch outside {RECOMPUTE}'s validated range")
budget_range = pytest.mark.skipif(not BUDGET_IN_RANGE, reason=f"torch outside {BUDGET}'s validated range")


def recompute_run(scenario: str, fix: bool) -> dict[str, Any]:
    return run_json_script(
        ["-m", RECOMPUTE_SCENARIOS, scenario, "aot_eager"], env=only_fix(RECOMPUTE, fix), timeout=900
    )


def budget_run(args: list[str], fix: bool, cache: Path) -> dict[str, Any]:
    environ = {**only_fix(BUDGET, fix), "TORCHINDUCTOR_CACHE_DIR": str(cache)}
    result = run_json_script(["-m", BUDGET_SCENARIOS, *args], env=environ, timeout=900)
    assert result["ok"], f"{result.get('error_type')}: {result.get('error')}"
    return result


# -- recompute-cache ---------------------------------------------------------------------------------------


def _recompute_checked(fix: bool) -> dict[str, Any]:
    """``two_checkpointed_blocks`` with the fix on (must pass, gradients matching) or off (must fail
    with the CheckpointError of the bug); a skip outside the fix's validated range."""
    if not RECOMPUTE_IN_RANGE:
        pytest.skip(f"torch outside {RECOMPUTE}'s validated range")
    r = recompute_run("two_checkpointed_blocks", fix)
    if fix:
        assert r["ok"] is True and r["grads_match"] is True, r
    else:
        assert r["ok"] is False and r["error_type"] == "torch.utils.checkpoint.CheckpointError", (
            f"the bug did not reproduce on torch {r['torch']}: {r}"
        )
    return r


#: ``recompute_green`` / ``recompute_red``: the checked runs, once a module each
recompute_green, recompute_red = with_and_without_fix(_recompute_checked)


def test_recompute_cache_red_run_is_explained_not_installed_and_disabled(recompute_red: dict[str, Any]) -> None:
    match = assert_explained_both_ways(failure_text(recompute_red), RECOMPUTE)
    assert "torch.compile" in match["signature"]["when"], match


def test_recompute_cache_message_without_compiled_frames_is_not_claimed(recompute_red: dict[str, Any]) -> None:
    """The same message without the traceback (as an eager checkpoint that saves other tensors in its
    recompute prints it, minus the AOTAutograd backward frames): explain claims nothing."""
    bare = failure_text({"error_type": recompute_red["error_type"], "error": recompute_red["error"]})
    report = explain_json(bare, isolated=True)
    assert RECOMPUTE not in {m["id"] for m in report["matches"]}, report


def test_recompute_cache_green_run_counts_lru_turned_off(recompute_green: dict[str, Any]) -> None:
    report = recompute_green["report"]
    assert report["state"] == "applied" and report["acted"] > 0, report
    assert report["events"] == {"lru-turned-off": 1}, report  # once per process


def test_recompute_cache_disabled_run_counts_nothing(recompute_red: dict[str, Any]) -> None:
    report = recompute_red["report"]
    assert report["state"] == "disabled" and report["acted"] == 0, report


@recompute_range
def test_recompute_cache_process_without_checkpoint_counts_nothing() -> None:
    """Applied, compiled code, no checkpoint: the fix leaves LRU on and counts nothing."""
    r = recompute_run("no_checkpoint", True)
    assert r["reorders"] is True, r
    assert r["report"]["state"] == "applied" and r["report"]["acted"] == 0, r["report"]


# -- budget-rng (silent) -----------------------------------------------------------------------------------


def test_budget_rng_signature_is_a_symptom() -> None:
    assert_silent_signatures(BUDGET)


@pytest.fixture(scope="module")
def budget_green(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    if not BUDGET_IN_RANGE:
        pytest.skip(f"torch outside {BUDGET}'s validated range")
    return budget_run(["suite", "aot_eager"], True, tmp_path_factory.mktemp("cache"))


@pytest.mark.parametrize("budget", ["0.5", "0.0"])
def test_budget_rng_green_run_counts_saved_random_outputs(budget_green: dict[str, Any], budget: str) -> None:
    scenario = budget_green[f"dropout@{budget}"]
    assert scenario["mismatch"] == 0.0, scenario  # the fix did act: the forward's mask
    assert scenario["acted"] > 0, scenario
    report = budget_green["report"]
    assert report["state"] == "applied" and report["events"]["saved-random-outputs"] > 0, report


@pytest.mark.parametrize("scenario", ["dropout@1.0", "checkpoint_region@0.5"])
def test_budget_rng_counts_nothing_where_not_needed(budget_green: dict[str, Any], scenario: str) -> None:
    """Budget 1 and a user checkpoint region: right without the fix; applied, it leaves them alone."""
    assert budget_green[scenario]["acted"] == 0, budget_green[scenario]


@budget_range
def test_budget_rng_disabled_run_shows_the_symptom_and_counts_nothing(tmp_path: Path) -> None:
    r = budget_run(["dropout", "0.5", "aot_eager"], False, tmp_path)
    assert r["mismatch"] > 0.3 and r["max_abs_diff"] > 1.0, f"the bug did not reproduce: {r}"
    assert r["report"]["state"] == "disabled" and r["report"]["acted"] == 0, r["report"]
