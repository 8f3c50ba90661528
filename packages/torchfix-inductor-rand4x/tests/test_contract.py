"""torchfix-core's contract (import orders, idempotency, revert, env switches) for inductor-rand4x-dropout."""

from __future__ import annotations

from _util import CACHE, CODEGEN, FIX, bug_codegen
from torchfix_core.testing import FixContract, applied_where


class TestContract(FixContract):
    fix_id = FIX
    # the one gate of Inductor's 4x random path, and the FX graph key's details (torchfix-core's key
    # term, held for the fix while it is applied: effect compiled)
    patched = [
        (CODEGEN, "TritonOverrides._can_use_4x_random"),
        (CACHE, "FxGraphHashDetails.__init__"),
    ]
    expected_state = applied_where(bug_codegen)
