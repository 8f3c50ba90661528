"""torchfix-core's contract (ordering, idempotency, revert, env switches) for aot-bypass-key."""

from __future__ import annotations

from _aot_bypass_key_util import bug_present
from torchfix_core.testing import FixContract, applied_where


class TestAotBypassKeyContract(FixContract):
    fix_id = "aot-bypass-key"
    # the module global the fallback `str(random.random())` reads (replaced by UuidNonceSource)
    patched = [("torch._functorch._aot_autograd.autograd_cache", "random")]
    # applied where torch's fallback key repeats from one random state (2.10-2.14), not-needed where
    # it is already a uuid4 (2.15)
    expected_state = applied_where(bug_present)
