"""Demo of torchfix-placement-cache (``python packages/torchfix-placement-cache/demo.py``).

Two real 2-rank gloo jobs on CPU, ranks in fresh processes sharing one ``TORCHINDUCTOR_CACHE_DIR``,
compile ``f(x) = x * 2 + 1`` on a global ``(3, 8)`` ``Shard(0)`` DTensor (rank 0 holds ``(2, 8)``,
rank 1 holds ``(1, 8)``). Rank 0 compiles first; then rank 1 compiles. Without the fix rank 1
loads rank 0's artifact (AOTAutograd cache false hit) and fails; with it rank 1 misses and
compiles its own. Where the probe finds the bug absent (torch 2.11), both runs are correct.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))  # the test harness tests/_multirank.py
from _multirank import run_job  # noqa: E402


def _show(title: str, reports: list[dict[str, object]]) -> None:
    print(f"  {title}")
    for r in reports:
        counters = r["counters"]
        assert isinstance(counters, dict)
        outcome = "correct" if r["ok"] else f"FAILED: {r['error']}"
        print(
            f"    rank {r['rank']} local {tuple(r['local_shape'])}: AOTAutograd cache "
            f"hit={counters['autograd_cache_hit']} miss={counters['autograd_cache_miss']}, "
            f"FX graph cache hit={counters['fxgraph_cache_hit']} -> {outcome}"
        )


def main() -> None:
    print("== placement-cache: uneven DTensor shards sharing one compile cache (2 gloo ranks, CPU)")
    start = time.perf_counter()
    without = run_job("uneven", world=2, env={"TORCHFIX_DISABLE": "placement-cache"})
    print(f"  torch {without[0]['torch']}")
    _show("TORCHFIX_DISABLE=placement-cache:", without)
    with_fix = run_job("uneven", world=2)
    _show(f"torchfix enabled (fix state: {with_fix[0]['fix_state']}):", with_fix)
    print(f"  ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
