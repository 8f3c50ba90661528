"""The two fixes together. Both bugs at once (nested, two forwards, bf16 ``param_dtype`` with an fp32
``output_dtype``): red without the fixes and with either alone, green with both, also for modules
sharded before ``apply()`` and after one fix's ``revert()`` (spawned gloo ranks, ``torchfix_fsdp_recompute.reproduction``).
Their shared patch point ``FSDPState._pre_forward``: they apply and revert in any order, each alone,
keep the release's Dynamo-disable decorator, and put every object back exactly (fresh interpreter,
``TORCHFIX_AUTOLOAD=0``, then ``torchfix_core.apply`` / ``revert``)."""

from __future__ import annotations

import pytest
from _util import CAST, DTYPE_ERROR, MIXED_ERROR, RANKS, UNSHARD, assert_fails, assert_green, both, needs_bug, run
from torchfix_core.testing import run_json_script

# -- both bugs at once: the reproduction ---------------------------------------------------------------


@needs_bug(CAST, UNSHARD)
def test_nested_two_forwards_bf16_fails_without_fixes() -> None:
    assert_fails(run("both", 1, both(False)), MIXED_ERROR)


@needs_bug(CAST, UNSHARD)
@pytest.mark.parametrize("off", [CAST, UNSHARD])
def test_nested_two_forwards_bf16_fails_with_one_fix_disabled(off: str) -> None:
    """Each fix is disabled alone (``TORCHFIX_DISABLE=<id>``): the other's bug shows."""
    r = run("both", 1, {"TORCHFIX_DISABLE": off})
    assert r["states"][off] == "disabled" and r["states"][UNSHARD if off == CAST else CAST] == "applied", r
    assert_fails(r, DTYPE_ERROR if off == CAST else MIXED_ERROR)


@needs_bug(CAST, UNSHARD)
@RANKS
def test_nested_two_forwards_bf16_passes_with_fixes(world: int) -> None:
    assert_green(run("both", world, both(True)), {CAST: "applied", UNSHARD: "applied"})


@needs_bug(CAST, UNSHARD)
@pytest.mark.parametrize("order", [f"{CAST},{UNSHARD}", f"{UNSHARD},{CAST}"])
def test_modules_sharded_before_apply_pass_with_fixes(order: str) -> None:
    """``TORCHFIX_AUTOLOAD=0``: sharded first, then both fixes applied one by one, in either order."""
    r = run("both", 1, {"TORCHFIX_AUTOLOAD": "0"}, "--late-apply", order)
    assert_green(r, {CAST: "applied", UNSHARD: "applied"})


@needs_bug(CAST, UNSHARD)
def test_revert_of_one_fix_reaches_modules_sharded_while_applied() -> None:
    """Both applied, model sharded, then unshard reverted (the lower layer, cast still applied)."""
    r = run("both", 1, both(True), "--late-revert", UNSHARD)
    assert r["states"] == {CAST: "applied", UNSHARD: "disabled"}, r
    assert_fails(r, MIXED_ERROR)


# -- the shared patch point: apply and revert in any order ----------------------------------------------


CHILD = r"""
import json, sys
import torch, torchfix_core
import torch.distributed.fsdp
from torch.distributed.fsdp._fully_shard._fsdp_state import FSDPState
from torchfix_fsdp_recompute import probes

def snapshot():
    pre, post = FSDPState.__dict__["_pre_forward"], FSDPState.__dict__["_post_forward"]
    return {"pre": pre, "post": post, "pre_code": pre.__code__, "pre_cell": pre.__closure__[0].cell_contents,
            "post_cell": post.__closure__[0].cell_contents, "pre_wrapped": pre.__wrapped__,
            "post_wrapped": post.__wrapped__, "inner_code": probes.innermost(pre.__wrapped__).__code__}

def behaviour():
    # through what the decorator calls: torchfix's wrappers included
    return {"casts": list(probes.recompute_casts(wrappers=True)), "unshards": probes.recompute_unshards(wrappers=True)}

original = snapshot()
steps = []
for action, fix_id in (step.split(":") for step in sys.argv[1].split(",")):
    getattr(torchfix_core, action)(only=[fix_id])
    now = snapshot()
    steps.append({"after": f"{action} {fix_id}",
                  "states": {r.id: str(r.state) for r in torchfix_core.status() if r.id in ("fsdp-recompute-cast", "fsdp-recompute-unshard")},
                  "decorator_kept": now["pre"] is original["pre"] and now["post"] is original["post"]
                                    and now["pre_code"] is original["pre_code"],
                  "wrapped_is_called": now["pre_wrapped"] is now["pre_cell"] and now["post_wrapped"] is now["post_cell"],
                  **behaviour()})
end = snapshot()
print(json.dumps({"steps": steps, "restored": all(end[k] is original[k] for k in original)}))
"""

ORDERS = {
    "cast_first_revert_cast_first": [f"apply:{CAST}", f"apply:{UNSHARD}", f"revert:{CAST}", f"revert:{UNSHARD}"],
    "cast_first_revert_unshard_first": [f"apply:{CAST}", f"apply:{UNSHARD}", f"revert:{UNSHARD}", f"revert:{CAST}"],
    "unshard_first_revert_cast_first": [f"apply:{UNSHARD}", f"apply:{CAST}", f"revert:{CAST}", f"revert:{UNSHARD}"],
    "unshard_first_revert_unshard_first": [f"apply:{UNSHARD}", f"apply:{CAST}", f"revert:{UNSHARD}", f"revert:{CAST}"],
}


@needs_bug(CAST, UNSHARD)
@pytest.mark.parametrize("order", sorted(ORDERS))
def test_fixes_compose_in_any_apply_and_revert_order(order: str) -> None:
    got = run_json_script(["-c", CHILD, ",".join(ORDERS[order])], env={"TORCHFIX_AUTOLOAD": "0"}, timeout=300)
    applied = {CAST: False, UNSHARD: False}
    states = {CAST: "pending", UNSHARD: "pending"}  # AUTOLOAD=0: pending until apply()
    for step, action in zip(got["steps"], ORDERS[order]):
        verb, fix_id = action.split(":")
        applied[fix_id] = verb == "apply"
        states[fix_id] = "applied" if verb == "apply" else "disabled"
        assert step["states"] == states, step
        assert step["decorator_kept"] is True, step  # the release's Dynamo-disable wrapper is untouched
        assert step["wrapped_is_called"] is True, step  # __wrapped__ names what the decorator calls
        assert step["casts"] == [applied[CAST]] * 2, step
        assert step["unshards"] is applied[UNSHARD], step
    assert got["restored"] is True, got
