"""torchfix-core's contract (import orders, idempotency, revert, env switches) for recompute-cache."""

from __future__ import annotations

import pytest
import torch
from torchfix_core.testing import FixContract, applied_where, run_json_script

SCENARIOS = "torchfix_recompute_cache.reproduction"


def _lru_reorders_by_default() -> bool:
    """The bug's precondition, observed with the fix disabled: Dynamo moves a hit entry to the front."""
    got = run_json_script(["-m", SCENARIOS, "no_checkpoint"], env={"TORCHFIX_DISABLE": "recompute-cache"}, timeout=300)
    return bool(got["reorders"])


_HOOK_INIT = ("torch.utils.checkpoint", "_checkpoint_hook.__init__")
_LRU_SWITCH = ("torch", "_C._dynamo.eval_frame._set_lru_cache")


#: torch 2.8/2.9 have no switch (pytorch PR #167038, torch 2.10): forcing the fix there is refused
#: (test_recompute_cache.py::test_forced_without_the_switch_refuses_cleanly), nothing to patch
HAS_SWITCH = hasattr(getattr(torch._C, "_dynamo", None) and torch._C._dynamo.eval_frame, "_set_lru_cache")


class TestContract(FixContract):
    fix_id = "recompute-cache"
    patched = [_HOOK_INIT, _LRU_SWITCH]
    expected_state = applied_where(_lru_reorders_by_default)

    @pytest.mark.skipif(not HAS_SWITCH, reason="torch has no _set_lru_cache: forcing the fix is refused here")
    def test_contract_forced_out_of_range(self) -> None:
        self._run("forced_out_of_range")
