"""Per-call cost of backward-context: ``Context.copy().run`` instead of ``Context.run`` per compiled backward.

    python benchmarks/backward_context_overhead.py [--calls N] [--samples S] [--steps K]

1. Micro: ``functools.partial(ctx.run, f)()`` against ``functools.partial(ctx.copy().run, f)()``,
   ``ctx`` holding 0, 16 or 1024 ContextVars (a ``Context`` is a persistent map: the copy is O(1)).
2. End to end (torch 2.12/2.13, where the fix applies): one process, two ``torch.compile``d copies of
   a small function (``aot_eager``), one built with the fix reverted (torch's ``_cc.run`` wrapper),
   one with it applied; their ``backward()`` is timed in interleaved rounds. The difference is far
   below the run-to-run noise of a backward; the micro figure is the cost.

Prints medians in ns (micro) and us (per backward).
"""

from __future__ import annotations

import argparse
import contextvars
import functools
import os
import statistics
import time
from typing import Any, Callable

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")


def _median_ns(call: Callable[[], Any], calls: int, samples: int) -> float:
    times = []
    for _ in range(samples):
        start = time.perf_counter_ns()
        for _ in range(calls):
            call()
        times.append((time.perf_counter_ns() - start) / calls)
    return statistics.median(times)


def _context_with(count: int) -> contextvars.Context:
    """A Context holding ``count`` ContextVars (built in a fresh Context, so ours stays as it is)."""
    variables = [contextvars.ContextVar(f"v{i}") for i in range(count)]

    def fill() -> contextvars.Context:
        for i, var in enumerate(variables):
            var.set(i)
        return contextvars.copy_context()

    return contextvars.Context().run(fill)


def _run_both(ctx: contextvars.Context, calls: int, samples: int) -> tuple[float, float]:
    def body() -> None:
        return None

    old = _median_ns(lambda: functools.partial(ctx.run, body)(), calls, samples)
    new = _median_ns(lambda: functools.partial(ctx.copy().run, body)(), calls, samples)
    return old, new


def micro(calls: int, samples: int) -> None:
    print("micro: ns per call (median of", samples, "x", calls, "calls)")
    print(f"{'ContextVars':>12} {'ctx.run':>10} {'ctx.copy().run':>15} {'added':>8}")
    for count in (0, 16, 1024):
        old, new = _run_both(_context_with(count), calls, samples)
        print(f"{count:>12} {old:>10.1f} {new:>15.1f} {new - old:>8.1f}")


def end_to_end(steps: int) -> None:
    import torch
    import torch._dynamo  # noqa: F401
    import torchfix_core

    state = next((r.state for r in torchfix_core.status() if r.id == "backward-context"), None)
    if str(state) != "applied":
        print(f"end to end: skipped (backward-context is {state} on torch {torch.__version__})")
        return

    def make() -> Callable[[torch.Tensor], torch.Tensor]:
        def f(x: torch.Tensor) -> torch.Tensor:
            return (x.sin() * 2).sum()

        return torch.compile(f, backend="aot_eager", fullgraph=True)

    x = torch.randn(64, requires_grad=True)
    torchfix_core.revert(only=["backward-context"])
    old = make()
    old(x).backward()  # builds the wrapper now, without the fix
    torchfix_core.apply(only=["backward-context"])
    new = make()
    new(x).backward()
    per: dict[str, list[float]] = {"torch _cc.run": [], "fix _cc.copy().run": []}
    for _ in range(steps):
        for name, fn in (("torch _cc.run", old), ("fix _cc.copy().run", new)):
            loss = fn(x)
            start = time.perf_counter_ns()
            loss.backward()
            per[name].append((time.perf_counter_ns() - start) / 1000)
    print(f"end to end: us per backward() of a compiled function (median of {steps}, interleaved)")
    for name, values in per.items():
        print(f"  {name:<20} {statistics.median(values):8.1f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200_000)
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--steps", type=int, default=2000)
    opts = parser.parse_args()
    micro(opts.calls, opts.samples)
    end_to_end(opts.steps)


if __name__ == "__main__":
    main()
