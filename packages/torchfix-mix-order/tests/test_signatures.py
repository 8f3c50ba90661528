"""Signature and report counts of mix-order-view-write.

The bug is silent (a gradient region never written, no exception): its signature is a symptom in
words, which ``torchfix-doctor explain`` cannot match in a log; the report shows whether the fix
acted. The CPU ``emit`` run counts the view outputs written and the key terms (``test_codegen.py``);
disabled, the fix counts nothing. The GPU counts are in ``test_gpu.py``.
"""

from __future__ import annotations

from typing import Any

from _util import FIX
from torchfix_core.testing import assert_silent_signatures


def test_signature_is_a_silent_symptom() -> None:
    assert_silent_signatures(FIX, "never written", "chunk()", count=1)


def test_green_run_counts(emit_with: dict[str, Any], bug_present: bool) -> None:
    if not bug_present:
        assert emit_with["report"]["state"] == "not-needed" and emit_with["report"]["acted"] == 0
        return
    assert emit_with["report"]["state"] == "applied" and emit_with["report"]["acted"] > 0, emit_with


def test_disabled_run_counts_nothing(emit_without: dict[str, Any]) -> None:
    assert emit_without["report"]["state"] == "disabled"
    assert emit_without["report"]["acted"] == 0, emit_without["report"]
