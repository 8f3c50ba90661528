"""End-to-end on a GPU: cold Triton autotuning inside SAC recompute (real Inductor, real Triton).

Run: ``python -m pytest packages/torchfix-autotune/tests -m gpu -v`` with torch (CUDA), triton,
torchfix-core and torchfix-autotune installed. Each case is the fix's declared reproduction
(``torchfix_autotune.reproduction``, shipped in the wheel: what ``torchfix-doctor verify`` runs),
run once without and once with the fix, each in a fresh interpreter with every other fix off
(``torchfix_core.testing.reproduce``), its report written through ``TORCHFIX_REPORT``.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
from _autotune_helpers import reproduce_with_report
from torchfix_autotune.reproduction import AUTOTUNER_OPS, BUG_ERROR
from torchfix_core.testing import assert_explained, failure_text, only_fix
from torchfix_core.testing.fixtures import with_and_without_fix

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

green, red = with_and_without_fix(reproduce_with_report)  # each a module fixture: one run with / without


def test_recompute_after_cold_autotune_fails_without_fix(red: dict[str, Any], strict: bool) -> None:
    assert red["state"] == "disabled", red
    outcome = red["outcome"]
    if strict:
        assert outcome["result"] == "observed", red
        kind, _, message = outcome["measure"].partition(": ")
        op, _, rest = message.partition(" ")
        assert kind == "RuntimeError" and re.fullmatch(r"(invocation index \d+ )?" + BUG_ERROR, rest), red
        assert op in AUTOTUNER_OPS, f"failed on {op}, not on an autotuner op (another bug?): {red}"
        # the signature (test_signatures.py does the same on the CPU emulation's red run)
        text = failure_text({"error_type": kind, "error": message})
        assert_explained(text, "autotune", "not-installed", isolated=True)
        assert_explained(text, "autotune", "disabled", env=only_fix("autotune", False))
        assert red["report"]["acted"] == 0, red["report"]
    else:  # lenient replay (torch <= 2.12): autotuning re-executes under replay and nothing fails
        # (the reproduction itself checks that the recompute recompiled and autotuned)
        assert outcome["result"] == "not-observed", red


def test_recompute_after_cold_autotune_passes_with_fix(green: dict[str, Any], strict: bool) -> None:
    # not observed: the recompute recompiled, autotuned (Inductor's coordinate-descent benchmarks
    # during backward; the reproduction checks both) and the gradients match eager code's
    assert green["outcome"]["result"] == "not-observed", green
    if strict:
        assert green["state"] == "applied", green
        # each autotuner call that ran with SAC's replay mode hidden (the cold kernels of the recompute)
        assert green["report"]["events"].get("hid-modes", 0) > 0, green["report"]
    else:
        assert green["state"] == "not-needed", green
