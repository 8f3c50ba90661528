"""What turning Dynamo's LRU cache reordering off costs (the recompute-cache fix), on CPU.

    python benchmarks/recompute_cache_overhead.py [--number 20000] [--repeat 15]

Prints three tables:

1. **Cache lookup.** ``f(x) = x + 1`` compiled with ``backend="eager", dynamic=False`` for N input
   sizes (N cache entries on one code object, one size guard each), then called in three patterns:
   always the newest entry, always the oldest entry, round robin over all N. Per call, nanoseconds,
   LRU on (torch's default) vs off (``torch._C._dynamo.eval_frame._set_lru_cache(False)`` before the
   entries are compiled, as the fix leaves it). Each figure is the minimum over ``--repeat``
   repetitions of ``--number`` calls, in CPU time of this process. With LRU on a repeated hit is always at the front; with LRU off
   the entries keep insertion order, so a hit on the k-th entry first fails the guards of the k-1
   before it, and round robin is cheaper than with LRU (where every hit is on the last entry).
2. **Recompiles.** Frames compiled for a function called with 4, 6, 4, 6, ... rows (automatic dynamic
   shapes: a static graph, then a dynamic one) under each setting: the guards do not change, so the
   number of compiles does not either; only which graph a 4-row call runs does.
3. **The fix's own per-call cost**: ``checkpoint(torch.sin, x, use_reentrant=False)`` forward with the
   fix applied vs reverted (its wrapper on ``_checkpoint_hook.__init__`` reads one attribute).
"""

from __future__ import annotations

import functools
import itertools
import os
import time
import timeit
import types
from typing import Any, Callable

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

import torch  # noqa: E402
import torch._dynamo  # noqa: E402
import torchfix_core  # noqa: E402
from _timing import timing_arguments  # noqa: E402

SET_LRU = torch._C._dynamo.eval_frame._set_lru_cache


def fresh(fn: Callable[..., Any], tag: str) -> Callable[..., Any]:
    """A copy of ``fn`` with its own code object (Dynamo keeps its cache entries per code object)."""
    code = fn.__code__.replace(co_name=f"{fn.__name__}_{tag}")
    return types.FunctionType(code, fn.__globals__, code.co_name)


def add_one(x: torch.Tensor) -> torch.Tensor:
    return x + 1


def per_call(call: Callable[[], Any], number: int, repeat: int) -> float:
    """CPU time of this process per call, ns (process time: robust to other processes on the machine)."""
    return min(timeit.repeat(call, number=number, repeat=repeat, timer=time.process_time)) / number * 1e9


def lookup_table(sizes: tuple[int, ...], number: int, repeat: int) -> None:
    print("1. cache lookup, CPU ns per call (min of repeats); f(x) = x + 1, backend eager, one size guard per entry")
    print(
        f"   {'entries':>7} | {'newest: on':>10} {'off':>7} | {'oldest: on':>10} {'off':>7} | "
        f"{'round robin: on':>15} {'off':>7} | {'off: ns per entry skipped':>25}"
    )
    torch._dynamo.config.recompile_limit = max(sizes) + 1
    torch._dynamo.config.automatic_dynamic_shapes = False
    for n in sizes:
        row: dict[str, float] = {}
        for lru in (True, False):
            SET_LRU(lru)
            compiled = torch.compile(fresh(add_one, f"{n}_{lru}"), backend="eager", dynamic=False)
            xs = [torch.zeros(k + 1) for k in range(n)]
            for x in xs:  # compile N entries, oldest first
                compiled(x)
            newest, oldest = xs[-1], xs[0]
            key = "on" if lru else "off"
            row[f"newest {key}"] = per_call(functools.partial(compiled, newest), number, repeat)
            row[f"oldest {key}"] = per_call(functools.partial(compiled, oldest), number, repeat)
            cycle = itertools.cycle(xs)
            row[f"rr {key}"] = per_call(lambda c=compiled, cyc=cycle: c(next(cyc)), number, repeat)
        skipped = f"{(row['newest off'] - row['oldest off']) / (n - 1):.0f}" if n > 1 else "-"
        print(
            f"   {n:>7} | {row['newest on']:>10.0f} {row['newest off']:>7.0f} | {row['oldest on']:>10.0f} "
            f"{row['oldest off']:>7.0f} | {row['rr on']:>15.0f} {row['rr off']:>7.0f} | {skipped:>25}"
        )
    SET_LRU(True)
    torch._dynamo.config.automatic_dynamic_shapes = True


def inner(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    h = torch.sin(x @ w)
    return torch.cos(h) * h.sum(0)


def recompile_table() -> None:
    print("2. recompiles: 4, 6, 4, 6, ... rows (automatic dynamic shapes), 20 calls, backend eager")
    for lru in (True, False):
        SET_LRU(lru)
        fn = fresh(inner, f"re_{lru}")
        before = torch._dynamo.utils.counters["frames"]["ok"]
        compiled = torch.compile(fn, backend="eager")
        w = torch.randn(8, 8)
        for i in range(20):
            compiled(torch.randn(4 if i % 2 == 0 else 6, 8), w)
        entries = len(torch._C._dynamo.eval_frame._debug_get_cache_entry_list(fn.__code__))
        compiles = torch._dynamo.utils.counters["frames"]["ok"] - before
        print(f"   LRU {'on ' if lru else 'off'}: {compiles} frames compiled, {entries} cache entries")
    SET_LRU(True)


def fix_cost_table(number: int, repeat: int) -> None:
    state = next((str(r.state) for r in torchfix_core.status() if r.id == "recompute-cache"), "absent")
    print(
        f"3. the fix's wrapper: checkpoint(torch.sin, x[64], use_reentrant=False) forward, CPU ns per call (fix {state})"
    )
    if state != "applied":
        print("   (skipped: the fix is not applied on this machine)")
        return
    x = torch.randn(64, requires_grad=True)

    def call() -> Any:
        return torch.utils.checkpoint.checkpoint(torch.sin, x, use_reentrant=False)

    call()  # the first checkpoint turns LRU off (once)
    on: list[float] = []
    off: list[float] = []
    for _ in range(repeat):
        torchfix_core.apply(only=["recompute-cache"])
        on.append(timeit.timeit(call, number=number, timer=time.process_time) / number * 1e9)
        torchfix_core.revert(only=["recompute-cache"])
        off.append(timeit.timeit(call, number=number, timer=time.process_time) / number * 1e9)
    torchfix_core.apply(only=["recompute-cache"])
    print(f"   applied {min(on):.0f} ns, reverted {min(off):.0f} ns, difference {min(on) - min(off):+.0f} ns")


def main() -> None:
    args = timing_arguments(__doc__, number=20000, repeat=15)
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs")
    lookup_table((1, 2, 4, 8, 16), args.number, args.repeat)
    recompile_table()
    fix_cost_table(max(args.number // 10, 100), args.repeat)


if __name__ == "__main__":
    main()
