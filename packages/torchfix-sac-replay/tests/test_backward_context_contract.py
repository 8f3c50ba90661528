"""torchfix-core's contract (import orders, idempotency, revert, env switches) for backward-context."""

from __future__ import annotations

import torch
import torch._dynamo  # noqa: F401 - loads runtime_wrappers (it cannot be imported on its own)
from torch._functorch._aot_autograd import runtime_wrappers
from torchfix_core.testing import FixContract

RUNTIME_WRAPPERS = "torch._functorch._aot_autograd.runtime_wrappers"
#: The releases where the reproduction (test_backward_context_repro.py) fails without the fix.
BUG_PRESENT = torch.__version__.startswith(("2.12.", "2.13."))


def _patched() -> list[tuple[str, str]]:
    # 2.13+: the wrapper generator; 2.12: the factory that defines CompiledFunction.backward inline
    # (absent on 2.11, where nothing is patched and the contract checks that it stays absent).
    if hasattr(runtime_wrappers, "_codegen_compiled_backward"):
        return [(RUNTIME_WRAPPERS, "_codegen_compiled_backward.__code__")]
    return [(RUNTIME_WRAPPERS, "_AOTDispatchAutogradFunctionFactory.build.__code__")]


class TestBackwardContextContract(FixContract):
    fix_id = "backward-context"
    patched = _patched()
    # what the probe decides (out of range, on 2.10, the kit expects out-of-range by itself and checks
    # this value under TORCHFIX_FORCE)
    expected_state = "applied" if BUG_PRESENT else "not-needed"
