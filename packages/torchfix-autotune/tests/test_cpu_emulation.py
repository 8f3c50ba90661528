"""CPU emulation of the bug (BRIEF 2.4): a compiled callable that allocates on its first call, first
called during SAC recompute after a recompute-time recompile.

What this proves: the fix's wrapper (``torchfix_autotune.patch.filtered``, the factory installed on
``CachingAutotuner``) keeps dispatcher allocations made at an artifact's first call out of SAC's
strict replay. It does not run ``CachingAutotuner`` (CPU Inductor has no Triton autotuning); the
GPU tests in test_gpu.py do (the declared reproduction, ``torchfix_autotune.reproduction``).
"""

from __future__ import annotations

import pytest
from _autotune_helpers import compiled_code_runs_under_sac, run_script
from torchfix_core.testing import run_json_script

ERROR = "aten.empty.memory_format encountered during backward but not found in storage"
#: the declared reproduction's scenario (shipped: ``torchfix_autotune.reproduction``) on CPU Inductor
GPU_SCENARIO_ON_CPU = """
import json
from torchfix_autotune.reproduction import inductor_environment, run_scenario
with inductor_environment():
    print(json.dumps(run_scenario("cpu")))
"""
#: torch 2.10+: the recompute-time artifact's first call lands inside SAC's replay (stack depth 1);
#: 2.8/2.9: compiled code never runs under SAC's modes (Dynamo skips the frame: eager), only the
#: warm-up outside SAC calls the artifact
COLD_CALLS = [0, 1] if compiled_code_runs_under_sac() else [0]


def test_cpu_emulated_cold_autotune_in_recompute_fails_without_mode_filter(strict: bool) -> None:
    result = run_script("_emulation.py", "plain", env={"TORCHFIX_DISABLE": "autotune"})
    assert result["cold_call_stack_depths"] == COLD_CALLS, result  # the 2nd cold call ran inside replay
    if strict:
        assert result["ok"] is False, result
        assert result["error"] == ERROR, result
    else:  # lenient replay (torch <= 2.12): the extra ops are re-executed, nothing to fix
        assert result["ok"] is True and result["grads_match"] is True, result


def test_cpu_emulated_cold_autotune_in_recompute_passes_with_mode_filter() -> None:
    result = run_script("_emulation.py", "filtered")
    assert result["cold_call_stack_depths"] == COLD_CALLS, result
    assert result["ok"] is True, result
    assert result["grads_match"] is True, result


@pytest.mark.skipif(
    not compiled_code_runs_under_sac(),
    reason="SAC's modes do not declare ignore_compile_internals() here (torch 2.8/2.9): the filter keeps them, and compiled code never runs under them",
)
def test_gpu_scenario_recompiles_in_recompute_on_cpu_inductor() -> None:
    """Plumbing check of the declared GPU reproduction's scenario on CPU Inductor (no Triton, so no
    autotuning): the guard flip + cache clear makes recompute recompile, and the gradients match eager."""
    result = run_json_script(["-c", GPU_SCENARIO_ON_CPU])
    assert result["ok"] is True and result["grads_match"] is True, result
    assert result["frames_compiled_during_backward"] >= 1, result
