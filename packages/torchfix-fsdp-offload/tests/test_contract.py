"""torchfix-core's contract (import orders, idempotency, revert, env switches) for fsdp-offload-hook."""

from __future__ import annotations

from _util import FIX, MODULE, upstream_fixed
from torchfix_core.testing import FixContract


class TestContract(FixContract):
    fix_id = FIX
    # the module global FSDPParamGroup.post_backward calls (torch's no_grad-decorated function)
    patched = [(MODULE, "foreach_reduce")]
    expected_state = "not-needed" if upstream_fixed() else "applied"
