"""Demo section of torchfix-fsdp-offload for ``nox -s demo``: the race on a GPU, its recorded figures on a CPU.

    python packages/torchfix-fsdp-offload/demo.py

The bug (pytorch PR #180666) needs CUDA streams and pinned memory. With a CUDA GPU this runs the
fix's declared reproduction (``torchfix_fsdp_offload.reproduction``, shipped in the wheel: what
``torchfix-doctor verify`` runs; FSDP2, ``CPUOffloadPolicy(pin_memory=True)``, a post-accumulate-grad
hook on every parameter, 8 x ``Linear(4096, 4096)``, 3 steps) without and with ``fsdp-offload-hook``,
each in a fresh interpreter; without one it prints the figures recorded on an H200
(``docs/results/gpu/fsdp-offload-hook-tests-torch-2.11.0.log``) and runs the CPU check of the
mechanism (``tests/_scenarios.py flip``, one gloo rank: what the hooks see of ``pin_memory``), about
10 s per line on a loaded 2-core VM. Where torch carries upstream's fix (2.13+) the fix stays
out (``out-of-range``; its probe says ``not-needed``) and the hooks see torch's own blocking copy.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any, Mapping

from torchfix_core.testing import DemoCheck, only_fix, print_gpu_fix_demo, reproduce, run_json_script_timed
from torchfix_core.testing._scenario import ScenarioFailed

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "tests" / "_scenarios.py"
FIX = "fsdp-offload-hook"
TITLE = "torchfix-fsdp-offload: FSDP2 CPUOffloadPolicy(pin_memory=True) + post-accumulate-grad hooks"
LOG = HERE.parent.parent / "docs" / "results" / "gpu" / "fsdp-offload-hook-tests-torch-2.11.0.log"


def _run(scenario: str, fix: bool) -> dict[str, Any]:
    return run_json_script_timed([SCENARIOS, scenario], env=only_fix(FIX, fix), timeout=600)


def _reproduce(fix: bool) -> dict[str, Any]:
    """The declared reproduction, the fix alone on or off; a reproduction that broke is a result
    (``ok`` false, ``error``), not an exception."""
    try:
        return {"ok": True, **reproduce(FIX, fix)}
    except (ScenarioFailed, subprocess.TimeoutExpired) as exc:
        return {"ok": False, "error_type": "reproduction broke", "error": str(exc)}


def gpu_figures(r: Mapping[str, Any]) -> str:
    import torch  # imported already (print_gpu_fix_demo asked it for a GPU)

    outcome = r["outcome"]
    return (
        f"torch {torch.__version__}, fix {r['state']}, {r['seconds']:.0f} s: {outcome['result'].upper()}: "
        f"{outcome['measure'] or outcome['detail']}"
    )


def recorded_line(label: str, r: dict[str, Any]) -> str:
    stale = ", ".join(str(t["stale"]) for t in r["trials"])
    diff = max(t["max_abs_diff"] for t in r["trials"])
    return (
        f"{label:<8} stale hook gradients per step {stale} (of {r['params']}), max abs diff {diff:.3g}; "
        f"report acted {r['report']['acted']}"
    )


def cpu_figures(r: Mapping[str, Any]) -> str:
    seen = "; ".join(f"{h['param']} {'unpinned' if not h['pin'][h['param']] else 'pinned'}" for h in r["hooks"][:2])
    return f"torch {r['torch']}, fix {r['state']}, {r['seconds']:.1f} s: inside the hooks {seen}"


GPU_CHECK = DemoCheck(
    "a hook on every parameter clones the CPU gradient it is handed; compared with the final one:",
    _reproduce,
    gpu_figures,
)
CPU_CHECK = DemoCheck(
    "CPU check of the mechanism (gloo, 1 rank): the flag foreach_reduce reads while the hooks run",
    lambda fix: _run("flip", fix),
    cpu_figures,
)


def main() -> None:
    print_gpu_fix_demo(TITLE, gpu=GPU_CHECK, recorded=(LOG, recorded_line), cpu=CPU_CHECK)


if __name__ == "__main__":
    main()
