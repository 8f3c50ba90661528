"""The real race (upstream PR pytorch/pytorch#180666) on one CUDA GPU: FSDP2 with
``CPUOffloadPolicy(pin_memory=True)``, a post-accumulate-grad hook on every parameter.

Run on a CUDA machine with torch, torchfix-core and torchfix-fsdp-offload installed:

    python -m pytest packages/torchfix-fsdp-offload/tests -m gpu -v -s

The fix's declared reproduction (``torchfix_fsdp_offload.reproduction``, shipped in the wheel: what
``torchfix-doctor verify`` runs; 8 x ``Linear(4096, 4096)``, 3 steps) runs once with the fix
disabled and once with it on, each in a fresh interpreter with every other torchfix fix disabled
(``torchfix_core.testing.reproduce``), its report written through ``TORCHFIX_REPORT``; each hook
clones the CPU gradient it is handed and the clone is compared bytewise with the final gradient.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import torch
from _util import reproduce_with_report
from torchfix_core.testing.fixtures import with_and_without_fix

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def _gpu(fix: bool) -> dict[str, Any]:
    r = reproduce_with_report(fix)
    print(f"\ngpu reproduction, fix {'on' if fix else 'off'}: {json.dumps(r)}")
    return r


green, red = with_and_without_fix(_gpu)  # each a module fixture: one GPU run with / without the fix


def test_offload_hook_grads_fails_without_fix(red: dict[str, Any], bug_present: bool) -> None:
    assert red["state"] == "disabled", red
    if not bug_present:
        pytest.skip("torch carries upstream PR #180666: no stale gradient to show")
    # the hooks read pinned buffers the non-blocking copy had not filled yet
    assert red["outcome"]["result"] == "observed", red
    assert "stale in " in red["outcome"]["measure"], red


def test_offload_hook_grads_passes_with_fix(green: dict[str, Any]) -> None:
    assert green["state"] in ("applied", "not-needed", "out-of-range"), green
    assert green["outcome"]["result"] == "not-observed", green
    assert "bytewise equal in every step (max abs diff 0)" in green["outcome"]["measure"], green


def test_offload_hook_report_counts_with_fix(green: dict[str, Any], red: dict[str, Any], bug_present: bool) -> None:
    assert red["report"]["state"] == "disabled" and red["report"]["acted"] == 0, red["report"]
    if not bug_present:
        assert green["report"]["acted"] == 0, green["report"]
        return
    assert green["report"]["state"] == "applied", green["report"]
    # once per foreach_reduce call with a hooked, pinned parameter: 8 groups x 3 steps
    assert green["report"]["acted"] > 0, green["report"]
    assert green["report"]["events"]["blocking-copy-for-hooks"] == green["report"]["acted"]
