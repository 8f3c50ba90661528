"""torchfix-core's contract (import orders, idempotency, revert, env switches) for mix-order-view-write."""

from __future__ import annotations

import pytest
from _util import CACHE, FIX, SIMD, bug_codegen, forced_state, refused_layout
from torchfix_core.testing import FixContract, applied_where


class TestContract(FixContract):
    fix_id = FIX
    # the code object of the method that writes the final-reduce lines, and the FX graph key's details
    # (torchfix-core's key term, held for the fix while it is applied: effect compiled)
    patched = [
        (SIMD, "SIMDScheduling._codegen_mix_order_reduction.__code__"),
        (CACHE, "FxGraphHashDetails.__init__"),
    ]
    expected_state = applied_where(bug_codegen)

    def test_contract_forced_out_of_range(self) -> None:
        """Forced onto a torch whose layout it refuses (2.10.0), the fix is ``failed`` with the reason and
        patches nothing; elsewhere the kit's case (the probe decides ``expected_state``)."""
        if not refused_layout():
            super().test_contract_forced_out_of_range()  # type: ignore[misc]
            return
        r = forced_state()
        assert r["state"] == "failed", r
        assert "PatchRefused" in r["reason"] or "refus" in r["reason"].lower(), r


def test_refused_layout_is_only_out_of_range() -> None:
    """A layout the fix refuses is outside its validated range (the range says where it was validated)."""
    from torchfix_core.testing import outside_validated_range

    if refused_layout():
        assert outside_validated_range(FIX), "the fix refuses this torch's layout inside its range"
    else:
        pytest.skip("this torch's layout is the one the fix patches, or has no bug")
