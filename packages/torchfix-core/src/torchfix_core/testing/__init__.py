"""Test kit shared by every fix package.

Subclass :class:`FixContract` in a fix's tests (name the subclass ``Test...``) to prove the same
lifecycle guarantees for every fix, each case in a fresh Python subprocess::

    class TestContract(FixContract):
        fix_id = "autotune"
        patched = [("torch._inductor.runtime.triton_heuristics", "CachingAutotuner.bench")]
        expected_state = "applied"        # or a property deciding from the live probe
"""

from torchfix_core.testing._contract import CASES, FixContract, outside_validated_range, run_case, state_to_expect

__all__ = ["CASES", "FixContract", "outside_validated_range", "run_case", "state_to_expect"]
