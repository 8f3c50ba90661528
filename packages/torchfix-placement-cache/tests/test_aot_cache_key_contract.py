"""torchfix-core's contract (ordering, idempotency, revert, env switches) for aot-autocast-key and
aot-hop-body-key."""

from __future__ import annotations

from _aot_cache_key_util import AUTOCAST, HOP_BODY, autocast_bug_present, hop_bug_present
from torchfix_core.testing import FixContract, applied_where


class TestAotAutocastKeyContract(FixContract):
    fix_id = AUTOCAST
    # AOTAutogradCacheDetails.__init__, wrapped to record the autocast state after torch's own init
    patched = [("torch._functorch._aot_autograd.autograd_cache", "AOTAutogradCacheDetails.__init__")]

    # applied where torch's key ignores the autocast dtype (2.8-2.12), not-needed on 2.13+
    expected_state = applied_where(autocast_bug_present)


class TestAotHopBodyKeyContract(FixContract):
    fix_id = HOP_BODY
    # the module function autograd_cache_key calls, wrapped to check nested graph bodies too
    patched = [("torch._functorch._aot_autograd.autograd_cache", "check_cacheable")]

    # applied where check_cacheable checks the root graph only (2.11-2.15; 2.10 is out of range,
    # where the contract expects out-of-range at import torch and this from a forced probe)
    expected_state = applied_where(hop_bug_present)
