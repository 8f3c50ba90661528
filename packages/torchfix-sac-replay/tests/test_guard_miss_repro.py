"""BRIEF section 3.4 on the running torch: a recompute-time guard miss on another thread.

The forward thread raised ``recompile_limit`` to 64 and the compiled block already holds 8 cache
entries; a guarded global flips between forward and backward, and backward runs on a
``threading.Thread`` (the CPU stand-in for the CUDA autograd worker). Without the fix the recompute
reads the default limit 8, Dynamo falls back to eager, and SAC's replay fails. Each case runs in a
fresh interpreter (``TORCHFIX_SAC_REPLAY_ENABLED=0`` = without the fix).
"""

from __future__ import annotations

import pytest
from conftest import scenario


@pytest.mark.parametrize("layout", ["checkpoint", "checkpoint_wrapper"])
def test_recompute_guard_miss_fails_without_fix(layout: str, bug_present: bool) -> None:
    args = ("--wrapper",) if layout == "checkpoint_wrapper" else ()
    result = scenario("guard_miss", *args, fix=False)
    assert result["fix"] == "disabled"
    assert result["backward_thread"] == "backward-thread"
    if not bug_present:
        assert result["ok"], result  # torch <= 2.11: global config, nothing to fix
        return
    assert not result["ok"], "the recompute should have failed without the fix"
    assert result["error_type"] == "builtins.RuntimeError"
    assert "aten.mm.default encountered during backward" in result["error"]
    assert "not found in storage" in result["error"]


@pytest.mark.parametrize("layout", ["checkpoint", "checkpoint_wrapper"])
def test_recompute_guard_miss_passes_with_fix(layout: str, expected_state: str) -> None:
    args = ("--wrapper",) if layout == "checkpoint_wrapper" else ()
    result = scenario("guard_miss", *args, fix=True)
    assert result["fix"] == expected_state
    assert result["ok"], result.get("traceback")
    assert result["grad_match"], "gradients differ from the un-checkpointed eager reference"


def test_recompute_guard_miss_on_forward_thread_passes_without_fix() -> None:
    """Control: the same program with backward on the forward's thread is fine without the fix."""
    result = scenario("guard_miss", "--same-thread", fix=False)
    assert result["ok"], result.get("traceback")
    assert result["grad_match"]


def test_recompile_limit_in_recompute_is_explained_with_fix(bug_present: bool) -> None:
    """The forward's own limit (9) is reached by the recompute's recompile: still an error with the fix
    (correctly: the forward's config says so), and the message says which limit and what to do."""
    if not bug_present:
        pytest.skip("the explanation is part of the fix, which is not applied on this torch")
    result = scenario("guard_miss", "--limit", "9", fix=True)
    assert not result["ok"]
    assert result["error_type"] == "builtins.RuntimeError"
    message = result["error"]
    assert message.startswith(result["cause"]), "the original message must be kept in front"
    assert "[torchfix sac-replay]" in message
    assert "recompile limit hit during recompute" in message
    assert "compiled forward replayed eagerly" in message
    assert "torch._dynamo.config.recompile_limit: forward 9, recompute thread 8" in message
    assert result["cause_type"] == "builtins.RuntimeError"
    assert "not found in storage" in result["cause"]
