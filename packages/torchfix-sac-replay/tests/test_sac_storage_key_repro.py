"""pytorch/pytorch#175258 on the running torch: SAC shares one queue among compiled regions.

With ``wrap_inductor_compiled_regions`` on and a SAC policy saving ``inductor_compiled_code``, a
checkpointed function whose recompute skips a compiled region the forward ran (its result was cached
in a dict) gets the skipped region's saved outputs for the next region: torch 2.10/2.11 raise
``Only Tensors of floating point and complex dtype can require gradients`` (DTensor), 2.12
``IndexError: tuple index out of range``, and with matching shapes the gradient is silently wrong.
torch 2.13+ keys the storage per region (``_sac_storage_key``, PR #183080). Each case runs in a fresh
interpreter (``TORCHFIX_SAC_STORAGE_KEY_ENABLED=0`` = without the fix); ``bug_present`` is the
tests' own check (``conftest.storage_key_bug_present``: the ``replay`` scenario), not the fix's probe;
the declared reproduction (``torchfix_sac_replay.reproduction:sac_storage_key``) is upstream's case.
"""

from __future__ import annotations

import pytest
import torch._higher_order_ops.wrap
from conftest import STORAGE_KEY as FIX_ID
from conftest import run_storage_key as run
from conftest import storage_key_bug_present as bug_present
from torchfix_core.testing import only_fix, reproduce, run_json_script, state_to_expect

#: torch 2.8/2.9 have no inductor_compiled_code HOP (compiled code never reaches SAC as one op): nothing
#: to reproduce; the fix is out-of-range there and, forced, not-needed (the contract's forced case)
pytestmark = pytest.mark.skipif(
    not hasattr(torch._higher_order_ops.wrap, "inductor_compiled_code"), reason="torch has no inductor_compiled_code"
)

#: What SAC's mix-up turns into, per torch release (2.10/2.11 and 2.12 layouts).
SYMPTOMS = {
    "builtins.RuntimeError": "Only Tensors of floating point and complex dtype can require gradients",
    "builtins.IndexError": "tuple index out of range",
}


@pytest.fixture(scope="module")
def present() -> bool:
    return bug_present()


@pytest.fixture(scope="module")
def expected_state(present: bool) -> str:
    return state_to_expect(FIX_ID, present)


def test_sac_replay_mixes_compiled_regions_without_fix(present: bool) -> None:
    """The mechanism, without a compiler: region 2's replay returns region 1's saved output."""
    result = run("replay", fix=False)
    assert result["fix"] == "disabled"
    assert result["mixes_regions"] is present
    if present:
        assert result["replayed"] == 1.0, result


def test_sac_replay_keeps_compiled_regions_apart_with_fix(expected_state: str) -> None:
    result = run("replay", fix=True)
    assert result["fix"] == expected_state
    assert result["replayed"] == 2.0, result
    assert result["mixes_regions"] is False


def test_cached_value_fifo_mismatch_fails_without_fix(present: bool) -> None:
    """Upstream's regression test (test_sac_cached_value_fifo_mismatch) without the fix."""
    result = run("upstream", fix=False)
    assert result["fix"] == "disabled"
    if not present:
        assert result["ok"], result.get("traceback")  # torch 2.13+: keyed per region upstream
        return
    assert not result["ok"], "backward should have failed without the fix"
    assert result["error_type"] in SYMPTOMS, result.get("traceback")
    assert SYMPTOMS[result["error_type"]] in result["error"]


def test_cached_value_fifo_mismatch_passes_with_fix(expected_state: str) -> None:
    """Upstream's regression test with the fix: backward completes (upstream's assertion), and the
    gradient is the un-checkpointed program's."""
    result = run("upstream", fix=True)
    assert result["fix"] == expected_state
    assert result["ok"], result.get("traceback")
    assert result["grad_match"], "gradient differs from the un-checkpointed program"


def test_cached_region_gives_wrong_gradient_without_fix(present: bool) -> None:
    """Same count, shapes and dtype of outputs: no error, a wrong gradient."""
    result = run("silent", fix=False)
    assert result["fix"] == "disabled"
    assert result["ok"], result.get("traceback")
    assert result["grad_match"] is not present, result


def test_cached_region_gives_right_gradient_with_fix(expected_state: str) -> None:
    result = run("silent", fix=True)
    assert result["fix"] == expected_state
    assert result["ok"], result.get("traceback")
    assert result["grad_match"], result


_UNPATCHED = r"""
import json
import torch, torch._dynamo, torchfix_core
import torch.utils.checkpoint as ckpt
from torchfix_core.testing import live_patches
row = next(r for r in torchfix_core.status() if r.id == "sac-storage-key")
print(json.dumps({"state": str(row.state), "reason": row.reason, "patches": len(live_patches("sac-storage-key")),
                  "upstream_key": callable(getattr(ckpt, "_sac_storage_key", None))}))
"""


def test_stays_out_of_the_way_where_torch_keys_per_region(present: bool) -> None:
    """torch 2.13+ (``_sac_storage_key``): the fix reports not-needed and patches nothing."""
    if present:
        pytest.skip("this torch shares one SAC queue among compiled regions: the fix is needed here")
    got = run_json_script(["-c", _UNPATCHED], env=only_fix(FIX_ID, True), timeout=300)
    assert got["upstream_key"] is True
    assert got["state"] == state_to_expect(FIX_ID, False), got
    if got["state"] == "not-needed":
        assert "_sac_storage_key" in got["reason"]
    assert got["patches"] == 0, got


#: applied while another dispatch mode is active, as when a fix's trigger is first imported inside
#: another fix's probe (autotune's replay probe holds a counting mode; seen on an H200, torch 2.11)
UNDER_A_MODE = """
import json, torch
import torchfix_core
from torchfix_core.probes import counting_mode
with counting_mode():
    import torch._dynamo  # the trigger, first imported under the mode
    torchfix_core.apply(only=[{fix!r}])
row = next(r for r in torchfix_core.status() if r.id == {fix!r})
print(json.dumps({{"state": str(row.state), "reason": row.reason}}))
"""


def test_probe_is_not_confused_by_an_active_dispatch_mode(expected_state: str) -> None:
    result = run_json_script(["-c", UNDER_A_MODE.format(fix=FIX_ID)], env={"TORCHFIX_AUTOLOAD": "0"})
    assert result["state"] == expected_state, result


# -- the declared reproduction (FixSpec.reproduction: what torchfix-doctor verify runs) ------------------
#: the declared reproduction's measure where backward completed with the right gradient
COMPLETES = "backward completes; gradient equals the un-checkpointed program's (max abs error 0)"


def test_declared_reproduction_shows_the_bug_without_fix_and_not_with_it(present: bool) -> None:
    """The spec's reproduction (upstream's regression test), run as ``verify`` runs it (``python -m
    torchfix_core.reproduction``): the recompute's error without the fix, the right gradient with it."""
    if not present:
        pytest.skip("torch keys SAC's storage per compiled region here: no bug to show")
    off, on = reproduce(FIX_ID, False), reproduce(FIX_ID, True)
    assert off["outcome"]["result"] == "observed" and off["state"] == "disabled", off
    kind, _, message = off["outcome"]["measure"].partition(": ")
    assert SYMPTOMS[f"builtins.{kind}"] in message and message.endswith("(in the checkpoint's recompute)"), off
    assert on["outcome"] == {"result": "not-observed", "measure": COMPLETES, "detail": ""}, on
    assert on["state"] == "applied", on


def test_declared_reproduction_shows_no_bug_where_torch_keys_per_region(present: bool) -> None:
    if present:
        pytest.skip("this torch shares one SAC queue among compiled regions")
    off = reproduce(FIX_ID, False)
    assert off["outcome"] == {"result": "not-observed", "measure": COMPLETES, "detail": ""}, off
