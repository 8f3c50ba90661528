"""Demo section of torchfix-fp8-minmax for ``nox -s demo``: the miscompile on a GPU, the codegen on a CPU.

    python packages/torchfix-fp8-minmax/demo.py

The bug (triton-lang/triton#11111) is a Triton miscompile on NVIDIA GPUs. With a CUDA GPU this
runs ``tests/_scenarios.py gpu`` (the compiled fp8 cast of float8 training, every launch config
Inductor compiled, bytewise against eager) without and with ``fp8-minmax-store``, each in a fresh
interpreter; without one it prints the figures recorded on an H200
(``docs/results/gpu/fp8-minmax-store-tests-torch-2.14.1.log``) and runs the CPU check of what the
fix changes (``tests/_scenarios.py codegen``: the Triton source Inductor emits for min/max, and
the key term), a few seconds per line. Outside torch 2.14 the fix stays out (``out-of-range``;
2.13 and older emit the ``tl.where`` form on CUDA already).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from torchfix_core.testing import describe_failure, only_fix, print_recorded_gpu_run, run_json_script_timed

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "tests" / "_scenarios.py"
FIX = "fp8-minmax-store"
LOG = HERE.parent.parent / "docs" / "results" / "gpu" / "fp8-minmax-store-tests-torch-2.14.1.log"


def _run(scenario: str, fix: bool, env: dict[str, str] | None = None) -> dict[str, Any]:
    return run_json_script_timed([SCENARIOS, scenario], env={**only_fix(FIX, fix), **(env or {})}, timeout=600)


def gpu_line(label: str, r: dict[str, Any]) -> str:
    if not r["ok"]:
        return f"  {label:<18} {describe_failure(r, 100)}"
    return (
        f"  {label:<18} torch {r['torch']} / Triton {r['triton']}, fix {r['state']}: launch configs writing other "
        f"bytes than eager {r['configs_red']} of {r['configs_run']}; PropagateNan in the kernels: "
        f"{r['propagate_nan_in_code']}"
    )


def recorded_line(label: str, r: dict[str, Any]) -> str:
    return (
        f"{label:<8} configs with other bytes than eager {r['configs_red']} of {r['configs_run']}, PropagateNan in "
        f"the kernels {r['propagate_nan_in_code']}; report acted {r['report']['acted']}"
    )


def cpu_line(label: str, r: dict[str, Any]) -> str:
    if not r["ok"]:
        return f"  {label:<18} {describe_failure(r, 100)}"
    term = "none" if r["fx_key_term"] is None else "the tl.where codegen"
    return f"  {label:<18} torch {r['torch']}, fix {r['state']}: minimum -> {r['minimum']}; key term: {term}"


def main() -> None:
    import torch

    print("== torchfix-fp8-minmax: Inductor's PropagateNan min/max next to transposed fp8 stores (Triton 3.8) ==")
    if torch.cuda.is_available():
        print("  compiled fp8 cast with a transposed copy, every launch config, bytewise against eager:")
        with tempfile.TemporaryDirectory() as cache:
            env = {"TORCHINDUCTOR_CACHE_DIR": cache}
            print(gpu_line("without the fix:", _run("gpu", False, env)))
            print(gpu_line("with the fix:", _run("gpu", True, env)))
        return
    print_recorded_gpu_run(LOG, recorded_line)
    print("  CPU check of what the fix changes: the Triton source Inductor emits, and the FX graph cache key")
    print(cpu_line("without the fix:", _run("codegen", False)))
    print(cpu_line("with the fix:", _run("codegen", True)))


if __name__ == "__main__":
    main()
