"""Signatures and report counts of inductor-rand4x-dropout.

The bug is silent (a dropout mask repeating in groups of four, a recompute applying another mask; no
exception): its signatures are symptoms in words, which ``torchfix-doctor explain`` cannot match in a
log; the report shows whether the fix acted. The CPU ``codegen`` run counts its declines and key
terms (``test_codegen.py``); disabled, the fix counts nothing. The GPU counts are in ``test_gpu.py``.
"""

from __future__ import annotations

from typing import Any

from _util import FIX
from torchfix_core.testing import applied_report, assert_silent_signatures


def test_signatures_are_silent_symptoms() -> None:
    assert_silent_signatures(FIX, "groups of four", "recompute", "activation checkpointing", "dropout", count=2)


def test_green_run_counts(codegen_with: dict[str, Any], bug_present: bool) -> None:
    report = applied_report(codegen_with, bug_present)
    if report is not None:
        assert report["acted"] > 0 and report["events"]["rand4x-declined"] > 0, report


def test_disabled_run_counts_nothing(codegen_without: dict[str, Any]) -> None:
    assert codegen_without["report"]["state"] == "disabled"
    assert codegen_without["report"]["acted"] == 0, codegen_without["report"]
