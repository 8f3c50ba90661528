"""torchfix-core's contract (apply/revert/idempotency/env switches), each case in a fresh process."""

from __future__ import annotations

from _autotune_helpers import sac_replay_is_strict
from torchfix_core.testing import FixContract

_MODULE = "torch._inductor.runtime.triton_heuristics"


class TestContract(FixContract):
    fix_id = "autotune"
    patched = [
        (_MODULE, "CachingAutotuner.bench"),
        (_MODULE, "CachingAutotuner.autotune_to_one_config"),
        (_MODULE, "CachingAutotuner.coordinate_descent_tuning"),
    ]
    # Decided by the live probe: applied where SAC replays strictly (2.13+), not-needed before.
    expected_state = "applied" if sac_replay_is_strict() else "not-needed"
