"""fsdp-offload-hook on the CPU: activation, probe decisions and what the wrapper does to
``FSDPParam.pin_memory`` around ``foreach_reduce``, on real ``fully_shard`` objects (gloo, one rank).

The race itself needs CUDA streams and pinned memory (``test_gpu.py``). On the CPU these tests run
torch's real ``foreach_reduce`` through the real ``FSDPParamGroup.post_backward`` and read, from
inside the post-accumulate-grad hooks (which run inside ``foreach_reduce``), the one flag it reads
to choose a non-blocking copy: ``pin_memory`` (set to True after lazy init: see ``_scenarios.py``).
"""

from __future__ import annotations

from typing import Any

import pytest
from _util import FIX, assert_ok, run
from torchfix_core.testing import state_to_expect

HOOKED = ("0.weight", "2.bias")


def _assert_flipped(r: dict[str, Any]) -> None:
    """Each hook saw its own parameter unpinned, every other parameter pinned; all pinned after."""
    assert [(h["step"], h["param"]) for h in r["hooks"]] == [
        (0, "2.bias"),
        (0, "0.weight"),
        (1, "2.bias"),
        (1, "0.weight"),
    ]
    for h in r["hooks"]:
        assert h["pin"] == {n: n != h["param"] for n in h["pin"]}, h
    assert all(all(step.values()) for step in r["after"]), r["after"]


def _assert_untouched(r: dict[str, Any]) -> None:
    assert len(r["hooks"]) == 4, r["hooks"]
    assert all(all(h["pin"].values()) for h in r["hooks"]), r["hooks"]
    assert all(all(step.values()) for step in r["after"]), r["after"]


def test_pending_until_fsdp_is_imported(bug_present: bool) -> None:
    r = run("states")
    assert_ok(r)
    expected = state_to_expect(FIX, bug_present)
    if not r["trigger_imported_by_import_torch"]:
        assert r["before_trigger"] == "pending", r
    assert r["after_trigger"] == expected, r
    assert r["wrapped"] is (expected == "applied"), r


def test_not_needed_where_fixed_upstream(bug_present: bool) -> None:
    if bug_present:
        pytest.skip("torch lacks upstream PR #180666 here: the fix is applied")
    r = run("states", env={"TORCHFIX_FORCE": FIX})  # past the range check: the probe decides
    assert_ok(r)
    assert r["after_trigger"] == "not-needed" and r["wrapped"] is False, r


def test_hooks_run_during_a_non_blocking_copy_fails_without_fix(
    flip_without: dict[str, Any], bug_present: bool
) -> None:
    """The CPU half of the reproduction (the race itself needs CUDA: tests/test_gpu.py): without the
    fix, every hooked parameter keeps ``pin_memory`` True while its hook runs, i.e. on 2.8-2.12 its
    gradient copy is non-blocking and nobody waits for it before the hook reads the gradient."""
    if not bug_present:
        pytest.skip("this torch has upstream's guard (has_post_acc_grad_hook): the copy is blocking for hooks")
    assert flip_without["state"] == "disabled"
    _assert_untouched(flip_without)


def test_wrapper_unpins_hooked_params_for_the_call_with_fix(
    flip_with: dict[str, Any], flip_without: dict[str, Any], bug_present: bool
) -> None:
    if not bug_present:
        assert flip_with["state"] == "not-needed", flip_with
        _assert_untouched(flip_with)  # torch's own guard decides; the flag stays as it is
        return
    assert flip_with["state"] == "applied", flip_with
    _assert_flipped(flip_with)
    # nothing else changes on the CPU: the same gradients, bit for bit
    assert flip_with["grad_sums"] == flip_without["grad_sums"]


def test_groups_sharded_before_apply_are_covered(bug_present: bool) -> None:
    if not bug_present:
        pytest.skip("torch carries upstream PR #180666: nothing to apply")
    r = run("flip", "--late-apply", env={"TORCHFIX_AUTOLOAD": "0"})
    assert_ok(r)
    assert r["state"] == "applied", r
    _assert_flipped(r)


def test_revert_reaches_groups_sharded_while_applied(bug_present: bool) -> None:
    if not bug_present:
        pytest.skip("torch carries upstream PR #180666: nothing to revert")
    r = run("flip", "--late-revert")
    assert_ok(r)
    assert r["state"] != "applied", r
    _assert_untouched(r)
