"""torchfix contract for fp8-recompute (needs TransformerEngine importable: the TE test env)."""

from __future__ import annotations

from _fp8_helpers import TE_INSTALLED, requires_te, te_has_upstream_fix
from torchfix_core.testing import FixContract

pytestmark = requires_te

DIST = "transformer_engine.pytorch.distributed"
EXPECTED = ("not-needed" if te_has_upstream_fix() else "applied") if TE_INSTALLED else "applied"


class TestContract(FixContract):
    fix_id = "fp8-recompute"
    # The wrapped context-manager method, and the getter's code object (swapped in place, so the
    # function object every ``from ..distributed import`` holds stays the same).
    patched = [
        (DIST, "activation_recompute_forward.__enter__"),
        (DIST, "is_fp8_activation_recompute_enabled.__code__"),
    ]
    expected_state = EXPECTED
