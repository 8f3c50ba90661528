"""Demo section of torchfix-inductor-rand4x for ``nox -s demo``: the wrong masks on a GPU, the codegen on a CPU.

    python packages/torchfix-inductor-rand4x/demo.py

The bug (pytorch#198333) is in the Triton code Inductor generates for CUDA. With a CUDA GPU this runs
the fix's declared reproduction (``torchfix_inductor_rand4x.reproduction``: compiled dropout of a
transposed copy, its group-of-four repetition, and the checkpointed forward's mask against the
recompute's) without and with ``inductor-rand4x-dropout``, each in a fresh interpreter, as
``torchfix-doctor verify`` runs it; without one it prints the recorded GPU run
(``docs/results/gpu/inductor-rand4x-dropout-tests-torch-2.14.1.log``, once a GPU run is recorded)
and runs the CPU check of what the fix changes (``tests/_scenarios.py codegen``: what Inductor emits
for ``rand`` in a 1-D CUDA Triton kernel context, and the key term), a few seconds per line. On torch
2.12 (no 4x path) and 2.15 (upstream's gate) the fix stays out (``not-needed``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from torchfix_core.testing import DemoCheck, demo_reproduction, only_fix, print_gpu_fix_demo, run_json_script_timed

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "tests" / "_scenarios.py"
FIX = "inductor-rand4x-dropout"
TITLE = "torchfix-inductor-rand4x: Inductor's rand4x dropout masks (groups of four, checkpoint recompute)"
LOG = HERE.parent.parent / "docs" / "results" / "gpu" / "inductor-rand4x-dropout-tests-torch-2.14.1.log"


def _run(scenario: str, fix: bool) -> dict[str, Any]:
    return run_json_script_timed([SCENARIOS, scenario], env=only_fix(FIX, fix), timeout=600)


def gpu_figures(r: Mapping[str, Any]) -> str:
    outcome = r["outcome"]
    return f"fix {r['state']}, {r['seconds']:.0f} s: {outcome['result']}: {outcome['measure']} ({outcome['detail']})"


def recorded_line(label: str, r: dict[str, Any]) -> str:
    b = r.get("b") or {}
    differ = b.get("mask_differ_fraction", "-")
    a = (r.get("a") or {}).get("mask") or {}
    return (
        f"{label:<8} forward/recompute masks differ {differ}, agreement within/across fours "
        f"{a.get('agree_within4', '-')}/{a.get('agree_across4', '-')}; report acted {r['report']['acted']}"
    )


def cpu_figures(r: Mapping[str, Any]) -> str:
    term = (r["key_terms"]["fx"] or {}).get(FIX, "none")
    return f"torch {r['torch']}, fix {r['state']}: rand in a 1-D CUDA kernel -> {r['one_d']['rand']}; key term: {term}"


GPU_CHECK = DemoCheck(
    "compiled dropout of x.transpose(1, 2).contiguous(), with and without checkpointing:",
    lambda fix: demo_reproduction(FIX, fix),
    gpu_figures,
)


CPU_CHECK = DemoCheck(
    "CPU check of what the fix changes: the Triton source Inductor emits for rand, and the cache key term",
    lambda fix: _run("codegen", fix),
    cpu_figures,
)


def main() -> None:
    print_gpu_fix_demo(TITLE, gpu=GPU_CHECK, recorded=(LOG, recorded_line), cpu=CPU_CHECK)


if __name__ == "__main__":
    main()
