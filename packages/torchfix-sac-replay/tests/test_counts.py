"""What the report's counters of this package's three fixes count in a default configuration.

* sac-replay, ``recompute-in-forward-context``: every recompute of a non-reentrant checkpoint frame
  built outside compilation, once per frame per backward, whether or not anything differed between
  the forward's context and the recompute's (an eager function, backward on the forward's own
  thread, is counted too); torch's default early stop and ``set_checkpoint_early_stop(False)`` alike.
  A checkpoint inside the compiled region (``torch.compile(checkpoint_wrapper(block))``) and a
  reentrant checkpoint are never counted. ``explained-replay-error``: once per SAC "not found in
  storage" error re-raised with the explanation.
* sac-storage-key, ``keyed-region-queue``: every ``inductor_compiled_code`` call dispatched through
  either SAC mode, whatever the policy decides for it: the regions the forward ran plus those the
  recompute ran (two and one in the reproductions: 3).
* backward-context, ``copied-context``: every compiled backward run from ``backward()`` or
  ``autograd.grad``, one thread or several: one per compiled graph per backward.

sac-replay's cases run in this process (the fix applied through the API, as test_config_carry.py
does); the others in fresh interpreters with only that fix on. Each skips where its fix is not
applied on the running torch, after checking that nothing was counted there.
"""

from __future__ import annotations

import textwrap
from typing import Any, Callable

import pytest
import torch
import torch._higher_order_ops.wrap
from conftest import run_storage_key, scenario, storage_key_bug_present
from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper
from torch.utils.checkpoint import checkpoint, set_checkpoint_early_stop
from torchfix_core.testing import only_fix, run_json_script

RECOMPUTE = "recompute-in-forward-context"


def _recomputes(step: Callable[[], None]) -> int:
    """How many ``recompute-in-forward-context`` events ``step()`` added in this process."""
    from torchfix_sac_replay.carry import COUNTS

    before = COUNTS[RECOMPUTE]
    step()
    return COUNTS[RECOMPUTE] - before


def _block(x: torch.Tensor) -> torch.Tensor:
    return torch.relu(x).sin().cos()


# -- sac-replay ------------------------------------------------------------------------------------


def test_each_recompute_counts_once_even_eager_on_the_forward_thread(fix_on: None) -> None:
    """Two eager checkpoints per step, backward on the forward's thread (nothing to carry), 3 steps."""
    x = torch.randn(4, 8, requires_grad=True)

    def steps() -> None:
        for _ in range(3):
            y = checkpoint(_block, x, use_reentrant=False)
            checkpoint(_block, y, use_reentrant=False).sum().backward()

    assert _recomputes(steps) == 6


@pytest.mark.parametrize("early_stop", [True, False], ids=["default-early-stop", "no-early-stop"])
def test_recompute_counts_once_per_frame_with_or_without_early_stop(fix_on: None, early_stop: bool) -> None:
    x = torch.randn(4, 8, requires_grad=True)

    def step() -> None:
        with set_checkpoint_early_stop(early_stop):
            checkpoint(_block, x, use_reentrant=False).sum().backward()

    assert _recomputes(step) == 1


def test_checkpoint_inside_the_compiled_region_is_not_counted(fix_on: None) -> None:
    """torch.compile(checkpoint_wrapper(block)): the recompute runs inside the compiled backward."""
    block = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    compiled = torch.compile(checkpoint_wrapper(block), backend="aot_eager")
    x = torch.randn(4, 8, requires_grad=True)
    assert _recomputes(lambda: compiled(x).sum().backward()) == 0
    eager = checkpoint_wrapper(block)
    assert _recomputes(lambda: eager(x).sum().backward()) == 1  # the same block, eager: counted


def test_reentrant_checkpoint_is_not_counted(fix_on: None) -> None:
    block = checkpoint_wrapper(torch.nn.Linear(8, 8), checkpoint_impl=CheckpointImpl.REENTRANT)
    x = torch.randn(4, 8, requires_grad=True)
    assert _recomputes(lambda: block(x).sum().backward()) == 0


def test_explained_replay_error_counts_once_per_error(bug_present: bool) -> None:
    """``eager_replay`` (a compiled forward replayed eagerly): one recompute, one explained error."""
    result = scenario("eager_replay", fix=True)
    if not bug_present:
        assert result["report"]["acted"] == 0, result["report"]
        pytest.skip("sac-replay is not applied on this torch: counted nothing, as it should")
    assert not result["ok"] and "[torchfix sac-replay]" in result["error"], result
    assert result["report"]["events"] == {RECOMPUTE: 1, "explained-replay-error": 1}, result["report"]


# -- sac-storage-key -------------------------------------------------------------------------------
needs_hop = pytest.mark.skipif(
    not hasattr(torch._higher_order_ops.wrap, "inductor_compiled_code"), reason="torch has no inductor_compiled_code"
)


@pytest.fixture(scope="module")
def storage_key_present() -> bool:
    return storage_key_bug_present()


@needs_hop
@pytest.mark.parametrize("scenario", ["replay", "replay_recompute"], ids=["save", "recompute"])
def test_every_region_call_through_sac_is_counted_whatever_the_policy(storage_key_present: bool, scenario: str) -> None:
    """Two regions recorded by SAC, the second replayed, under a policy that saves the regions
    (``replay``) or recomputes them (``replay_recompute``)."""
    result = run_storage_key(scenario, fix=True)
    if not storage_key_present:
        assert result["report"]["acted"] == 0, result
        pytest.skip("sac-storage-key is not applied on this torch: counted nothing, as it should")
    assert result["replayed"] == 2.0, result
    assert result["report"]["events"] == {"keyed-region-queue": 3}, result  # 2 recorded + 1 replayed


@needs_hop
def test_compiled_regions_of_a_checkpoint_are_counted_in_forward_and_recompute(storage_key_present: bool) -> None:
    """``silent``: the forward runs two compiled regions, the recompute one (the other's result is cached)."""
    if not storage_key_present:
        pytest.skip("sac-storage-key is not applied on this torch")
    result = run_storage_key("silent", fix=True)
    assert result["ok"] and result["grad_match"], result
    assert result["report"]["events"] == {"keyed-region-queue": 3}, result["report"]


# -- backward-context ------------------------------------------------------------------------------
#: one compiled function (aot_eager), backward on this one thread: 3 ``backward()`` steps, one
#: ``autograd.grad``, one call under no_grad (no backward)
BACKWARDS = textwrap.dedent(
    """
    import json
    import torch, torch._dynamo
    from torchfix_core.testing import report_of

    f = torch.compile(lambda x: (x.sin() * 2).sum(), backend="aot_eager", fullgraph=True)
    x = torch.randn(8, requires_grad=True)
    for _ in range(3):
        f(x).backward()
    torch.autograd.grad(f(x), x)
    with torch.no_grad():
        f(x)
    print(json.dumps({"report": report_of("backward-context")}))
    """
)


def test_every_compiled_backward_counts_on_one_thread_too() -> None:
    result = run_json_script(["-c", BACKWARDS], env=only_fix("backward-context", True))
    report: dict[str, Any] = result["report"]
    if report["state"] != "applied":
        assert report["acted"] == 0, report
        pytest.skip(f"backward-context is {report['state']} on torch {torch.__version__}: counted nothing")
    assert report["events"] == {"copied-context": 4}, report
