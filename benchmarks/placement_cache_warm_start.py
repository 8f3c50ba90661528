"""Warm-start compile time with a cache hit vs a cold compile, with and without torchfix-placement-cache.

Even sharding (every rank holds the same ``(2, 8)`` shard of a ``Shard(0)`` DTensor), real gloo
process group, ranks in separate processes sharing one ``TORCHINDUCTOR_CACHE_DIR``:

* job 1: rank 0 compiles cold (AOTAutograd + FX graph cache miss), barrier, the other ranks
  compile the same function and should load rank 0's entry (cross-rank warm start);
* job 2 (restart): the same job again on the same cache directory: every rank should hit.

Run once with the fix off (``TORCHFIX_AUTOLOAD=0``) and once with it applied
(``torchfix_core.apply(only=["placement-cache"])``). The fix must keep these legitimate hits: the
warm columns should be equal with and without it. Prints a table; nothing else.

    python benchmarks/placement_cache_warm_start.py [--world 2] [--repeat 1]

Needs torch, torchfix-core and torchfix-placement-cache. CPU only; set
``TORCHINDUCTOR_COMPILE_THREADS=1`` on small boxes. Times are wall-clock seconds of the first call
of ``torch.compile(f)`` (Dynamo trace + cache lookup + load or compile), per rank.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(
    0, str(Path(__file__).resolve().parent.parent / "packages" / "torchfix-placement-cache" / "tests")
)  # the test harness tests/_multirank.py
from _multirank import run_job  # noqa: E402


def _summary(reports: list[dict[str, Any]], ranks: list[int]) -> tuple[float, int, int, bool]:
    chosen = [reports[r] for r in ranks]
    mean = statistics.mean(r["compile_s"] for r in chosen)
    hits = sum(r["counters"]["autograd_cache_hit"] for r in chosen)
    misses = sum(r["counters"]["autograd_cache_miss"] for r in chosen)
    return mean, hits, misses, all(r["ok"] for r in chosen)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--world", type=int, default=2, help="ranks per job (default 2)")
    parser.add_argument("--repeat", type=int, default=1, help="repetitions per mode (fresh cache each)")
    args = parser.parse_args()

    rows = []
    for mode, fix in (("without fix", "off"), ("with fix", "api")):
        for rep in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="torchfix-pc-bench-") as cache:
                start = time.perf_counter()
                first = run_job("even", fix=fix, world=args.world, cache_dir=cache)
                restart = run_job("even", fix=fix, world=args.world, cache_dir=cache)
                wall = time.perf_counter() - start
            others = list(range(1, args.world))
            cold = _summary(first, [0])
            cross = _summary(first, others)
            warm = _summary(restart, list(range(args.world)))
            rows.append((mode, rep, first[0]["torch"], first[0]["fix_state"], cold, cross, warm, wall))

    print(f"placement-cache warm start, even sharding, {args.world} ranks, shared TORCHINDUCTOR_CACHE_DIR")
    header = (
        f"{'mode':<12} {'rep':>3} {'torch':<14} {'state':<11} {'cold r0 s':>9} {'miss':>4} "
        f"{'cross-rank s':>12} {'hit/miss':>8} {'restart s':>9} {'hit/miss':>8} {'ok':>3} {'wall s':>7}"
    )
    print(header)
    print("-" * len(header))
    for mode, rep, torch_version, state, cold, cross, warm, wall in rows:
        ok = cold[3] and cross[3] and warm[3]
        print(
            f"{mode:<12} {rep:>3} {torch_version:<14} {state or '-':<11} {cold[0]:>9.2f} {cold[2]:>4} "
            f"{cross[0]:>12.2f} {f'{cross[1]}/{cross[2]}':>8} {warm[0]:>9.2f} {f'{warm[1]}/{warm[2]}':>8} "
            f"{'yes' if ok else 'NO':>3} {wall:>7.1f}"
        )
    for mode in ("without fix", "with fix"):
        mine = [r for r in rows if r[0] == mode]
        cold_s = statistics.mean(r[4][0] for r in mine)
        warm_s = statistics.mean(r[6][0] for r in mine)
        print(f"{mode}: cold {cold_s:.2f} s, warm restart {warm_s:.2f} s, speed-up x{cold_s / warm_s:.1f}")


if __name__ == "__main__":
    main()
