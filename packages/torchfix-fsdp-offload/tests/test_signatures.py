"""Signature and report counts of fsdp-offload-hook (issue #24).

The bug is silent (stale gradients, no exception): its signature is a symptom in words, which
``torchfix-doctor explain`` cannot match in a log; the report shows whether the fix acted. The CPU
``flip`` run with the fix on counts one ``blocking-copy-for-hooks`` per ``foreach_reduce`` call
that changed a copy (two groups with a hooked parameter in the first step; the second step
accumulates, blocking in torch already: not counted); disabled, or ``not-needed`` where torch
carries upstream's fix, it counts nothing. The GPU counts are in ``test_gpu.py``.
"""

from __future__ import annotations

from typing import Any

from _util import FIX
from torchfix_core.testing import assert_silent_signatures


def test_signature_is_a_silent_symptom() -> None:
    assert_silent_signatures(FIX, "post-accumulate-grad hook", "pin_memory=True", count=1)


def test_green_run_counts_blocking_copies(flip_with: dict[str, Any], bug_present: bool) -> None:
    if not bug_present:
        assert flip_with["report"]["state"] == "not-needed" and flip_with["report"]["acted"] == 0, flip_with
        return
    assert flip_with["report"]["state"] == "applied", flip_with
    assert flip_with["report"]["acted"] > 0
    assert flip_with["report"]["events"] == {"blocking-copy-for-hooks": 2}, flip_with["report"]


def test_disabled_run_counts_nothing(flip_without: dict[str, Any]) -> None:
    assert flip_without["report"]["state"] == "disabled"
    assert flip_without["report"]["acted"] == 0, flip_without["report"]
