"""torchfix-core's contract for aot-fallback: patches ``aot_compile_fullgraph`` and ``AOTCompiledFunction.__call__``."""

from __future__ import annotations

import pytest
from _helpers import IN_RANGE
from torchfix_core.testing import FixContract

pytestmark = pytest.mark.skipif(not IN_RANGE, reason="torch outside the validated range: the fix is out-of-range there")
_AOT = "torch._dynamo.aot_compile"


class TestContract(FixContract):
    fix_id = "aot-fallback"
    patched = [(_AOT, "aot_compile_fullgraph"), (_AOT, "AOTCompiledFunction.__call__")]
    expected_state = "applied"
