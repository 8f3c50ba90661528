"""Activation stays cheap: nothing of this fix imports torch._dynamo until the user does.

That ``import torch`` leaves the fix pending without importing Dynamo or the implementation is the
contract's ``activated_at_import_torch`` case (test_contract.py); this adds the explain module, which
the error path imports."""

from __future__ import annotations

from torchfix_core.testing import only_fix, outside_validated_range, run_json_script

CHILD = r"""
import json, sys
import torch, torchfix_core
import torchfix_sac_replay.explain
light = "torch._dynamo" in sys.modules
import torch._dynamo
after = next(r for r in torchfix_core.status() if r.id == "sac-replay")
print(json.dumps({"light": light, "after": after.state, "reason": after.reason}))
"""


def test_explain_module_does_not_import_dynamo() -> None:
    got = run_json_script(["-c", CHILD], env=only_fix("sac-replay", True), timeout=300)
    assert got["light"] is False, "torchfix_sac_replay.explain imported torch._dynamo"
    in_range = outside_validated_range("sac-replay") is None
    assert got["after"] in (("applied", "not-needed") if in_range else ("out-of-range",)), got
