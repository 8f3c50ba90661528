"""The command line of the micro-benchmarks that time a call with :mod:`timeit` (best of
``--repeat`` repetitions of ``--number`` calls each), and :func:`cuda_medians` for the GPU step
benchmarks. Imported from this directory (``python benchmarks/NAME.py`` puts it first on
``sys.path``); imports nothing heavy (torch only inside :func:`cuda_medians`)."""

from __future__ import annotations

import argparse
import statistics
from typing import Any, Callable


def timing_arguments(doc: str | None, *, number: int, repeat: int) -> argparse.Namespace:
    """Parse ``--number`` (calls per repetition, default ``number``) and ``--repeat`` (repetitions,
    default ``repeat``; a figure is the best of them) from ``sys.argv``, the description being the
    first line of ``doc`` (the benchmark's module docstring)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--number", type=int, default=number, help=f"calls per repetition (default {number})")
    parser.add_argument("--repeat", type=int, default=repeat, help=f"repetitions; the best is shown (default {repeat})")
    return parser.parse_args()


def cuda_medians(fns: dict[str, Callable[[], Any]], reps: int, rounds: int) -> dict[str, float]:
    """Median milliseconds per call of each function, interleaved rounds, CUDA events."""
    import torch

    times: dict[str, list[float]] = {k: [] for k in fns}
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    for _ in range(rounds):
        for name, fn in fns.items():
            for _ in range(reps):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times[name].append(start.elapsed_time(end))
    return {k: round(statistics.median(v), 4) for k, v in times.items()}
