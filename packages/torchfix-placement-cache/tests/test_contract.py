"""torchfix-core's contract (ordering, idempotency, revert, env switches) for placement-cache."""

from __future__ import annotations

from _placement_cache_util import bug_present
from torchfix_core.testing import FixContract, applied_where


class TestContract(FixContract):
    fix_id = "placement-cache"
    patched = [("torch.distributed.tensor._api", "DTensor._stable_hash_for_caching")]
    # what the probe decides: applied where torch's DTensor key ignores the local shape (2.12-2.15),
    # not-needed on 2.11 and (forced) on 2.10, where the fix is out-of-range at import (the kit
    # expects that there and skips the cases that apply through the range check)
    expected_state = applied_where(bug_present)
