"""The two fixes share ``FSDPState._pre_forward``: they apply and revert in any order, each alone,
keep the release's Dynamo-disable decorator, and put every object back exactly (fresh interpreter,
``TORCHFIX_AUTOLOAD=0``, then ``torchfix_core.apply`` / ``revert``)."""

from __future__ import annotations

import pytest
from _util import CAST, UNSHARD, upstream_fixed
from torchfix_core.testing import run_json_script

UPSTREAM = upstream_fixed()  # this torch's own code, torchfix off

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


@pytest.mark.skipif(UPSTREAM["unshard"] or UPSTREAM["cast"], reason="a fix is upstream")
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
