"""CPU emulation of a cold autotune during SAC recompute (run as a script by test_cpu_emulation.py).

CPU Inductor has no Triton autotuning, so a custom backend stands in for the Inductor artifact: its
compiled callable, on its *first* call, does what ``CachingAutotuner`` does on a kernel's first
launch (allocate a buffer and zero it through the dispatcher). The region is warmed outside SAC,
run under SAC, and a guarded global flips before backward, so recompute recompiles and the new
artifact's first call (the emulated autotune) lands in SAC's replay mode.

    python _emulation.py plain      the emulated autotune runs unwrapped (as torch ships it)
    python _emulation.py filtered   it runs through torchfix_autotune.patch.filtered, the same
                                    wrapper factory the fix installs on CachingAutotuner

This exercises the mode filter, not CachingAutotuner itself. Prints one JSON line, with ``report``:
the autotune fix's row of ``torchfix_core.report()`` (``acted``, events of the wrapper).
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any, Callable

import torch
from _autotune_helpers import backward_outcome
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

MODE = sys.argv[1]
FLAG = {"recompute_branch": False}
COLD_CALLS: list[int] = []


def emulated_autotune() -> None:
    """What a cold CachingAutotuner dispatches: an allocation (L2 flush buffer) and a zero_."""
    torch.empty(1 << 16, dtype=torch.int32).zero_()


if MODE == "filtered":
    from torchfix_autotune.patch import filtered

    emulated_autotune = filtered(emulated_autotune)
elif MODE != "plain":
    raise SystemExit(f"unknown mode {MODE!r}")


def backend(gm: torch.fx.GraphModule, example_inputs: Any) -> Callable[..., Any]:
    state = {"cold": True}

    def run(*args: Any) -> Any:
        if state["cold"]:
            state["cold"] = False
            COLD_CALLS.append(torch._C._len_torch_dispatch_stack())
            emulated_autotune()
        return gm.forward(*args)

    return run


def math(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.mm(x, w).sin().cos()


@torch.compile(backend=backend)
def block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    if FLAG["recompute_branch"]:  # same math; only the guard differs
        return math(x, w)
    return math(x, w)


def main() -> dict[str, Any]:
    torch.manual_seed(0)
    x = torch.randn(64, 64, requires_grad=True)
    w = torch.randn(64, 64, requires_grad=True)
    ref_x, ref_w = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    math(ref_x, ref_w).sum().backward()

    block(x, w)  # warm: compiled and "tuned" outside SAC
    sac = functools.partial(create_selective_checkpoint_contexts, [torch.ops.aten.mm.default])
    out = checkpoint(block, x, w, use_reentrant=False, context_fn=sac)
    FLAG["recompute_branch"] = True  # recompute misses the guard -> recompiles -> cold first call
    result: dict[str, Any] = {"mode": MODE, "torch": torch.__version__}
    result.update(
        backward_outcome(out.sum().backward, (x, w), (ref_x, ref_w), rtol=1e-5, atol=1e-5)
    )  # allclose defaults as before
    # How many modes were on the stack at each cold call: the second one ran inside SAC's replay mode.
    result["cold_call_stack_depths"] = COLD_CALLS
    from torchfix_core.testing import report_of

    result["report"] = report_of("autotune")
    return result


if __name__ == "__main__":
    print(json.dumps(main()))
