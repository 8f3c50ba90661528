"""inductor-rand4x-dropout and the compile caches, across processes on the CPU (a C++ compiler, no GPU).

A kernel compiled before the fix keeps its ``rand4x`` draw in the FX graph cache entry (the entry
holds the generated Python module, Triton source included), and torch 2.13 / 2.14 hash no setting of
the 4x path. The fix's effect is ``compiled``, so torchfix-core keys the FX graph and AOTAutograd
caches on it while it is applied. Each order of the kit's ``WARM_CACHE_ORDERS`` shares one fresh
``TORCHINDUCTOR_CACHE_DIR`` between fresh processes compiling ``(x * 3).clamp(-1, 1)`` (``cache`` in
``_scenarios.py``): fix off then on without its key term (the red: the entry compiled without the fix
is served), fix off then on (a miss, then a hit for a third process: the term is stable), fix on then
off (a miss). The graph is a CPU one, so its kernel is C++: the key, not the kernel, is what this
shows; ``test_gpu.py`` shows the same orders with the dropout's Triton kernels. A last test shows
that opting in (``TORCHINDUCTOR_USE_RAND4X=1``) changes the key too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from _util import FIX, OPT_IN, assert_ok, run
from torchfix_core.testing import WarmCacheContract


class TestWarmCache(WarmCacheContract):
    fix_id = FIX
    runner = staticmethod(run)

    def check(self, result: dict[str, Any]) -> None:
        assert_ok(result)
        assert result["equal"] is True, result

    def test_opting_in_changes_the_key(self, tmp_path: Path, bug_present: bool) -> None:
        """An entry compiled with the fix (``tl.rand``) is not served to a process that opted into the 4x
        path with upstream's switch, which compiles its own (``rand4x``) kernels."""
        if not bug_present:
            pytest.skip("the fix does not act on this torch: no key term")
        on = self.run_step(tmp_path, fix=True)
        opted_in = self.run_step(tmp_path, fix=True, env={OPT_IN: "1"})
        assert self.cold(on), on["cache"]
        assert opted_in["state"] == "applied" and self.cold(opted_in), opted_in
