"""What fsdp-recompute-unshard's counter counts, with torch's default checkpoint settings.

pytorch#187437's shape (``reproduction.py``'s ``unshard``): a ``Block`` (``fc1``, ReLU, ``fc2``) with
``fully_shard`` on ``fc1`` only, one gloo rank, fp32, two forwards before one backward
(``(m(x1) * m(x2)).sum()``), 3 SGD steps. Checkpointed three ways: the composable
``torch.distributed._composable.checkpoint`` (the package's reproduction),
``torch.utils.checkpoint.checkpoint(m, x, use_reentrant=False)`` with torch's default early stop,
and the same with ``set_checkpoint_early_stop(False)``. The counted line runs in ``fc1``'s
pre-forward, at the start of the recompute, so the early stop (which ends a recompute once the last
saved activation is back) cannot skip it: ``unshard-in-recompute`` is 3 in every form, one
resharded recompute per step. Without the fix each form fails with the DTensor error (the bug is
not specific to the composable checkpoint). Where torch carries upstream's fix (2.11+) the scenario
trains on torch alone and nothing is counted.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from _util import MIXED_ERROR, UNSHARD, alone, carries_upstream_fix
from torchfix_core.testing import run_json_script, state_to_expect

STEPS = 3
FORMS = ("composable", "utils-early-stop", "utils-no-early-stop")

COUNT_RUN = textwrap.dedent(
    """
    import json, sys
    import torch, torch.distributed as dist
    from torch import nn
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop
    import torchfix_core
    from torchfix_core.testing import report_of

    form, rendezvous, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    dist.init_process_group("gloo", init_method="file://" + rendezvous, rank=0, world_size=1)
    mesh = init_device_mesh("cpu", (1,))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(16, 16)
            self.fc2 = nn.Linear(16, 16)

        def forward(self, x):
            return self.fc2(self.fc1(x).relu())

    torch.manual_seed(0)
    model = Block()
    if form == "composable":
        torch.distributed._composable.checkpoint(model)
        call = model
    else:
        call = lambda x: checkpoint(model, x, use_reentrant=False)  # noqa: E731
    fully_shard(model.fc1, mesh=mesh)
    optim = torch.optim.SGD(model.parameters(), lr=0.1)
    out = {"ok": True, "error": None}
    try:
        with set_checkpoint_early_stop(form != "utils-no-early-stop"):
            for step in range(steps):
                g = torch.Generator().manual_seed(step)
                x1 = torch.randn(4, 16, generator=g).requires_grad_()
                x2 = torch.randn(4, 16, generator=g).requires_grad_()
                optim.zero_grad()
                (call(x1) * call(x2)).sum().backward()
                optim.step()
    except RuntimeError as exc:
        out.update(ok=False, error=str(exc)[:300])
    out["report"] = report_of("fsdp-recompute-unshard")
    print(json.dumps(out))
    dist.destroy_process_group()
    """
)


def _run(form: str, fix: bool, tmp_path: Path) -> dict[str, Any]:
    argv = ["-c", COUNT_RUN, form, str(tmp_path / "rendezvous"), str(STEPS)]
    return run_json_script(argv, env=alone(UNSHARD, fix), timeout=300)


@pytest.mark.parametrize("form", FORMS)
def test_unshard_counter_counts_each_resharded_recompute_in_default_checkpoints(form: str, tmp_path: Path) -> None:
    result = _run(form, True, tmp_path)
    report = result["report"]
    if carries_upstream_fix(UNSHARD):
        assert result["ok"], result  # torch unshards in the recompute itself
        assert report["state"] == state_to_expect(UNSHARD, bug_present=False) and report["acted"] == 0, result
        return
    assert result["ok"] and report["state"] == "applied", result
    # one resharded recompute (the first forward's, after the second's post-backward resharded fc1) per step
    assert report["events"] == {"unshard-in-recompute": STEPS}, result


@pytest.mark.parametrize("form", FORMS)
def test_unshard_bug_reproduces_in_each_checkpoint_form_without_fix(form: str, tmp_path: Path) -> None:
    if carries_upstream_fix(UNSHARD):
        pytest.skip("torch carries upstream PR #171779: no red run here")
    result = _run(form, False, tmp_path)
    assert not result["ok"] and MIXED_ERROR in result["error"], result
    assert result["report"]["state"] == "disabled" and result["report"]["acted"] == 0, result
