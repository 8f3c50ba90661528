"""torchfix contract for fp8-recompute-pairing (needs TransformerEngine importable: the TE test env)."""

from __future__ import annotations

import pytest
from _fp8_helpers import TE_INSTALLED, pairing_out_of_range, requires_te, te_has_pairing_fix
from torchfix_core.testing import FixContract

pytestmark = [requires_te]
if TE_INSTALLED and pairing_out_of_range():
    pytestmark.append(pytest.mark.skip(reason=pairing_out_of_range()))

DIST = "transformer_engine.pytorch.distributed"
BASE = "transformer_engine.pytorch.module.base"
EXPECTED = "not-needed" if TE_INSTALLED and not pairing_out_of_range() and te_has_pairing_fix() else "applied"


class TestPairingContract(FixContract):
    fix_id = "fp8-recompute-pairing"
    # Three code objects swapped in place (the function objects, bound by name across TE, stay).
    patched = [
        (BASE, "TransformerEngineBaseModule.prepare_forward.__code__"),
        (DIST, "_CheckpointFunction.forward.__code__"),
        (DIST, "checkpoint.__wrapped__.__code__"),
    ]
    expected_state = EXPECTED
