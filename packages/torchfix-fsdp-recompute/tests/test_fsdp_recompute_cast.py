"""Reproduction of pytorch#159359 on the CPU with gloo (red without fsdp-recompute-cast, green with
it) and the cases where it must stay out of the way. Every run is a fresh interpreter that spawns
its ranks (``_scenarios.py``); "green" means gradients and losses of 3 SGD steps bit-identical to
the same model trained without checkpointing."""

from __future__ import annotations

from _util import (
    CAST,
    DTYPE_ERROR,
    RANKS,
    UNSHARD,
    alone,
    assert_fails,
    assert_green,
    assert_red,
    fixed_upstream,
    needs_bug,
    run,
)
from torchfix_core.testing import state_to_expect

# -- pytorch#159359: HF-style checkpoint around each fully_shard-ed block, bf16 param_dtype, fp32 input --


@needs_bug(CAST)
@RANKS
def test_hf_checkpoint_bf16_fails_without_fix(world: int) -> None:
    assert_red("cast", world, CAST, f"{DTYPE_ERROR}, but got Float and BFloat16")


@needs_bug(CAST)
@RANKS
def test_hf_checkpoint_bf16_passes_with_fix(world: int) -> None:
    assert_green(run("cast", world, alone(CAST, True)), fsdp_recompute_cast="applied")


# -- modules sharded before the fix is applied, and revert ---------------------------------------------


@needs_bug(CAST)
def test_modules_sharded_before_apply_pass_with_fix() -> None:
    """``TORCHFIX_AUTOLOAD=0``: the model is sharded (hooks bound), then ``apply()``: the bound
    hooks see the fix (it changes the function behind the decorator, not the class attribute)."""
    r = run("cast", 1, {"TORCHFIX_AUTOLOAD": "0", "TORCHFIX_DISABLE": UNSHARD}, "--late-apply", CAST)
    assert_green(r, fsdp_recompute_cast="applied")


@needs_bug(CAST)
def test_revert_reaches_modules_sharded_while_applied() -> None:
    """Sharded with the fix applied, then ``revert()``: the same modules fail as on plain torch."""
    r = run("cast", 1, alone(CAST, True), "--late-revert", CAST)
    assert r["states"][CAST] == "disabled"
    assert_fails(r, DTYPE_ERROR)


# -- out of the way ---------------------------------------------------------------------------------------


@fixed_upstream(CAST)
def test_not_needed_where_fixed_upstream() -> None:
    """torch 2.13+: the probe finds the casts in place (``not-needed``; past the validated range the
    range check answers first: ``out-of-range``); the reproduction is green on torch alone."""
    assert_green(run("cast", 1, alone(CAST, True)), fsdp_recompute_cast=state_to_expect(CAST, bug_present=False))
