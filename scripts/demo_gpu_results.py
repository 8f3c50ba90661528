"""Demo section: what the GPU-only reproductions showed on an H200 (recorded, not re-run here).

    python scripts/demo_gpu_results.py

The autotune bug needs Triton autotuning on a GPU and fp8-recompute's needs TransformerEngine's CUDA
kernels, so ``nox -s demo`` cannot reproduce them on a CPU; this prints the recorded results from
``docs/results/gpu/`` (torchfix installed from wheels on the GPU machine; each fix's page in
``docs/fixes/`` has the full tables): each torch's probe decisions, which GPU tests passed (a passing
``..._fails_without_fix`` test means the bug reproduced), and the benchmark summaries.
"""

from __future__ import annotations

import re
from pathlib import Path

RESULTS = Path(__file__).resolve().parent.parent / "docs" / "results" / "gpu"


def gpu_tests(log: Path) -> None:
    lines = log.read_text().splitlines()
    print(f"  {lines[0]}")
    for line in lines:
        if re.match(r"  \S+ (applied|not-needed|out-of-range|failed) - ", line):
            fix, state = line.split()[:2]
            print(f"    probe: {fix:<16} {state}")
        elif line.startswith(("PASSED ", "FAILED ")):
            outcome, _, test = line.partition(" ")
            print(f"    {outcome:<7} {test.split('::')[-1]}  ({test.split('/')[1]})")
        elif line.startswith("SKIPPED "):
            where, _, reason = line.partition(": ")
            print(f"    SKIPPED {reason}  ({where.split('/')[1]})")


def bench(log: Path, keep: tuple[str, ...]) -> None:
    for line in log.read_text().splitlines():
        if line.lstrip().startswith(keep):
            print(f"    {line.strip()[:150]}")


def main() -> None:
    if not RESULTS.is_dir():
        print("no recorded GPU results in this checkout")
        return
    print("== Recorded GPU results (NVIDIA H200; logs in docs/results/gpu/, not re-run here)")
    for log in sorted(RESULTS.glob("gpu-torch-*.log")):
        gpu_tests(log)
    print("  autotune: benchmarks/autotune_cold_step.py on torch 2.13.0+cu130 (cold step autotunes inside SAC)")
    for name in ("bench-autotune-2.13.0.log", "bench-autotune-save-all-2.13.0.log"):
        if (RESULTS / name).is_file():
            bench(RESULTS / name, ("autotune_cold_step:", "==", "cold/warm peak", "error:"))
    if (RESULTS / "bench-sac-replay-steps-2.13.0.log").is_file():
        print("  sac-replay: benchmarks/sac_replay_steps.py on torch 2.13.0+cu130")
        bench(RESULTS / "bench-sac-replay-steps-2.13.0.log", ("policy", "sac "))
    fp8 = RESULTS / "fp8-te-2.18.0-torch-2.11.0.log"
    if fp8.is_file():
        print("  fp8-recompute: TransformerEngine 2.18.0 built on the GPU machine, torch 2.11.0+cu130")
        for line in fp8.read_text().splitlines()[:5]:
            print(f"    {line}")


if __name__ == "__main__":
    main()
