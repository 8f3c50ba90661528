"""Reproduction of pytorch#153354 / #187437 on the CPU with gloo (red without fsdp-recompute-unshard,
green with it), the composition with fsdp-recompute-cast, and the cases where it must stay out of
the way. Every run is a fresh interpreter that spawns its ranks (``_scenarios.py``); "green" means
gradients and losses of 3 SGD steps bit-identical to the same model trained without checkpointing."""

from __future__ import annotations

import pytest
from _util import (
    CAST,
    DTYPE_ERROR,
    MIXED_ERROR,
    RANKS,
    UNSHARD,
    alone,
    assert_fails,
    assert_green,
    assert_red,
    both,
    run,
    upstream_fixed,
)
from torchfix_core.testing import state_to_expect

UPSTREAM = upstream_fixed()  # this torch's own code, torchfix off
needs_bug = pytest.mark.skipif(UPSTREAM["unshard"], reason="torch carries upstream PR #171779")
fixed_upstream = pytest.mark.skipif(not UPSTREAM["unshard"], reason="torch lacks upstream PR #171779")
needs_both_bugs = pytest.mark.skipif(UPSTREAM["unshard"] or UPSTREAM["cast"], reason="torch carries an upstream fix")


# -- pytorch#187437: checkpoint(m), fully_shard(m.fc1), (m(x1) * m(x2)).sum().backward() -----------------


@needs_bug
@RANKS
def test_nested_two_forwards_fails_without_fix(world: int) -> None:
    r = assert_red("unshard", world, UNSHARD, MIXED_ERROR)
    # "aten.addmm.default got mixed ..." (2.10), "aten.addmm.default: got mixed ..." (2.8, 2.9)
    assert r["error"].startswith("aten.addmm.default"), r["error"]


@needs_bug
@RANKS
def test_nested_two_forwards_passes_with_fix(world: int) -> None:
    assert_green(run("unshard", world, alone(UNSHARD, True)), fsdp_recompute_unshard="applied")


# -- both bugs at once (nested, two forwards, bf16 param_dtype with an fp32 output_dtype) -----------------


@needs_both_bugs
def test_nested_two_forwards_bf16_fails_without_fixes() -> None:
    assert_fails(run("both", 1, both(False)), MIXED_ERROR)


@needs_both_bugs
@pytest.mark.parametrize("off", [CAST, UNSHARD])
def test_nested_two_forwards_bf16_fails_with_one_fix_disabled(off: str) -> None:
    """Each fix is disabled alone (``TORCHFIX_DISABLE=<id>``): the other's bug shows."""
    r = run("both", 1, {"TORCHFIX_DISABLE": off})
    assert r["states"][off] == "disabled" and r["states"][UNSHARD if off == CAST else CAST] == "applied", r
    assert_fails(r, DTYPE_ERROR if off == CAST else MIXED_ERROR)


@needs_both_bugs
@RANKS
def test_nested_two_forwards_bf16_passes_with_fixes(world: int) -> None:
    assert_green(run("both", world, both(True)), fsdp_recompute_cast="applied", fsdp_recompute_unshard="applied")


@needs_both_bugs
@pytest.mark.parametrize("order", [f"{CAST},{UNSHARD}", f"{UNSHARD},{CAST}"])
def test_modules_sharded_before_apply_pass_with_fixes(order: str) -> None:
    """``TORCHFIX_AUTOLOAD=0``: sharded first, then both fixes applied one by one, in either order."""
    r = run("both", 1, {"TORCHFIX_AUTOLOAD": "0"}, "--late-apply", order)
    assert_green(r, fsdp_recompute_cast="applied", fsdp_recompute_unshard="applied")


@needs_both_bugs
def test_revert_of_one_fix_reaches_modules_sharded_while_applied() -> None:
    """Both applied, model sharded, then unshard reverted (the lower layer, cast still applied)."""
    r = run("both", 1, both(True), "--late-revert", UNSHARD)
    assert r["states"] == {CAST: "applied", UNSHARD: "disabled"}, r
    assert_fails(r, MIXED_ERROR)


# -- out of the way ---------------------------------------------------------------------------------------


@fixed_upstream
def test_not_needed_where_fixed_upstream() -> None:
    """torch 2.11+: the probe finds upstream's unshard (``not-needed``; past the validated range the
    range check answers first: ``out-of-range``); the reproduction is green on torch alone."""
    unshard_state = state_to_expect(UNSHARD, bug_present=False)
    assert_green(run("unshard", 1, alone(UNSHARD, True)), fsdp_recompute_unshard=unshard_state)
