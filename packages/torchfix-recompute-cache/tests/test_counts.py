"""What the report's counters of this package's two fixes count in a default configuration.

* recompute-cache, ``lru-turned-off``: once per process, at the first non-reentrant checkpoint
  (torch's default early stop, 3 training steps of two checkpointed calls of one compiled function:
  still 1); 0 when the program turned LRU off itself before its first checkpoint, as torchtitan
  0.3.0's ``ActivationCheckpointing.apply`` does (``_set_lru_cache(False)``), once ``torch._dynamo``
  is imported (the fix's trigger). A call made before that import is not seen on torch <= 2.14
  (the switch cannot be read there): the fix turns LRU off again (no change) and counts 1.
* budget-rng, ``saved-random-outputs``: once per partition it changed, at compile time: a compiled
  dropout function at ``activation_memory_budget = 0.5`` trained for 3 steps counts 1 (one graph,
  one partition); at torch's default budget (1) it counts 0.

Each case runs in a fresh interpreter with only that fix on (``only_fix``) and its own
``TORCHINDUCTOR_CACHE_DIR``; it skips where the fix is not applied on the running torch, after
checking that nothing was counted there.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from torchfix_core.testing import only_fix, run_json_script

#: two non-reentrant checkpoints call one compiled function per step, 3 steps (argv[1]: "self" turns
#: LRU off before the first checkpoint, as torchtitan's AC does; "self-early" does so before
#: ``torch._dynamo`` is imported, before the fix is applied)
LRU_RUN = textwrap.dedent(
    """
    import json, sys
    import torch
    from torch.utils.checkpoint import checkpoint
    from torchfix_core.testing import report_of

    if sys.argv[1] == "self-early":
        torch._C._dynamo.eval_frame._set_lru_cache(False)  # before the fix is applied: not seen
    import torch._dynamo  # the fix's trigger (any compiling program has imported it by now)
    if sys.argv[1] == "self":
        torch._C._dynamo.eval_frame._set_lru_cache(False)
    torch.manual_seed(0)
    w = torch.randn(8, 8, requires_grad=True)
    f = torch.compile(lambda x, w: torch.sin(x @ w).cos(), backend="aot_eager")
    for step in range(3):
        x = torch.randn(4, 8)
        h = checkpoint(f, x, w, use_reentrant=False)
        checkpoint(f, h, w, use_reentrant=False).sum().backward()
    print(json.dumps({"report": report_of("recompute-cache")}))
    """
)

#: y = sin(2 * dropout(x)) compiled (aot_eager, fullgraph), 3 forward/backward steps at budget argv[1]
BUDGET_RUN = textwrap.dedent(
    """
    import json, sys
    import torch, torch._functorch.config as functorch_config
    import torch.nn.functional as F
    from torchfix_core.testing import report_of

    functorch_config.activation_memory_budget = float(sys.argv[1])
    torch.manual_seed(0)
    f = torch.compile(lambda x: F.dropout(x, p=0.5, training=True).mul(2.0).sin(), backend="aot_eager", fullgraph=True)
    x = torch.randn(64, requires_grad=True)
    for step in range(3):
        f(x).sum().backward()
    print(json.dumps({"report": report_of("budget-rng")}))
    """
)


def _run(script: str, arg: str, fix_id: str, tmp_path: Path) -> dict[str, Any]:
    env = {**only_fix(fix_id, True), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    report: dict[str, Any] = run_json_script(["-c", script, arg], env=env, timeout=300)["report"]
    if report["state"] != "applied":
        assert report["acted"] == 0, report
        pytest.skip(f"{fix_id} is {report['state']} on this torch: counted nothing, as it should")
    return report


@pytest.mark.parametrize(
    ("who", "expected"),
    [("fix", 1), ("self", 0), ("self-early", 1)],
    ids=["first-checkpoint", "program-set-it", "program-set-it-before-dynamo"],
)
def test_lru_turned_off_counts_once_per_process(who: str, expected: int, tmp_path: Path) -> None:
    report = _run(LRU_RUN, who, "recompute-cache", tmp_path)
    assert report["events"] == {"lru-turned-off": expected}, report


@pytest.mark.parametrize(("budget", "expected"), [("0.5", 1), ("1.0", 0)], ids=["budget-0.5", "default-budget"])
def test_saved_random_outputs_counts_once_per_partition_not_per_step(
    budget: str, expected: int, tmp_path: Path
) -> None:
    report = _run(BUDGET_RUN, budget, "budget-rng", tmp_path)
    assert report["events"] == {"saved-random-outputs": expected}, report
