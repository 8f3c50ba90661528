"""Signature and report counts of fp8-minmax-store.

The bug is silent (wrong bytes in a transposed fp8 copy, no exception): its signature is a symptom
in words, which ``torchfix-doctor explain`` cannot match in a log; the report shows whether the fix
acted. The CPU ``codegen`` run counts its emissions and key terms (``test_codegen.py``); disabled,
the fix counts nothing. The GPU counts are in ``test_gpu.py``.
"""

from __future__ import annotations

from typing import Any

from _util import FIX
from torchfix_core.testing import assert_silent_signatures


def test_signature_is_a_silent_symptom() -> None:
    assert_silent_signatures(FIX, "transposed copy", "float8", count=1)


def test_green_run_counts(codegen_with: dict[str, Any], bug_present: bool) -> None:
    if not bug_present:
        assert codegen_with["report"]["state"] == "not-needed" and codegen_with["report"]["acted"] == 0
        return
    assert codegen_with["report"]["state"] == "applied" and codegen_with["report"]["acted"] > 0, codegen_with


def test_disabled_run_counts_nothing(codegen_without: dict[str, Any]) -> None:
    assert codegen_without["report"]["state"] == "disabled"
    assert codegen_without["report"]["acted"] == 0, codegen_without["report"]
