"""Demo section of torchfix-mix-order for ``nox -s demo``: the unwritten gradient on a GPU, the wrapper
line on a CPU.

    python packages/torchfix-mix-order/demo.py

The bug (pytorch#193061) is in the wrapper of a fused Triton kernel, so it shows on a GPU. With a CUDA
GPU this runs the fix's declared reproduction (``torchfix_mix_order.reproduction``: two LayerNorms
modulated by the chunks of one shared table, compiled, the table's gradient per chunk against a
float64 eager reference) without and with ``mix-order-view-write``, each in a fresh interpreter, as
``torchfix-doctor verify`` runs it; without one it prints the recorded GPU run of the package's GPU
test (``docs/results/gpu/mix-order-view-write-tests-torch-2.14.1.log``, once recorded) and runs the
CPU check of what the fix changes (``tests/_scenarios.py emit``: the wrapper line the release's
mix-order codegen writes for an output that is a view, run on tensors, and the key term). Outside
torch 2.11-2.14 the fix stays out (``out-of-range``); torch 2.15 writes the ``copy_`` line itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from torchfix_core.testing import DemoCheck, demo_reproduction, only_fix, print_gpu_fix_demo, run_json_script_timed

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "tests" / "_scenarios.py"
FIX = "mix-order-view-write"
TITLE = "torchfix-mix-order: mix-order reduction never writes a gradient chunk that is a view (torch 2.10-2.14)"
LOG = HERE.parent.parent / "docs" / "results" / "gpu" / "mix-order-view-write-tests-torch-2.14.1.log"


def _emit(fix: bool) -> dict[str, Any]:
    return run_json_script_timed([SCENARIOS, "emit"], env=only_fix(FIX, fix), timeout=600)


def gpu_figures(r: Mapping[str, Any]) -> str:
    outcome = r["outcome"]
    return f"fix {r['state']}, {r['seconds']:.0f} s: {outcome['result']}: {outcome['measure']} ({outcome['detail']})"


def recorded_line(label: str, r: dict[str, Any]) -> str:
    outcome = r["outcome"]
    return f"{label:<8} {outcome['result']}: {outcome['measure']}; fix {r['state']}"


def cpu_figures(r: Mapping[str, Any]) -> str:
    (view_line,) = [line for line in r["lines"]["float32"] if line.startswith("buf3") and "alias" not in line]
    written = "written" if r["runs"]["float32"]["view_written"] else "never written (NaN kept)"
    term = "none" if r["fx_key_term"] is None else "the fix's"
    return f"torch {r['torch']}, fix {r['state']}: `{view_line}` -> the viewed region {written}; key term: {term}"


GPU_CHECK = DemoCheck(
    "compiled adaLN case, the chunk()-ed table's gradient per chunk against float64 eager:",
    lambda fix: demo_reproduction(FIX, fix),
    gpu_figures,
)


CPU_CHECK = DemoCheck(
    "CPU check of what the fix changes: the wrapper line for a mix-order output that is a view, run on tensors",
    _emit,
    cpu_figures,
)


def main() -> None:
    print_gpu_fix_demo(TITLE, gpu=GPU_CHECK, recorded=(LOG, recorded_line), cpu=CPU_CHECK)


if __name__ == "__main__":
    main()
