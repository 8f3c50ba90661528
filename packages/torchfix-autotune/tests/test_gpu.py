"""End-to-end on a GPU: cold Triton autotuning inside SAC recompute (real Inductor, real Triton).

Run: ``python -m pytest packages/torchfix-autotune/tests -m gpu -v`` with torch (CUDA), triton,
torchfix-core and torchfix-autotune installed. Each case runs ``_gpu_repro.py`` in a fresh process.
"""

from __future__ import annotations

import re
import tempfile

import pytest
import torch
from _autotune_helpers import run_script
from torchfix_core.testing import assert_explained, failure_text, only_fix

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

ERROR = "encountered during backward but not found in storage"
# Ops CachingAutotuner dispatches while tuning: the L2-flush buffer (torch.empty, seen first for
# kernels without mutated arguments: the H200 error of the issue), clone_preserve_strides
# (as_strided/clone, first for kernels with mutated arguments) and reset_to_zero_args (zero_).
AUTOTUNER_OPS = (
    "aten.empty.memory_format",
    "aten.as_strided.default",
    "aten.clone.default",
    "aten.empty_strided.default",
    "aten.zero_.default",
)


def _env(**extra: str) -> dict[str, str]:
    return {
        "TORCHINDUCTOR_COORDINATE_DESCENT_TUNING": "1",
        "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1",
        "TORCHINDUCTOR_CACHE_DIR": tempfile.mkdtemp(prefix="torchfix-autotune-gpu-"),
        **extra,
    }


def test_recompute_after_cold_autotune_fails_without_fix(strict: bool) -> None:
    result = run_script("_gpu_repro.py", env=_env(TORCHFIX_DISABLE="autotune"))
    assert result["fix_state"] == "disabled", result
    if strict:
        assert result["ok"] is False, result
        op, _, rest = result["error"].partition(" ")
        assert re.fullmatch(r"(invocation index \d+ )?" + ERROR, rest), result
        assert op in AUTOTUNER_OPS, f"failed on {op}, not on an autotuner op (another bug?): {result}"
        # the signature (test_signatures.py does the same on the CPU emulation's red run)
        assert_explained(failure_text(result), "autotune", "not-installed", isolated=True)
        assert_explained(failure_text(result), "autotune", "disabled", env=only_fix("autotune", False))
        assert result["report"]["acted"] == 0, result["report"]
    else:  # lenient replay (torch <= 2.12): autotuning re-executes under replay and nothing fails
        assert result["ok"] is True and result["grads_match"] is True, result
        assert result["coordesc_bench_during_backward"] > 0, f"autotuning did not run in recompute: {result}"


def test_recompute_after_cold_autotune_passes_with_fix(strict: bool) -> None:
    result = run_script("_gpu_repro.py", env=_env())
    assert result["ok"] is True, result
    assert result["frames_compiled_during_backward"] >= 1, f"recompute did not recompile: {result}"
    assert result["grads_match"] is True, result
    if strict:
        assert result["fix_state"] == "applied", result
        calls = result["calls_during_backward"]
        tuned = calls.get("bench", 0) + calls.get("autotune_to_one_config", 0)
        assert tuned > 0, f"autotuning did not run during recompute: {result}"
        assert sum(result["filtered_during_backward"].values()) > 0, result
        assert result["hidden_during_backward"].get("_CachedTorchDispatchMode", 0) > 0, result
        assert result["report"]["events"]["hid-modes"] > 0, result["report"]
    else:
        assert result["fix_state"] == "not-needed", result
        assert result["coordesc_bench_during_backward"] > 0, f"autotuning did not run in recompute: {result}"
