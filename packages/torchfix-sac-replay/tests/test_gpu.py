"""The real worker-thread case: plain ``backward()`` on CUDA tensors (the engine's device thread).

Run on a CUDA machine with torch, torchfix-core and torchfix-sac-replay installed:

    python -m pytest packages/torchfix-sac-replay/tests -m gpu -v

Each case runs in a fresh interpreter; "without the fix" is ``TORCHFIX_SAC_REPLAY_ENABLED=0``
(every other torchfix fix is disabled in both, see ``conftest.scenario``).
"""

from __future__ import annotations

import pytest
import torch
from conftest import scenario

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_cuda_recompute_runs_on_worker_thread_and_reads_default_config_without_fix(bug_present: bool) -> None:
    result = scenario("config_read", "--device", "cuda", fix=False)
    assert result["ok"], result.get("traceback")
    assert result["forward"]["thread"] == "MainThread"
    assert result["recompute"]["thread"] != "MainThread", "CUDA backward should recompute on the worker thread"
    expected = 8 if bug_present else 64
    assert result["recompute"]["recompile_limit"] == expected


def test_cuda_recompute_reads_forward_config_with_fix() -> None:
    result = scenario("config_read", "--device", "cuda", fix=True)
    assert result["ok"], result.get("traceback")
    assert result["recompute"]["thread"] != "MainThread"
    for key in ("recompile_limit", "capture_scalar_outputs", "dynamic_sources"):
        assert result["recompute"][key] == result["forward"][key], key


@pytest.mark.parametrize("layout", ["checkpoint", "checkpoint_wrapper"])
def test_cuda_recompute_guard_miss_fails_without_fix(layout: str, bug_present: bool) -> None:
    args = ["--device", "cuda"] + (["--wrapper"] if layout == "checkpoint_wrapper" else [])
    result = scenario("guard_miss", *args, fix=False)
    if not bug_present:
        assert result["ok"], result.get("traceback")
        return
    assert not result["ok"]
    assert result["error_type"] == "builtins.RuntimeError"
    assert "aten.mm.default encountered during backward" in result["error"]
    assert "not found in storage" in result["error"]


@pytest.mark.parametrize("layout", ["checkpoint", "checkpoint_wrapper"])
def test_cuda_recompute_guard_miss_passes_with_fix(layout: str) -> None:
    args = ["--device", "cuda"] + (["--wrapper"] if layout == "checkpoint_wrapper" else [])
    result = scenario("guard_miss", *args, fix=True)
    assert result["ok"], result.get("traceback")
    assert result["grad_match"]


def test_cuda_eager_replay_error_is_explained_with_fix(bug_present: bool) -> None:
    """The error raised on the worker thread reaches the caller with its type, message and cause."""
    if not bug_present:
        pytest.skip("fix not applied on this torch")
    result = scenario("eager_replay", "--device", "cuda", fix=True)
    assert not result["ok"]
    assert result["error_type"] == "builtins.RuntimeError"
    assert result["cause_type"] == "builtins.RuntimeError"
    assert "compiled forward replayed eagerly" in result["error"]
    assert result["error"].startswith(result["cause"])


def test_cuda_cold_autotune_in_recompute_is_explained_with_fix(bug_present: bool) -> None:
    """BRIEF 2.4 with torchfix-autotune disabled: sac-replay cannot prevent it but must name it."""
    # the strict-replay probe lives in torchfix-autotune (installed beside this fix in the GPU runs)
    probes = pytest.importorskip("torchfix_autotune.probes")

    result = scenario("cold_autotune", "--device", "cuda", fix=True)
    if not (bug_present and probes.sac_replay_behaviour().strict):
        # 2.11/2.12: lenient replay re-executes the autotuning ops (BRIEF section 2.1)
        assert result["ok"], result.get("traceback")
        return
    assert not result["ok"], "strict replay should reject the cold autotuning ops"
    assert result["error_type"] == "builtins.RuntimeError"
    assert "not found in storage" in result["cause"]
    assert "autotuning during recompute" in result["error"]
    assert "torchfix-autotune" in result["error"]
