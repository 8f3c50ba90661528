"""torchfix-core's contract (apply/revert/idempotency/env switches), each case in a fresh process."""

from __future__ import annotations

from _autotune_helpers import sac_replay_is_strict
from torchfix_core.testing import FixContract, applied_where

_MODULE = "torch._inductor.runtime.triton_heuristics"
_WRAPPED = ("bench", "autotune_to_one_config", "coordinate_descent_tuning")  # CachingAutotuner's


class TestContract(FixContract):
    fix_id = "autotune"
    patched = [(_MODULE, f"CachingAutotuner.{name}") for name in _WRAPPED]
    # Decided by the live probe: applied where SAC replays strictly (2.13+), not-needed before.
    expected_state = applied_where(sac_replay_is_strict)
