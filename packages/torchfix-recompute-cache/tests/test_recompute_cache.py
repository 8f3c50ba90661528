"""Reproduction of pytorch#166926 on CPU (red without the fix, green with it) and the cases where the
fix must stay out of the way. Every scenario runs in a fresh interpreter
(``torchfix_recompute_cache.reproduction``, shipped with the declared reproduction): Dynamo's cache
and the LRU switch are process-wide."""

from __future__ import annotations

from typing import Any

import pytest
from torchfix_core.testing import only_fix, outside_validated_range, reproduce, run_json_script

#: the scenarios, shipped in the wheel with the declared reproduction (``python -m`` it)
SCENARIOS = "torchfix_recompute_cache.reproduction"
FIX_ID = "recompute-cache"
IN_RANGE = outside_validated_range(FIX_ID) is None


def run(scenario: str, fix: bool | None, backend: str = "aot_eager", **env: str) -> dict[str, Any]:
    """Run one scenario; ``fix`` True/False enables/disables only this fix, None leaves activation off."""
    switches = {"TORCHFIX_AUTOLOAD": "0"} if fix is None else only_fix(FIX_ID, fix)
    return run_json_script(["-m", SCENARIOS, scenario, backend], env={**switches, **env}, timeout=900)


def assert_recompute_error(r: dict[str, Any]) -> None:
    assert r["ok"] is False, f"the bug did not reproduce on torch {r['torch']}: {r}"
    assert r["error_type"] == "torch.utils.checkpoint.CheckpointError", r
    assert "Recomputed values" in r["error"] or "more tensors" in r["error"], r["error"]


def assert_green(r: dict[str, Any]) -> None:
    assert r["ok"] is True, f"{r.get('error_type')}: {r.get('error')}"
    assert r["grads_match"] is True, "gradients differ from the eager reference"
    assert r["state"] == "applied", r


needs_range = pytest.mark.skipif(not IN_RANGE, reason=f"torch outside {FIX_ID}'s validated range")


# -- pytorch#166926: two checkpointed blocks, one compiled function, the second block recompiles dynamic ---------


def test_two_checkpointed_blocks_fails_without_fix() -> None:
    r = run("two_checkpointed_blocks", fix=False)
    assert r["state"] == "disabled"
    assert_recompute_error(r)


@needs_range
def test_two_checkpointed_blocks_pass_with_fix() -> None:
    r = run("two_checkpointed_blocks", fix=True)
    assert_green(r)
    assert "off since the first non-reentrant activation checkpoint" in r["reason"], r["reason"]
    assert r["reorders"] is False  # the fix did act, process-wide


@pytest.mark.slow
def test_two_checkpointed_blocks_fails_without_fix_inductor() -> None:
    assert_recompute_error(run("two_checkpointed_blocks", fix=False, backend="inductor"))


@pytest.mark.slow
@needs_range
def test_two_checkpointed_blocks_pass_with_fix_inductor() -> None:
    assert_green(run("two_checkpointed_blocks", fix=True, backend="inductor"))


# -- why the switch stays off between regions: an uncheckpointed call recompiles between forward and recompute --


def test_uncheckpointed_call_between_forward_and_recompute_fails_without_fix() -> None:
    assert_recompute_error(run("checkpointed_then_plain", fix=False))


@needs_range
def test_uncheckpointed_call_between_forward_and_recompute_passes_with_fix() -> None:
    assert_green(run("checkpointed_then_plain", fix=True))


# -- the declared reproduction (FixSpec.reproduction: what torchfix-doctor verify runs) -----------------------

BUG_MEASURE = (
    "CheckpointError: torch.utils.checkpoint: Recomputed values for the following tensors have different "
    "metadata than during the forward pass"
)


def test_declared_reproduction_shows_the_bug_without_fix() -> None:
    """The spec's reproduction, run as ``verify`` runs it (``python -m torchfix_core.reproduction``),
    the fix disabled: the checkpoint's metadata error in block 1's recompute (every release with the
    bug, 2.8 included: the fix's range starts where torch has the switch)."""
    off = reproduce(FIX_ID, False)
    assert off["state"] == "disabled", off
    assert off["outcome"]["result"] == "observed", off
    assert off["outcome"]["measure"].startswith(BUG_MEASURE), off


@needs_range
def test_declared_reproduction_shows_no_bug_with_fix() -> None:
    on = reproduce(FIX_ID, True)
    assert on["state"] == "applied", on
    assert on["outcome"] == {
        "result": "not-observed",
        "measure": "the gradients of w, x1, x2 against eager (rtol 1e-05, atol 1e-06): max abs diff 0",
        "detail": "",
    }, on


# -- out of the way --------------------------------------------------------------------------------------------


@needs_range
def test_no_checkpoint_keeps_lru() -> None:
    """A process that compiles but never checkpoints keeps Dynamo's LRU reordering."""
    r = run("no_checkpoint", fix=True)
    assert r["state"] == "applied", r
    assert r["reorders"] is True
    assert "still on: no non-reentrant checkpoint forward yet" in r["reason"], r["reason"]


@needs_range
def test_program_that_sets_the_switch_is_left_alone() -> None:
    """The program's own ``_set_lru_cache(True)`` wins: LRU stays on after checkpoints (and the bug
    shows, as it would without torchfix: that is the program's choice)."""
    r = run("program_sets_switch", fix=True)
    assert r["reorders"] is True
    assert "left to the program: it called _set_lru_cache(True)" in r["reason"], r["reason"]
    assert_recompute_error(r)


@needs_range
def test_switch_already_off_before_apply() -> None:
    """LRU turned off by the program before torchfix applies: where the switch reports its state
    (torch 2.15) the probe reads it and the fix is not-needed; elsewhere it cannot be read, the fix
    applies, and turning it off again changes nothing. The reproduction passes either way."""
    r = run("switch_off_before_apply", fix=None)
    assert r["state"] == ("not-needed" if r["switch_reports"] else "applied"), r
    assert r["ok"] is True and r["grads_match"] is True, r
    assert r["reorders"] is False


@needs_range
def test_always_switch_turns_lru_off_at_apply() -> None:
    r = run("no_checkpoint", fix=True, TORCHFIX_RECOMPUTE_CACHE_ALWAYS="1")
    assert r["state"] == "applied" and r["reorders"] is False, r
    assert "TORCHFIX_RECOMPUTE_CACHE_ALWAYS=1" in r["reason"], r["reason"]


@needs_range
def test_checkpoint_inside_compile_still_works_with_fix() -> None:
    """compile(AC(fn)) (checkpoint traced as a higher-order op, fullgraph=True) is unaffected: no
    graph break from the wrapper, same gradients as eager."""
    r = run("checkpoint_inside_compile", fix=True)
    assert r["ok"] is True and r["grads_match"] is True, r


def _has_switch() -> bool:
    import torch

    return hasattr(getattr(torch._C, "_dynamo", None) and torch._C._dynamo.eval_frame, "_set_lru_cache")


@pytest.mark.skipif("_has_switch()", reason="torch has the LRU switch (2.10+): covered by the reproductions above")
def test_forced_without_the_switch_refuses_cleanly() -> None:
    """torch 2.8/2.9: the bug is there (the reproduction fails the same way) but there is no
    ``_set_lru_cache`` to keep the cache order with; forced by ``TORCHFIX_FORCE`` the fix is refused,
    patches nothing, and the program behaves as without torchfix."""
    r = run("two_checkpointed_blocks", fix=True, TORCHFIX_FORCE=FIX_ID)
    assert r["state"] == "failed", r
    assert "_set_lru_cache does not exist" in r["reason"], r["reason"]
    assert_recompute_error(r)


# -- activation stays cheap -------------------------------------------------------------------------------------

CHILD = r"""
import json
import torch, torchfix_core
x = torch.randn(3, requires_grad=True)
torch.utils.checkpoint.checkpoint(torch.sin, x, use_reentrant=False).sum().backward()
after = next(r for r in torchfix_core.status() if r.id == "recompute-cache")
print(json.dumps({"after": after.state, "reason": after.reason}))
"""


def test_first_checkpoint_of_the_process_is_covered() -> None:
    """The process's first ``checkpoint()`` imports Dynamo (torch 2.10-2.15) before it builds its
    hook, so the fix is applied in time to turn LRU off at that very checkpoint. (That ``import
    torch`` leaves the fix pending without importing Dynamo or the implementation is the contract's
    ``activated_at_import_torch`` case, in test_contract.py.)"""
    got = run_json_script(["-c", CHILD], env=only_fix(FIX_ID, True), timeout=300)
    if IN_RANGE:
        assert got["after"] == "applied", got
        assert "off since the first non-reentrant activation checkpoint" in got["reason"], got
    else:
        assert got["after"] == "out-of-range", got
