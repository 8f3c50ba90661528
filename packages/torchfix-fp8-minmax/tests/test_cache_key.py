"""fp8-minmax-store and the compile caches, across processes on the CPU (a C++ compiler, no GPU).

A kernel compiled before the fix keeps its ``PropagateNan`` min/max in the FX graph cache entry
(the entry holds the generated Python module, Triton source included). The fix's effect is
``compiled``, so torchfix-core keys the FX graph and AOTAutograd caches on it while it is applied.
Each order of the kit's ``WARM_CACHE_ORDERS`` shares one fresh ``TORCHINDUCTOR_CACHE_DIR`` between
fresh processes compiling ``(x * 3).clamp(-1, 1)`` (``cache`` in ``_scenarios.py``): fix off then
on without its key term (the red: the entry compiled without the fix is served), fix off then on
(a miss, then a hit for a third process: the term is stable), fix on then off (a miss). The graph
is a CPU one, so its kernel is C++: the key, not the kernel, is what this shows; ``test_gpu.py``
shows the same order with Triton kernels.
"""

from __future__ import annotations

from typing import Any

from _util import FIX, assert_ok, run
from torchfix_core.testing import WarmCacheContract


class TestWarmCache(WarmCacheContract):
    fix_id = FIX
    runner = staticmethod(run)

    def check(self, result: dict[str, Any]) -> None:
        assert_ok(result)
        assert result["equal"] is True, result
