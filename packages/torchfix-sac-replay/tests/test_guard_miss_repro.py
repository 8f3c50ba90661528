"""BRIEF section 3.4 on the running torch: a recompute-time guard miss on another thread.

The forward thread raised ``recompile_limit`` to 64 and the compiled block already holds 8 cache
entries; a guarded global flips between forward and backward, and backward runs on a
``threading.Thread`` (the CPU stand-in for the CUDA autograd worker). Without the fix the recompute
reads the default limit 8, Dynamo falls back to eager, and SAC's replay fails. Each case runs in a
fresh interpreter (``TORCHFIX_SAC_REPLAY_ENABLED=0`` = without the fix); the declared reproduction
(``torchfix_sac_replay.reproduction:sac_replay``) is the ``checkpoint`` case.
"""

from __future__ import annotations

import pytest
from conftest import scenario
from torchfix_core.testing import reproduce

FIX_ID = "sac-replay"
#: the declared reproduction's measure where the gradients came out right
MATCHED = "backward on a second thread after a recompute-time guard miss: gradients match the un-checkpointed eager"


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


# -- the declared reproduction (FixSpec.reproduction: what torchfix-doctor verify runs) ------------------


def test_declared_reproduction_shows_the_bug_without_fix_and_not_with_it(bug_present: bool) -> None:
    """The spec's reproduction, run as ``verify`` runs it (``python -m torchfix_core.reproduction``):
    SAC's "not found in storage" without the fix, gradients matching the eager reference with it."""
    if not bug_present:
        pytest.skip("config is process-global on this torch: no bug to show")
    off, on = reproduce(FIX_ID, False), reproduce(FIX_ID, True)
    assert off["outcome"]["result"] == "observed" and off["state"] == "disabled", off
    assert off["outcome"]["measure"].startswith("RuntimeError: aten.mm.default encountered during backward"), off
    assert off["outcome"]["measure"].endswith("not found in storage"), off
    assert on["outcome"]["result"] == "not-observed" and on["state"] == "applied", on
    assert on["outcome"]["measure"].startswith(MATCHED), on


def test_declared_reproduction_shows_no_bug_where_config_is_process_global(bug_present: bool) -> None:
    """torch <= 2.11: the recompute on another thread reads the same (process-global) config."""
    if bug_present:
        pytest.skip("this torch has per-context compiler config: the bug is present")
    off = reproduce(FIX_ID, False)
    assert off["outcome"]["result"] == "not-observed", off
    assert off["outcome"]["measure"].startswith(MATCHED), off
