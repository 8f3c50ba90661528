"""What the report's counters of fp8-recompute and fp8-recompute-pairing count (TE's default
``te.checkpoint``: reentrant unless ``use_reentrant=False``; delayed scaling where FP8 is on).

* fp8-recompute, ``kept-recompute-state``: every entry of TE's ``activation_recompute_forward``
  with ``activation_recompute=True`` while FP8 is off, so twice per ``te.checkpoint`` call that is
  backpropagated (its forward and its recompute), both modes. That includes a callable that opens
  its own FP8 autocast (the bug) and equally a region that never uses FP8 at all (a plain function
  checkpointed through TE's path). A region entered inside an FP8 autocast counts nothing, nor does a
  module without TE modules (TE hands it to torch's checkpoint).
* fp8-recompute-pairing: ``kept-eval-module-state`` once per forward of an ``eval()`` TE module with
  delayed scaling inside a checkpoint region; ``ran-no-grad-checkpoint-directly`` once per
  ``te.checkpoint`` call under ``no_grad`` (FP8 or not); ``inherited-region-without-grad-inputs``
  once per reentrant call whose inputs do not require grad (FP8 or not; never non-reentrant).
  A training step with a training module counts none of them.

The script runs in a fresh interpreter with both fixes on (the package's defaults) and reads each
tally before and after each case. Needs TransformerEngine (``te_standins/make_env.py``); each fix's
cases skip where that fix is not applied, after checking that it counted nothing.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from _fp8_helpers import HERE, requires_te
from torchfix_core.testing import run_json_script

pytestmark = requires_te

CASES = textwrap.dedent(
    """
    import contextlib, json, sys
    sys.path.insert(0, sys.argv[1])
    import torch
    import te_scenarios
    import transformer_engine.pytorch as te
    import transformer_engine.pytorch.distributed as dist
    import torchfix_core
    from torchfix_core.testing import report_of
    from torchfix_fp8_recompute import reproduction as R

    on = te_scenarios.where()  # the reproduction's platform: here the CPU stand-in's
    held = contextlib.ExitStack()  # for the rest of the script
    held.enter_context(on.active())

    states = {r.id: str(r.state) for r in torchfix_core.status() if r.id.startswith("fp8-recompute")}
    out = {"states": states, "recompute": {}, "pairing": {}}

    def delta(counts, run):
        before = dict(counts)
        run()
        return {k: v - before.get(k, 0) for k, v in counts.items() if v != before.get(k, 0)}

    linear = torch.nn.Linear(4, 4)
    plain = lambda x: linear(x)  # a function: TE's own checkpoint path, no FP8 anywhere

    def outer_autocast(reentrant):
        dist.FP8GlobalStateManager.reset()
        layer = R.delayed_scaling_layer()("fp8", [], on.device)
        x = torch.full((4, 8), 0.5, device=on.device, requires_grad=True)
        with R.fp8_autocast():
            y = te.checkpoint(layer, x, use_reentrant=reentrant)
        y.sum().backward()

    if states.get("fp8-recompute") == "applied":
        from torchfix_fp8_recompute.patch import COUNTS
        for mode, reentrant in (("reentrant", True), ("nonreentrant", False)):
            cases = {
                "inner-autocast": lambda: R.recompute_steps("inner", reentrant, on.device, steps=1),
                "no-fp8-function": lambda: R.recompute_steps("nonfp8", reentrant, on.device, steps=1),
                "outer-autocast": lambda: outer_autocast(reentrant),
                "module-without-te": lambda: te.checkpoint(
                    linear, torch.randn(2, 4, requires_grad=True), use_reentrant=reentrant
                ).sum().backward(),
            }
            for name, run in cases.items():
                out["recompute"][f"{name}-{mode}"] = delta(COUNTS, run)

    if states.get("fp8-recompute-pairing") == "applied":
        from torchfix_fp8_recompute.pairing import COUNTS

        def no_grad_calls(reentrant):
            with torch.no_grad():
                for _ in range(2):
                    te.checkpoint(plain, torch.randn(2, 4), use_reentrant=reentrant)

        def no_grad_inputs(reentrant):
            for _ in range(2):
                te.checkpoint(plain, torch.randn(2, 4), use_reentrant=reentrant)

        for mode, reentrant in (("reentrant", True), ("nonreentrant", False)):
            cases = {
                "eval-module": lambda: R.eval_module(on, reentrant, False),
                "training-step": lambda: R.recompute_steps("inner", reentrant, on.device, steps=1),
                "no-grad-2-calls": lambda: no_grad_calls(reentrant),
                "no-grad-inputs-2-calls": lambda: no_grad_inputs(reentrant),
            }
            for name, run in cases.items():
                out["pairing"][f"{name}-{mode}"] = delta(COUNTS, run)

    out["reports"] = {fix: report_of(fix) for fix in ("fp8-recompute", "fp8-recompute-pairing")}
    print(json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def counted() -> dict[str, Any]:
    return run_json_script(["-c", CASES, str(HERE)], timeout=600)


def _applied(counted: dict[str, Any], fix_id: str) -> None:
    if counted["states"].get(fix_id) != "applied":
        assert counted["reports"][fix_id]["acted"] == 0, counted["reports"][fix_id]
        pytest.skip(f"{fix_id} is {counted['states'].get(fix_id)} with this TE: counted nothing")


@pytest.mark.parametrize("mode", ["reentrant", "nonreentrant"])
def test_recompute_counts_every_region_entered_with_fp8_off_forward_and_recompute(
    counted: dict[str, Any], mode: str
) -> None:
    _applied(counted, "fp8-recompute")
    got = counted["recompute"]
    assert got[f"inner-autocast-{mode}"] == {"kept-recompute-state": 2}, got  # the bug: forward + recompute
    assert got[f"no-fp8-function-{mode}"] == {"kept-recompute-state": 2}, got  # no FP8 at all: counted too
    assert got[f"outer-autocast-{mode}"] == {}, got  # FP8 on at entry: TE records the region itself
    assert got[f"module-without-te-{mode}"] == {}, got  # torch's checkpoint, not TE's


@pytest.mark.parametrize("mode", ["reentrant", "nonreentrant"])
def test_pairing_counts_each_kind_once_per_module_or_call(counted: dict[str, Any], mode: str) -> None:
    _applied(counted, "fp8-recompute-pairing")
    got = counted["pairing"]
    assert got[f"eval-module-{mode}"] == {"kept-eval-module-state": 1}, got
    assert got[f"training-step-{mode}"] == {}, got
    assert got[f"no-grad-2-calls-{mode}"] == {"ran-no-grad-checkpoint-directly": 2}, got
    without_grad_inputs = {"inherited-region-without-grad-inputs": 2} if mode == "reentrant" else {}
    assert got[f"no-grad-inputs-2-calls-{mode}"] == without_grad_inputs, got
