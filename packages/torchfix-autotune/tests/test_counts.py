"""What autotune's ``hid-modes`` counts: one per outermost wrapped call that found a mode to hide.

CPU Inductor has no Triton autotuner, so, as in ``_emulation.py``, stand-ins go through
``torchfix_autotune.patch.filtered`` (the wrapper factory the fix installs on ``CachingAutotuner``)
and are nested as torch nests the real methods: ``autotune_to_one_config`` calls ``bench`` once per
config (three here), ``coordinate_descent_tuning`` (off by default) is a separate call after it.
Each stand-in dispatches what a cold autotuner does (an allocation and a ``zero_``). In a fresh
interpreter with only autotune on:

* outside any dispatch mode: nothing counted;
* inside a SAC forward (``create_selective_checkpoint_contexts``' recording mode, no recompute at
  all): one tuning counts 1, the three nested ``bench`` calls find nothing left to hide and are not
  counted; with coordinate descent on as well, that kernel counts 2.

Skips where the fix is not applied on the running torch, after checking that nothing was counted.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
import torch
from torchfix_core.testing import only_fix, run_json_script

SCENARIO = textwrap.dedent(
    """
    import json
    import torch
    import torch._inductor.runtime.triton_heuristics  # the fix's trigger
    from torch.utils.checkpoint import CheckpointPolicy, create_selective_checkpoint_contexts
    from torchfix_core.testing import report_of

    def events():
        return report_of("autotune")

    out = {"state": events()["state"]}
    if out["state"] == "applied":
        from torchfix_autotune.patch import filtered

        def cold_work():
            torch.empty(1 << 10, dtype=torch.int32).zero_()

        bench = filtered(cold_work)

        def tune():
            for config in range(3):
                bench()

        autotune_to_one_config = filtered(tune)
        coordinate_descent_tuning = filtered(cold_work)

        def acted():
            return events()["acted"]

        before = acted()
        autotune_to_one_config()
        out["no_mode"] = acted() - before

        caching, _cached = create_selective_checkpoint_contexts(lambda ctx, op, *a, **k: CheckpointPolicy.MUST_SAVE)
        before = acted()
        with caching:
            autotune_to_one_config()
        out["sac_forward"] = acted() - before

        before = acted()
        with caching:
            autotune_to_one_config()
            coordinate_descent_tuning()
        out["sac_forward_with_coordinate_descent"] = acted() - before
    out["report"] = events()
    print(json.dumps(out))
    """
)


def test_hid_modes_counts_each_outermost_tuning_with_a_mode_to_hide() -> None:
    result: dict[str, Any] = run_json_script(["-c", SCENARIO], env=only_fix("autotune", True), timeout=300)
    if result["state"] != "applied":
        assert result["report"]["acted"] == 0, result
        pytest.skip(f"autotune is {result['state']} on torch {torch.__version__}: counted nothing, as it should")
    assert result["no_mode"] == 0, result
    assert result["sac_forward"] == 1, result
    assert result["sac_forward_with_coordinate_descent"] == 2, result
    assert result["report"]["events"] == {"hid-modes": 3}, result
