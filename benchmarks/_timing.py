"""The command line of the micro-benchmarks that time a call with :mod:`timeit` (best of
``--repeat`` repetitions of ``--number`` calls each). Imported from this directory (``python
benchmarks/NAME.py`` puts it first on ``sys.path``); imports nothing heavy."""

from __future__ import annotations

import argparse


def timing_arguments(doc: str | None, *, number: int, repeat: int) -> argparse.Namespace:
    """Parse ``--number`` (calls per repetition, default ``number``) and ``--repeat`` (repetitions,
    default ``repeat``; a figure is the best of them) from ``sys.argv``, the description being the
    first line of ``doc`` (the benchmark's module docstring)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else None)
    parser.add_argument("--number", type=int, default=number, help=f"calls per repetition (default {number})")
    parser.add_argument("--repeat", type=int, default=repeat, help=f"repetitions; the best is shown (default {repeat})")
    return parser.parse_args()
