"""torchfix-core's contract (import orders, idempotency, revert, env switches) for both fixes."""

from __future__ import annotations

from _util import CAST, MODULE, UNSHARD, carries_upstream_fix
from torchfix_core.testing import FixContract


class TestCastContract(FixContract):
    fix_id = CAST
    # what the release's Dynamo-disable decorator calls (its closure cell) and says it wraps
    patched = [(MODULE, "FSDPState._pre_forward.__wrapped__"), (MODULE, "FSDPState._post_forward.__wrapped__")]
    expected_state = "not-needed" if carries_upstream_fix(CAST) else "applied"


class TestUnshardContract(FixContract):
    fix_id = UNSHARD
    patched = [(MODULE, "FSDPState._pre_forward.__wrapped__.__code__")]
    expected_state = "not-needed" if carries_upstream_fix(UNSHARD) else "applied"
