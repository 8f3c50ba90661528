"""Demo section of torchfix-fp8-minmax for ``nox -s demo``: the miscompile on a GPU, the codegen on a CPU.

    python packages/torchfix-fp8-minmax/demo.py

The bug (triton-lang/triton#11111) is a Triton miscompile on NVIDIA GPUs. With a CUDA GPU this
runs the fix's declared reproduction (``torchfix_fp8_minmax.reproduction``: the compiled fp8 cast of
float8 training, every launch config Inductor compiled, bytewise against eager) without and with
``fp8-minmax-store``, each in a fresh interpreter, as ``torchfix-doctor verify`` runs it; without
one it prints the figures recorded on an H200
(``docs/results/gpu/fp8-minmax-store-tests-torch-2.14.1.log``) and runs the CPU check of what the
fix changes (``tests/_scenarios.py codegen``: the Triton source Inductor emits for min/max, and
the key term), a few seconds per line. Outside torch 2.14 the fix stays out (``out-of-range``;
2.13 and older emit the ``tl.where`` form on CUDA already).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from torchfix_core.testing import DemoCheck, demo_reproduction, only_fix, print_gpu_fix_demo, run_json_script_timed

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "tests" / "_scenarios.py"
FIX = "fp8-minmax-store"
TITLE = "torchfix-fp8-minmax: Inductor's PropagateNan min/max next to transposed fp8 stores (Triton 3.8)"
LOG = HERE.parent.parent / "docs" / "results" / "gpu" / "fp8-minmax-store-tests-torch-2.14.1.log"


def _run(scenario: str, fix: bool) -> dict[str, Any]:
    return run_json_script_timed([SCENARIOS, scenario], env=only_fix(FIX, fix), timeout=600)


def gpu_figures(r: Mapping[str, Any]) -> str:
    outcome = r["outcome"]
    return f"fix {r['state']}, {r['seconds']:.0f} s: {outcome['result']}: {outcome['measure']} ({outcome['detail']})"


def recorded_line(label: str, r: dict[str, Any]) -> str:
    return (
        f"{label:<8} configs with other bytes than eager {r['configs_red']} of {r['configs_run']}, PropagateNan in "
        f"the kernels {r['propagate_nan_in_code']}; report acted {r['report']['acted']}"
    )


def cpu_figures(r: Mapping[str, Any]) -> str:
    term = "none" if r["fx_key_term"] is None else "the tl.where codegen"
    return f"torch {r['torch']}, fix {r['state']}: minimum -> {r['minimum']}; key term: {term}"


GPU_CHECK = DemoCheck(
    "compiled fp8 cast with a transposed copy, every launch config, bytewise against eager:",
    lambda fix: demo_reproduction(FIX, fix),
    gpu_figures,
)


CPU_CHECK = DemoCheck(
    "CPU check of what the fix changes: the Triton source Inductor emits, and the FX graph cache key",
    lambda fix: _run("codegen", fix),
    cpu_figures,
)


def main() -> None:
    print_gpu_fix_demo(TITLE, gpu=GPU_CHECK, recorded=(LOG, recorded_line), cpu=CPU_CHECK)


if __name__ == "__main__":
    main()
