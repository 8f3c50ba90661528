"""Each fix's reproduction on the CPU with gloo, red without the fix and green with it (pytorch#159359
for fsdp-recompute-cast, #153354 / #187437 for fsdp-recompute-unshard; ``_util.REPRODUCTIONS``), and
the cases where it must stay out of the way; both bugs at once: ``test_composition.py``. Every run
is a fresh interpreter that spawns its ranks (``torchfix_fsdp_recompute.reproduction``); "green" means gradients and losses
of 3 SGD steps bit-identical to the same model trained without checkpointing."""

from __future__ import annotations

import pytest
from _util import (
    CAST,
    DTYPE_ERROR,
    RANKS,
    REPRODUCTIONS,
    UNSHARD,
    alone,
    assert_fails,
    assert_green,
    assert_red,
    fixed_upstream,
    needs_bug,
    run,
)
from torchfix_core.testing import reproduce, state_to_expect

FIXES = (CAST, UNSHARD)
WITH_BUG = [pytest.param(fix_id, id=fix_id, marks=needs_bug(fix_id)) for fix_id in FIXES]
FIXED_UPSTREAM = [pytest.param(fix_id, id=fix_id, marks=fixed_upstream(fix_id)) for fix_id in FIXES]


@pytest.mark.parametrize("fix_id", WITH_BUG)
@RANKS
def test_fails_without_fix(fix_id: str, world: int) -> None:
    assert_red(fix_id, world)


@pytest.mark.parametrize("fix_id", WITH_BUG)
@RANKS
def test_passes_with_fix(fix_id: str, world: int) -> None:
    assert_green(run(REPRODUCTIONS[fix_id].scenario, world, alone(fix_id, True)), {fix_id: "applied"})


@pytest.mark.parametrize("fix_id", FIXED_UPSTREAM)
def test_not_needed_where_fixed_upstream(fix_id: str) -> None:
    """Where torch carries upstream's fix (cast: 2.13+, unshard: 2.11+) the probe finds it
    (``not-needed``; past the validated range the range check answers first: ``out-of-range``) and
    the reproduction is green on torch alone."""
    r = run(REPRODUCTIONS[fix_id].scenario, 1, alone(fix_id, True))
    assert_green(r, {fix_id: state_to_expect(fix_id, bug_present=False)})


# -- fsdp-recompute-cast: modules sharded before the fix is applied, and revert ---------------------------


@needs_bug(CAST)
def test_modules_sharded_before_apply_pass_with_fix() -> None:
    """``TORCHFIX_AUTOLOAD=0``: the model is sharded (hooks bound), then ``apply()``: the bound
    hooks see the fix (it changes the function behind the decorator, not the class attribute)."""
    r = run("cast", 1, {"TORCHFIX_AUTOLOAD": "0", "TORCHFIX_DISABLE": UNSHARD}, "--late-apply", CAST)
    assert_green(r, {CAST: "applied"})


@needs_bug(CAST)
def test_revert_reaches_modules_sharded_while_applied() -> None:
    """Sharded with the fix applied, then ``revert()``: the same modules fail as on plain torch."""
    r = run("cast", 1, alone(CAST, True), "--late-revert", CAST)
    assert r["states"][CAST] == "disabled"
    assert_fails(r, DTYPE_ERROR)


# -- the declared reproductions (FixSpec.reproduction: what torchfix-doctor verify runs) ------------------


@pytest.mark.parametrize("fix_id", WITH_BUG)
def test_declared_reproduction_shows_the_bug_without_fix_and_not_with_it(fix_id: str) -> None:
    """The spec's reproduction, run as ``verify`` runs it (``python -m torchfix_core.reproduction``):
    the bug's error without the fix, bit-identical training with it."""
    off, on = reproduce(fix_id, False), reproduce(fix_id, True)
    assert off["outcome"]["result"] == "observed" and off["state"] == "disabled", off
    assert REPRODUCTIONS[fix_id].error in off["outcome"]["measure"], off
    assert on["outcome"] == {
        "result": "not-observed",
        "measure": "3 steps' gradients and losses bit-identical to training without checkpointing",
        "detail": "",
    }, on
    assert on["state"] == "applied", on


@pytest.mark.parametrize("fix_id", FIXED_UPSTREAM)
def test_declared_reproduction_shows_no_bug_where_fixed_upstream(fix_id: str) -> None:
    off = reproduce(fix_id, False)
    assert off["outcome"]["result"] == "not-observed", off
