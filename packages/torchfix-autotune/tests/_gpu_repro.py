"""End-to-end GPU reproduction (run as a script by test_gpu.py; needs CUDA + Triton).

A compiled block (mm + pointwise + softmax reduction, so Triton kernels with several configs and
coordinate-descent tuning) is warmed outside SAC, run under selective activation checkpointing,
then a guarded global flips and Inductor's in-memory caches are cleared before backward: recompute
misses the guard, recompiles, and launches freshly built (cold) Triton kernels, whose autotuning
runs inside SAC's replay mode. Both branches compute the same math, so the gradients must match a
non-checkpointed eager reference.

The environment the test sets (process-wide, because on CUDA recompute runs on the autograd worker
thread, which does not see main-thread config overrides on torch >= 2.12):
TORCHINDUCTOR_COORDINATE_DESCENT_TUNING=1, TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 (no on-disk
autotune cache hit), TORCHINDUCTOR_CACHE_DIR=<fresh tmp dir>. Prints one JSON line.

``--device cpu`` runs the same flow on CPU Inductor (no Triton, so no autotuning): a self-check of
the recompile-in-recompute plumbing and the gradient comparison, not a reproduction.
"""

from __future__ import annotations

import functools
import json
import sys
from typing import Any

import torch
import torch._inductor.runtime.triton_heuristics  # noqa: F401 - the fix's trigger
from _autotune_helpers import backward_outcome
from torch._dynamo.utils import counters
from torch.utils.checkpoint import checkpoint, create_selective_checkpoint_contexts

FLAG = {"recompute_branch": False}
DEVICE = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "cuda"


def math(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = torch.mm(x, w)
    return h.sin().cos() * torch.softmax(h, dim=-1)


@torch.compile
def block(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    if FLAG["recompute_branch"]:  # same math; only the guard differs
        return math(x, w)
    return math(x, w)


def fix_state() -> str:
    try:
        import torchfix_core
    except ImportError:
        return "torchfix-core not installed"
    return next((r.state for r in torchfix_core.status() if r.id == "autotune"), "absent")


def synchronize() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def main() -> dict[str, Any]:
    torch.manual_seed(0)
    x = torch.randn(1024, 512, device=DEVICE, requires_grad=True)
    w = (torch.randn(512, 512, device=DEVICE) / 16).requires_grad_()
    ref_x, ref_w = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    math(ref_x, ref_w).sum().backward()

    block(x, w)  # compiled and tuned outside SAC
    synchronize()
    sac = functools.partial(create_selective_checkpoint_contexts, [torch.ops.aten.mm.default])
    out = checkpoint(block, x, w, use_reentrant=False, context_fn=sac)
    FLAG["recompute_branch"] = True  # recompute misses the guard and recompiles
    from torch._inductor.utils import clear_caches

    clear_caches()  # ... and the identical kernel source is loaded fresh: its autotuner is cold

    stats: Any = None
    try:
        from torchfix_autotune.patch import STATS, reset_stats

        reset_stats()
        stats = STATS
    except ImportError:
        pass
    coordesc_before = counters["inductor"]["coordesc_tuning_bench"]
    frames_before = counters["frames"]["ok"]
    result: dict[str, Any] = {"torch": torch.__version__, "device": DEVICE, "fix_state": fix_state()}

    def backward() -> None:
        out.sum().backward()
        synchronize()

    result.update(backward_outcome(backward, (x, w), (ref_x, ref_w), rtol=1e-3, atol=1e-4))
    result["frames_compiled_during_backward"] = counters["frames"]["ok"] - frames_before
    result["coordesc_bench_during_backward"] = counters["inductor"]["coordesc_tuning_bench"] - coordesc_before
    try:
        from torchfix_core.testing import report_of

        result["report"] = report_of("autotune")
    except ImportError:
        pass
    if stats is not None:
        result["calls_during_backward"] = dict(stats["calls"])
        result["filtered_during_backward"] = dict(stats["filtered"])
        result["hidden_during_backward"] = dict(stats["hidden"])
    return result


if __name__ == "__main__":
    print(json.dumps(main()))
