"""Demo section of torchfix-autotune (``python packages/torchfix-autotune/demo.py``, CPU, < 60 s).

The bug itself needs Triton autotuning on a GPU, so on CPU this shows:
1. the probe's decision on this torch (what ``torchfix-doctor`` prints);
2. the mode filter on the real dispatch mode stack (SAC's replay mode hidden, others kept, stack
   restored);
3. the CPU emulation (tests/_emulation.py), each in a fresh process: a compiled callable that
   allocates on its first call, first called during SAC recompute: without the filter it fails on
   strict-replay torch, through the fix's wrapper it passes. It exercises the filter, not
   ``CachingAutotuner`` (see tests/test_gpu.py for the real thing).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torchfix_core.testing import run_json_script_timed

HERE = Path(__file__).resolve().parent


def emulate(mode: str, env_extra: dict[str, str]) -> dict[str, Any]:
    """``tests/_emulation.py MODE`` in a fresh interpreter; a crash is reported, not raised."""
    return run_json_script_timed([HERE / "tests" / "_emulation.py", mode], env=env_extra, timeout=300)


def main() -> None:
    import torch
    import torch._inductor.runtime.triton_heuristics as th  # the trigger: the fix is applied (or not) here
    import torchfix_core
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.checkpoint import create_selective_checkpoint_contexts
    from torchfix_autotune.modes import current_stack, without_compile_internal_modes
    from torchfix_core.patching import is_torchfix_wrapper

    print(f"== torchfix-autotune (torch {torch.__version__})")
    row = next(r for r in torchfix_core.status() if r.id == "autotune")
    print(f"state: {row.state}")
    print(f"why:   {row.reason}")
    wrapped = [
        n
        for n in ("bench", "autotune_to_one_config", "coordinate_descent_tuning")
        if is_torchfix_wrapper(th.CachingAutotuner.__dict__[n])
    ]
    print(f"CachingAutotuner methods wrapped: {wrapped or 'none'}")

    class Logging(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            return func(*args, **(kwargs or {}))

    _, replay = create_selective_checkpoint_contexts([torch.ops.aten.mm.default])

    def names(stack: list[Any]) -> list[str]:
        return [type(m).__name__ for m in stack]

    with Logging(), replay:
        print(f"\nmode stack before:        {names(current_stack())}")
        with without_compile_internal_modes() as hidden:
            print(f"inside the filter:        {names(current_stack())} (hidden: {names(hidden)})")
            torch.empty(4).zero_()  # would raise under strict replay without the filter
        print(f"after (restored exactly): {names(current_stack())}")

    print("\nCPU emulation: first call of a recompiled artifact allocates during SAC recompute")
    before = emulate("plain", {"TORCHFIX_DISABLE": "autotune"})
    after = emulate("filtered", {})
    for label, res in (
        ("without the filter (TORCHFIX_DISABLE=autotune)", before),
        ("through the fix's wrapper", after),
    ):
        if res.get("ok"):
            print(f"  {label}: backward OK, grads match eager: {res.get('grads_match')}, |dx| = {res.get('grad_norm')}")
        else:
            print(f"  {label}: backward FAILED: {res.get('error')}")


if __name__ == "__main__":
    main()
