"""torchfix-core's contract (import orders, idempotency, revert, env switches) for dcp-fqn-orig-mod.
The bug exists on every release of the validated range (torch 2.8-2.15: no upstream fix), so the
probe decides ``applied``."""

from __future__ import annotations

from _util import FIX, MODULE, PLANNER
from torchfix_core.testing import FixContract


class TestContract(FixContract):
    fix_id = FIX
    patched = [
        (MODULE, "_get_fqns"),
        (MODULE, "_load_model_state_dict"),
        (MODULE, "_load_optim_state_dict"),
        (PLANNER, "create_default_local_load_plan"),
    ]
    expected_state = "applied"
