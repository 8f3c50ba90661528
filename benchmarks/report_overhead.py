"""What counting costs: one event of a fix's tally (``torchfix_core.tallies``), per call.

    python benchmarks/report_overhead.py [--number 1000000] [--repeat 15]

Goal (issue 24): at most 50 ns per event, and nothing on a path where a fix does not act (a fix
counts only where it acts: there is no code on the other paths to measure). Prints, as the minimum
over ``--repeat`` interleaved repetitions of ``--number`` calls of a function shaped like a fix's
wrapper (a closure reading a module-level name):

* ``COUNTS[event] += 1``: the hot form every fix uses (``counts`` is an exact ``dict``);
* the same on a ``dict`` subclass with ``__missing__`` (the form not chosen, for comparison);
* ``Tally.note(event, detail)``: the rare-path form with a detail (takes a lock);
* ``torchfix_core.report()`` once: what a report costs (at exit or on demand; never per step).

Each figure is the difference to the same function without the counting line. Asserts nothing.
"""

from __future__ import annotations

import platform
import sys
import time
import timeit
from typing import Callable

from _timing import timing_arguments
from torchfix_core.tallies import tally

ACTED = tally("benchmark-fix", "acted")
COUNTS = ACTED.counts


class _MissingZero(dict):  # type: ignore[type-arg]
    __slots__ = ()

    def __missing__(self, key: str) -> int:
        return 0


SUBCLASS = _MissingZero()


def _empty(x: int) -> int:
    return x


def _counted(x: int) -> int:
    COUNTS["acted"] += 1
    return x


def _counted_subclass(x: int) -> int:
    SUBCLASS["acted"] += 1
    return x


def _noted(x: int) -> int:
    ACTED.note("acted-with-detail", "kernel_0")
    return x


def best_ns(fn: Callable[[int], int], number: int, repeat: int, baseline: Callable[[int], int]) -> float:
    """Minimum over interleaved repetitions of (fn - baseline), ns per call."""
    diffs = []
    for _ in range(repeat):
        a = timeit.timeit(lambda: fn(1), number=number)
        b = timeit.timeit(lambda: baseline(1), number=number)
        diffs.append((a - b) / number * 1e9)
    return min(diffs)


def main() -> None:
    args = timing_arguments(__doc__, number=1_000_000, repeat=15)
    print(f"Python {platform.python_version()} on {platform.machine()}, {args.repeat} x {args.number} calls")
    rows = [
        ("COUNTS[event] += 1 (exact dict, what fixes use)", best_ns(_counted, args.number, args.repeat, _empty)),
        ("dict subclass with __missing__ (not used)", best_ns(_counted_subclass, args.number, args.repeat, _empty)),
        ("Tally.note(event, detail) (rare paths)", best_ns(_noted, args.number // 10, args.repeat, _empty)),
    ]
    for label, ns in rows:
        print(f"{label:55s} {ns:8.1f} ns per event")
    import torch  # noqa: F401  - a report of a process that imported torch, as at exit
    import torchfix_core

    start = time.perf_counter()
    report = torchfix_core.report()
    print(
        f"{'torchfix_core.report() once (' + str(len(report['fixes'])) + ' fixes)':55s} {(time.perf_counter() - start) * 1e3:8.2f} ms"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
