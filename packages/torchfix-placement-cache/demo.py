"""Demo of torchfix-placement-cache (``python packages/torchfix-placement-cache/demo.py``).

Two real 2-rank gloo jobs on CPU, ranks in fresh processes sharing one ``TORCHINDUCTOR_CACHE_DIR``,
compile ``f(x) = x * 2 + 1`` on a global ``(3, 8)`` ``Shard(0)`` DTensor (rank 0 holds ``(2, 8)``,
rank 1 holds ``(1, 8)``). Rank 0 compiles first; then rank 1 compiles. Without the fix rank 1
loads rank 0's artifact (AOTAutograd cache false hit) and fails; with it rank 1 misses and
compiles its own. Where the probe finds the bug absent (torch 2.11), both runs are correct.

aot-bypass-key: one fresh process per run AOT-compiles ``f(x) = opaque(x) + 1``, then
``g(x) = opaque(x) - 100`` (``opaque`` is an ``allow_in_graph`` function, so AOTAutograd cannot key
the graphs and falls back to a nonce), seeding Python's RNG alike before each. Without the fix both
get the key ``str(random.random())`` and ``g`` loads ``f``'s artifact; with it each gets a uuid4 key.
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


def aot_bypass_key() -> None:
    """The aot-bypass-key section: seeded AOT compiles of two unkeyable graphs, without and with the fix."""
    import tempfile

    from _aot_bypass_key_util import SEEDED
    from _aot_bypass_key_util import run as run_scenario

    print("== aot-bypass-key: AOTAutograd's fallback cache key (AOT precompile, CPU)")
    start = time.perf_counter()
    for title, fix in (("TORCHFIX_DISABLE=aot-bypass-key:", False), ("torchfix enabled", True)):
        with tempfile.TemporaryDirectory() as cache:
            r = run_scenario(SEEDED, Path(cache), fix=fix)
        keys, aot = r["keys"], r["aot"]
        label = title if not fix else f"{title} (fix state: {r['state']}):"
        outcome = "correct" if r["g_ok"] else f"WRONG: g(ones) = {r['g_out']} (f's values; expected -98.0)"
        print(f"  {label}")
        print(f"    keys {keys[0]!r}, {keys[1]!r}; AOTAutograd cache hit={aot.get('autograd_cache_hit', 0)}")
        print(f"    g compiled after f -> {outcome}")
    print(f"  ({time.perf_counter() - start:.0f} s)")


def main() -> None:
    print("== placement-cache: uneven DTensor shards sharing one compile cache (2 gloo ranks, CPU)")
    start = time.perf_counter()
    without = run_job("uneven", world=2, env={"TORCHFIX_DISABLE": "placement-cache"})
    print(f"  torch {without[0]['torch']}")
    _show("TORCHFIX_DISABLE=placement-cache:", without)
    with_fix = run_job("uneven", world=2)
    _show(f"torchfix enabled (fix state: {with_fix[0]['fix_state']}):", with_fix)
    print(f"  ({time.perf_counter() - start:.0f} s)")
    aot_bypass_key()
    aot_cache_keys()


def aot_cache_keys() -> None:
    """The aot-autocast-key and aot-hop-body-key sections: two processes sharing one cache directory."""
    import tempfile

    from _aot_cache_key_util import AUTOCAST, HOP_BODY, run

    cases = (
        (AUTOCAST, "autocast_runs", ("bfloat16", "float16"), {}, "compiled under bf16 autocast, then float16"),
        (
            HOP_BODY,
            "checkpointed",
            ("opaque", "opaque"),
            ({"SCALE": "2"}, {"SCALE": "3"}),
            "checkpoint body reads SCALE=2, then 3",
        ),
    )
    for fix_id, scenario, args, envs, what in cases:
        print(f"== {fix_id}: {what} (2 processes, one TORCHINDUCTOR_CACHE_DIR, CPU)")
        start = time.perf_counter()
        for fix in (False, True):
            with tempfile.TemporaryDirectory() as cache:
                reports = [
                    run(fix_id, fix, Path(cache), scenario, arg, **(envs[i] if envs else {}))
                    for i, arg in enumerate(args)
                ]
            last = reports[-1]
            ok = last["runs"][0]["equal"] if "runs" in last else last["out_ok"] and last["grad_ok"]
            hit = last["counters"].get("autograd_cache_hit", 0)
            state = last["states"][fix_id]
            print(
                f"  fix {'on ' if fix else 'off'} ({state}): 2nd process AOTAutograd hit={hit} -> {'correct' if ok else 'WRONG (stale artifact)'}"
            )
        print(f"  ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
