"""What fsdp-recompute-cast's two counters count in a default checkpoint and without early stop.

One gloo rank, two ``fully_shard`` blocks with ``MixedPrecisionPolicy(param_dtype=bfloat16,
output_dtype=float32)``, each block's call in a non-reentrant checkpoint, fp32 inputs, 3 steps: 6
recomputes. ``cast-inputs-in-recompute`` counts each of them. ``cast-output-in-recompute`` counts only
where the recompute runs a module to its end: torch's default checkpoint stops the recompute once the
last saved activation is back (``set_checkpoint_early_stop(True)``), before the module's post-forward
hook, so there it stays 0; with ``set_checkpoint_early_stop(False)`` it counts each recompute too.
Where torch carries upstream's fix (2.13+) neither counts (the hooks cast themselves).
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from _util import CAST, UPSTREAM_PR, carries_upstream_fix
from torchfix_core.testing import run_json_script

COUNT_RUN = textwrap.dedent(
    """
    import json, os, sys
    import torch, torch.distributed as dist
    from torch import nn
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop
    import torchfix_core
    from torchfix_core.tallies import tallies

    dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=0, world_size=1)
    torch.manual_seed(0)
    blocks = [nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 16)) for _ in range(2)]
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32, output_dtype=torch.float32)
    for block in blocks:
        fully_shard(block, mp_policy=policy)
    with set_checkpoint_early_stop(sys.argv[1] == "early-stop"):
        for step in range(3):
            x = torch.randn(4, 16)
            for block in blocks:
                x = x + checkpoint(block, x, use_reentrant=False)
            x.sum().backward()
    tally = tallies().get("fsdp-recompute-cast")
    state = {r.id: str(getattr(r.state, "value", r.state)) for r in torchfix_core.status()}
    print(json.dumps({"counts": dict(tally.counts) if tally else {}, "state": state.get("fsdp-recompute-cast")}))
    dist.destroy_process_group()
    """
)


def _counts(mode: str, rendezvous: Path) -> dict[str, Any]:
    return run_json_script(["-c", COUNT_RUN, mode, str(rendezvous)], timeout=300)


@pytest.mark.parametrize(
    ("mode", "outputs"), [("early-stop", 0), ("no-early-stop", 6)], ids=["default-early-stop", "no-early-stop"]
)
def test_counters_mean_what_the_page_says(mode: str, outputs: int, tmp_path: Path) -> None:
    result = _counts(mode, tmp_path / "rendezvous")
    if carries_upstream_fix(CAST):
        assert result["state"] == "not-needed", result
        assert not any(result["counts"].values()), result  # torch casts: the fix never acts
        pytest.skip(f"torch carries upstream PR {UPSTREAM_PR[CAST]}: counted nothing, as it should")
    assert result["state"] == "applied", result
    assert result["counts"] == {"cast-inputs-in-recompute": 6, "cast-output-in-recompute": outputs}, result
