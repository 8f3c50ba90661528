"""torchfix-core's contract (import orders, idempotency, revert, env switches) for budget-rng."""

from __future__ import annotations

import tempfile

from torchfix_core.testing import FixContract, applied_where, run_json_script

SCENARIOS = "torchfix_recompute_cache.reproduction_budget_rng"


def _dropout_recomputed_at_budget() -> bool:
    """The bug, observed with the fix disabled: a compiled dropout at budget 0.5 gets a backward
    whose mask differs from the forward's (the reproduction itself, not the fix's probe)."""
    with tempfile.TemporaryDirectory() as cache:  # no artifact of a run with the fix
        env = {"TORCHFIX_DISABLE": "budget-rng", "TORCHINDUCTOR_CACHE_DIR": cache}
        got = run_json_script(["-m", SCENARIOS, "dropout", "0.5"], env=env, timeout=600)
    return bool(got["mismatch"] > 0.3)


class TestBudgetRngContract(FixContract):
    fix_id = "budget-rng"
    # the module global min_cut_rematerialization_partition calls by name, and the compile caches' key
    # term torchfix-core holds for the fix (effect compiled): applied and reverted with it
    patched = [
        ("torch._functorch.partitioners", "choose_saved_values_set"),
        ("torch._inductor.codecache", "FxGraphHashDetails.__init__"),
    ]
    expected_state = applied_where(_dropout_recomputed_at_budget)
