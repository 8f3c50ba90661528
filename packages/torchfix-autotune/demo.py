"""Demo section of torchfix-autotune (``python packages/torchfix-autotune/demo.py``, CPU, < 60 s;
with a GPU about 90 s more).

The bug itself needs Triton autotuning on a GPU. With a CUDA GPU this first runs the fix's declared
reproduction (``torchfix_autotune.reproduction``, shipped in the wheel: what ``torchfix-doctor
verify`` runs) without and with the fix, each in a fresh interpreter (about 45 s each); on CPU it
says why it cannot run. Then, on any machine:
1. the probe's decision on this torch (what ``torchfix-doctor`` prints);
2. the mode filter on the real dispatch mode stack (SAC's replay mode hidden, others kept, stack
   restored);
3. the CPU emulation (tests/_emulation.py), each in a fresh process: a compiled callable that
   allocates on its first call, first called during SAC recompute: without the filter it fails on
   strict-replay torch, through the fix's wrapper it passes. It exercises the filter, not
   ``CachingAutotuner`` (the declared reproduction is the real thing).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from torchfix_core.testing import reproduce, run_json_script_timed
from torchfix_core.testing._scenario import ScenarioFailed

HERE = Path(__file__).resolve().parent


def emulate(mode: str, env_extra: dict[str, str]) -> dict[str, Any]:
    """``tests/_emulation.py MODE`` in a fresh interpreter; a crash is reported, not raised."""
    return run_json_script_timed([HERE / "tests" / "_emulation.py", mode], env=env_extra, timeout=300)


def show_reproduction(enabled: bool) -> None:
    """Run the declared reproduction, the fix alone on or off; print one line."""
    label = "with the fix:" if enabled else "without the fix:"
    try:
        r = reproduce("autotune", enabled)
    except (ScenarioFailed, subprocess.TimeoutExpired) as exc:
        print(f"  {label:<17} the reproduction broke: {str(exc).splitlines()[0][:200]}")
        return
    outcome = r["outcome"]
    what = outcome["measure"] or outcome["detail"]
    print(f"  {label:<17} fix {r['state']}, {r['seconds']:.0f} s: {outcome['result'].upper()}: {what}")


def main() -> None:
    import torch
    import torch._inductor.runtime.triton_heuristics as th  # the trigger: the fix is applied (or not) here
    import torchfix_core
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.checkpoint import create_selective_checkpoint_contexts
    from torchfix_autotune.modes import current_stack, without_compile_internal_modes
    from torchfix_core.patching import is_torchfix_wrapper

    print(f"== torchfix-autotune (torch {torch.__version__})")
    print("declared reproduction: a cold Triton kernel autotuned during a selective-checkpoint recompute")
    if torch.cuda.is_available():
        show_reproduction(False)
        show_reproduction(True)
    else:
        print("  no CUDA GPU here: it cannot run (`torchfix-doctor verify autotune` skips it)")
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
