"""Reproduction of pytorch#153354 / #187437 on the CPU with gloo (red without fsdp-recompute-unshard,
green with it) and the cases where it must stay out of the way; both bugs at once:
``test_composition.py``. Every run is a fresh interpreter that spawns its ranks (``_scenarios.py``);
"green" means gradients and losses of 3 SGD steps bit-identical to the same model trained without
checkpointing."""

from __future__ import annotations

from _util import MIXED_ERROR, RANKS, UNSHARD, alone, assert_green, assert_red, fixed_upstream, needs_bug, run
from torchfix_core.testing import state_to_expect

# -- pytorch#187437: checkpoint(m), fully_shard(m.fc1), (m(x1) * m(x2)).sum().backward() -----------------


@needs_bug(UNSHARD)
@RANKS
def test_nested_two_forwards_fails_without_fix(world: int) -> None:
    r = assert_red("unshard", world, UNSHARD, MIXED_ERROR)
    # "aten.addmm.default got mixed ..." (2.10), "aten.addmm.default: got mixed ..." (2.8, 2.9)
    assert r["error"].startswith("aten.addmm.default"), r["error"]


@needs_bug(UNSHARD)
@RANKS
def test_nested_two_forwards_passes_with_fix(world: int) -> None:
    assert_green(run("unshard", world, alone(UNSHARD, True)), fsdp_recompute_unshard="applied")


# -- out of the way ---------------------------------------------------------------------------------------


@fixed_upstream(UNSHARD)
def test_not_needed_where_fixed_upstream() -> None:
    """torch 2.11+: the probe finds upstream's unshard (``not-needed``; past the validated range the
    range check answers first: ``out-of-range``); the reproduction is green on torch alone."""
    unshard_state = state_to_expect(UNSHARD, bug_present=False)
    assert_green(run("unshard", 1, alone(UNSHARD, True)), fsdp_recompute_unshard=unshard_state)
